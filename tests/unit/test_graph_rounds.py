"""--graph-rounds (graph_timing.py, worker_pair.WorkerPair._graph_rounds): after each side's solo graph
timing, rounds of replays alternate between the candidate and every graphed baseline, and the medians over
the rounds are the graph times. Real worker processes (tests/fixtures/worker/standin_worker.py speaks the
worker's protocol without a GPU), real pipes, the real WorkerPair, results on disk."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelseek import evaluate as E
from kernelseek import results as R
from kernelseek import worker_pair as WP

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "worker"))
from standin_eval import NAIVE, STANDIN, evaluate  # noqa: E402

NAMES = ("ok_honest", "drift_states", "roundstr_forged", "roundfail_stale")


def _run(tmp, rounds):
    run, rows, meta = evaluate(tmp, NAMES, tag=f"runs{rounds}", graph=True, graph_rounds=rounds)
    return run, {r.scenario: r for r in rows}, meta


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rounds")
    return _run(tmp, 0), _run(tmp, 3)


def test_rounds_replace_a_solo_time_taken_in_another_state(runs):
    (_, solo, meta0), (run, rounds, meta3) = runs
    assert meta0["graph_rounds"] == 0 and meta3["graph_rounds"] == 3
    # the rounds' cost is a phase of its own, only when they ran
    assert "graph_rounds" not in meta0["phases_s"] and meta3["phases_s"]["graph_rounds"] > 0
    d0, d3 = solo["drift_states"], rounds["drift_states"]
    # solo: the baseline was timed in a slower moment (1.08 ms, not 0.9): 0.72x instead of 0.6x
    assert d0.graph_speedup == pytest.approx(1.08 / 1.5) and "graph_rounds" not in d0.corroboration
    # rounds: both sides at 0.9, 1.0, 1.1 x their speed, round by round: medians 1.5 and 0.9
    assert d3.status == "passed" and d3.graph_ms == pytest.approx(1.5)
    assert d3.baseline_graph_ms == pytest.approx(0.9) and d3.graph_speedup == pytest.approx(0.6)
    g = d3.corroboration["graph_rounds"]
    assert g["rounds"] == 3 and g["replays"] == WP.ROUND_REPLAYS and g["order"] == ["candidate", "cudnn"]
    assert g["solo_ms"] == {"candidate": 1.5, "cudnn": 1.08}
    # every replay is kept, round by round (the stand-in's k-th round runs at 0.9 + 0.1 k of its speed)
    assert g["times_ms"]["cudnn"] == [pytest.approx(0.9 * f) for f in (0.9, 1.0, 1.1) for _ in range(WP.ROUND_REPLAYS)]
    assert len(g["times_ms"]["candidate"]) == 3 * WP.ROUND_REPLAYS
    # the parent's clock per implementation (3 requests each), within the phase it belongs to
    assert set(g["wall_s"]) == {"candidate", "cudnn"} and all(v > 0 for v in g["wall_s"].values())
    assert sum(g["wall_s"].values()) <= meta3["phases_s"]["graph_rounds"]
    assert d3.baselines["cudnn"]["graph_solo_ms"] == 1.08
    assert d3.corroboration["graph"]["ok"]                 # the rounds' median is what the parent's clock judged
    back = {r.scenario: r for r in R.load(run)[0]}
    assert back["drift_states"].graph_speedup == pytest.approx(0.6)


def test_an_honest_row_is_unchanged_by_rounds_in_a_steady_state(runs):
    (_, solo, _), (_, rounds, _) = runs
    assert solo["ok_honest"].graph_speedup == pytest.approx(rounds["ok_honest"].graph_speedup) == pytest.approx(0.6)


def test_forged_or_failed_round_replies_fail_the_row(runs):
    _, (_, rounds, _) = runs
    s, f = rounds["roundstr_forged"], rounds["roundfail_stale"]
    assert s.status == "failed" and "graph rounds: the candidate's worker: graph_more replied" in s.reason, s.reason
    assert f.status == "failed" and "a timed call's output is wrong" in f.reason, f.reason
    assert s.graph_speedup is None and f.graph_speedup is None


def test_rounds_alternate_their_order():
    o = ["candidate", "fa4", "fa3"]
    assert [WP.round_order(o, k) for k in range(3)] == [o, o[::-1], o]
    assert o == ["candidate", "fa4", "fa3"]                      # the caller's list is left alone


def test_round_times_take_only_n_positive_numbers():
    ok = {"status": "passed", "times_ms": [1.0, 2, 3.5]}
    assert WP.round_times(ok, 3) == [1.0, 2.0, 3.5]
    for bad in ([1.0, 2.0], [1.0, "2", 3.0], [1.0, True, 3.0], [1.0, 0.0, 3.0], [1.0, float("nan"), 2.0], "1,2,3"):
        assert isinstance(WP.round_times({"status": "passed", "times_ms": bad}, 3), str), bad
    assert WP.round_times({"status": "error", "reason": "no graph"}, 3) == "error: no graph"


@pytest.mark.parametrize("n", [-1, 21, 2.5, True, "3"])
def test_graph_rounds_out_of_range_is_refused_before_anything_runs(tmp_path, n):
    with pytest.raises(ValueError, match="--graph-rounds"):
        E.evaluate(str(NAIVE), "smoke", runs_dir=str(tmp_path / "runs"), progress=False, worker_cmd=STANDIN,
                   graph=True, graph_rounds=n)
    assert not (tmp_path / "runs").exists()
