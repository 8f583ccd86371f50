"""Every time that can judge a goal is the parent's to believe (kernelseek/corroborate.py,
worker_pair.py): the candidate's CUDA-graph time is kept only when a graph burst, m calls per
replay with m the parent's, takes about that long on the parent's clock; its kernel_ms and sync_ms
are re-checked against its per-call time. Whole evaluations through real worker processes
(tests/fixtures/worker/standin_worker.py speaks kernelseek.worker's protocol without a GPU), real
pipes, the real WorkerPair, results on disk and the real goal judge."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelseek import corroborate as CO
from kernelseek import goal as G
from kernelseek import results as R
from kernelseek import timing
from kernelseek.scenarios import Scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "worker"))
from standin_eval import NAIVE, evaluate  # noqa: E402


@pytest.fixture(scope="module")
def graph_run(tmp_path_factory):
    run, rows, meta = evaluate(tmp_path_factory.mktemp("graph"), (
        "ok_honest", "graphliar_tenfold", "graphcount_inflated", "graphnocap_refuses", "slowkernel_forged",
        "strtimes_forged"), graph=True)
    return run, {r.scenario: r for r in rows}


def test_graph_sets_are_the_parents_choice_from_the_scenario_size():
    small = Scenario(name="s", dtype="bf16", batch=1, seqlen_q=128, seqlen_k=128, heads_q=4, heads_kv=2,
                     head_dim=64)
    assert CO.graph_sets(small.min_bytes()) == 8                    # 8 sets still far under 3x the L2
    assert CO.graph_sets(1e9) == 2                                  # a 1 GB set: the pool's minimum of 2
    assert CO.graph_sets(40e6) == timing.sets_needed(40e6) == 5     # 3 x 60 MB over 40 MB, rounded up


def test_an_honest_graph_time_is_corroborated_and_judged(graph_run):
    run, rows = graph_run
    r = rows["ok_honest"]
    assert r.status == "passed", r.reason
    assert r.graph_ms == 1.5 and r.graph_speedup == pytest.approx(0.9 / 1.5)
    g = r.corroboration["graph"]
    # 100 ms of work at the claimed 1.5 ms: 67 calls asked, rounded up to whole replays of 8 calls
    assert g["ok"] and g["sets"] == 8 and g["calls"] == 72 and g["baseline_calls"] == 112
    assert 0.8 < g["ratio"] < 1 + CO.REL_SLACK and g["wall_ms"] >= 72 * 1.5
    assert "not corroborated" not in r.graph_note
    assert r.corroboration["ok"] and r.corroboration["unchecked"] == list(CO.UNCHECKED)   # marked as its word


def test_a_graph_time_ten_times_too_fast_is_moved_out_of_the_row(graph_run):
    run, rows = graph_run
    r = rows["graphliar_tenfold"]
    assert r.status == "passed" and r.speedup == pytest.approx(0.5)     # its per-call time is true
    assert r.graph_ms is None and r.graph_speedup is None                # 6x on the graph measure, gone
    g = r.corroboration["graph"]
    assert g["ok"] is False and g["claimed"]["graph_ms"] == 0.15 and g["ratio"] > 5
    assert g["reason"].startswith("CUDA-graph time not corroborated") and "0.1500" in g["reason"]
    assert r.graph_note.startswith("graph time not corroborated, not used")


def test_a_burst_that_inflates_its_call_count_or_cannot_capture_loses_its_graph_time(graph_run):
    _, rows = graph_run
    inflated, nocap = rows["graphcount_inflated"], rows["graphnocap_refuses"]
    assert inflated.graph_ms is None and "answered 80 calls for 72" in inflated.graph_note
    assert nocap.graph_ms is None and "could not be captured" in nocap.graph_note
    assert inflated.status == nocap.status == "passed"                   # per call they are honest


def test_a_forged_kernel_time_is_checked_against_the_per_call_time(graph_run):
    r = graph_run[1]["slowkernel_forged"]
    assert r.status == "failed" and "work escapes the timed stream" in r.reason and "9.0000" in r.reason
    assert r.speedup is None and r.kernel_speedup is None


def test_times_that_are_not_numbers_fail_the_row_and_judge_nothing(graph_run):
    r = graph_run[1]["strtimes_forged"]
    assert r.status == "failed" and "time_ms '0.001' is not a number" in r.reason, r.reason
    assert "graph_ms '0.001' is not a number" in r.reason and "kernel_ms 'x'" in r.reason
    assert r.time_ms is r.graph_ms is r.kernel_ms is None and r.speedup is None and r.graph_speedup is None


def test_what_is_on_disk_and_what_the_goal_judges_on_the_graph_measure(graph_run):
    run, _ = graph_run
    back = {r.scenario: r for r in R.load(run)[0]}
    assert back["graphliar_tenfold"].graph_ms is None
    assert back["graphliar_tenfold"].corroboration["graph"]["claimed"]["graph_ms"] == 0.15
    v = G.judge_run(run, G.Goal(geomean=0.5, min_speedup=0.5, measure="graph"), kernel=NAIVE)
    by = {x.scenario: x for x in v.rows}
    assert by["ok_honest"].ok and by["ok_honest"].measure == "graph"
    assert by["ok_honest"].speedup == pytest.approx(0.6)
    liar = by["graphliar_tenfold"]                # forged: 0.9 / 0.15 = 6x; judged: no graph speedup
    assert not liar.ok and liar.speedup is None and "no graph speedup" in liar.why
    assert not v.met


def test_accounting_is_the_same_rule_in_the_worker_and_the_parent():
    from kernelseek.worker import _check_accounting
    cases = [(2.0, 1.9, 2.0, ""), (2.0, 9.0, 2.0, "device time"), (2.0, None, 2.0, "no kernel time"),
             (2.0, 1.0, 3.2, "whole device is idle"), (2.0, 1.0, None, "")]
    for time_ms, kernel_ms, sync_ms, want in cases:
        why = CO.accounting(time_ms, kernel_ms, sync_ms)
        assert (want in why) if want else why == "", (time_ms, kernel_ms, sync_ms, why)
        if sync_ms is None:
            continue                                   # the worker's own Timing always has sync_ms
        out = {"status": "passed", "reason": ""}
        _check_accounting(timing.Timing(time_ms, 1.9, 2.1, kernel_ms, 0.01, sync_ms, 10, 2), out)
        assert out["status"] == ("failed" if want else "passed") and out["reason"] == why
    assert CO.accounting(2.0, 2.5 + 0.004, 2.0) == "" and CO.accounting(2.0, 2.5 + 0.006, 2.0)   # 1.25x + 0.005


def test_the_kernels_path_label_reaches_triage_and_a_forged_one_is_replaced(graph_run):
    from kernelseek.triage import group_table
    _, rows = graph_run
    assert rows["ok_honest"].features["path"] == "prefill"
    assert rows["strtimes_forged"].features["path"] == "unreadable"      # an object, not a label
    assert "path" in set(group_table(list(rows.values()))["feature"])
