"""The parent's clock against a worker's claimed time (kernelseek/corroborate.py): the arithmetic,
and whole evaluations through stand-in workers whose bursts take the claimed time or 10x it."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from kernelseek import corroborate as CO
from kernelseek import evaluate as E
from kernelseek import results as R
from kernelseek.worker_pair import fastest_baseline

REPO = Path(__file__).resolve().parents[2]
STANDIN = [sys.executable, str(REPO / "tests" / "fixtures" / "worker" / "standin_worker.py")]
NAIVE = REPO / "kernels" / "naive_fwd.cu"


def test_burst_size_follows_the_claim_within_bounds():
    assert CO.burst_calls(1.0) == 100 and CO.burst_calls(2.0) == 50
    assert CO.burst_calls(50.0) == CO.MIN_CALLS and CO.burst_calls(1e-6) == CO.MAX_CALLS
    assert CO.burst_calls(0) == CO.MAX_CALLS and CO.burst_calls(float("nan")) == CO.MAX_CALLS


def test_an_honest_claim_passes_with_the_trusted_overhead_taken_off():
    # baseline: 1 ms claimed, 100 calls in 112 ms with 2 ms fixed -> 0.1 ms per call of overhead
    v = CO.judge(0.5, wall_ms=2 + 200 * 0.6, calls=200, fixed_ms=2.0, baseline=(112.0, 100, 1.0))
    assert v.ok and v.overhead_ms == pytest.approx(0.1) and v.implied_ms == pytest.approx(0.5)
    assert v.as_dict()["ratio"] == pytest.approx(1.0) and v.reason == ""


def test_a_claim_ten_times_too_fast_fails_naming_the_numbers():
    v = CO.judge(0.1, wall_ms=2 + 1000 * 1.0, calls=1000, fixed_ms=2.0, baseline=(102.0, 100, 1.0))
    assert not v.ok and v.implied_ms == pytest.approx(1.0)
    assert v.reason.startswith("timing not corroborated") and "1000 calls" in v.reason and "0.1000" in v.reason


def test_the_slack_is_the_boundary():
    claimed = 0.2
    edge = claimed * (1 + CO.REL_SLACK) + CO.ABS_SLACK_MS
    assert CO.judge(claimed, wall_ms=1 + 100 * edge * 0.999, calls=100, fixed_ms=1.0).ok
    assert not CO.judge(claimed, wall_ms=1 + 100 * edge * 1.01, calls=100, fixed_ms=1.0).ok


def test_overhead_is_never_negative_and_without_a_baseline_is_zero():
    assert CO.overhead_ms(50.0, 100, 1.0, 1.0) == 0.0            # a burst faster than the timing
    assert CO.judge(1.0, 101.0, 100, 1.0).overhead_ms == 0.0


def test_fastest_baseline_skips_stand_ins_and_failures():
    bl = {"cudnn": {"status": "passed", "time_ms": 2.0}, "fa3": {"status": "passed", "time_ms": 1.0},
          "sdpa_standin": {"status": "passed", "time_ms": 0.1}, "fa4": {"status": "failed", "time_ms": 0.5}}
    assert fastest_baseline(bl) == ("fa3", 1.0) and fastest_baseline({}) is None


GRID = textwrap.dedent("""\
    grid: standin
    defaults: {dtype: bf16, batch: 1, seqlen_q: 128, seqlen_k: 128, heads_q: 4, heads_kv: 2, head_dim: 64}
    scenarios:
    - {name: ok_honest}
    - {name: liar_tenfold}
""")


def test_a_worker_that_claims_2ms_but_takes_20ms_fails_and_the_honest_row_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "cache"))
    grid = tmp_path / "g.yaml"
    grid.write_text(GRID)
    run, rows, meta = E.evaluate(str(NAIVE), str(grid), baseline="cudnn", timeout_s=30.0, budget_s=0.1,
                                 runs_dir=str(tmp_path / "runs"), progress=False, worker_cmd=STANDIN)
    honest, liar = rows
    assert honest.status == "passed", honest.reason
    c = honest.corroboration
    assert c["ok"] and c["calls"] == 50 and c["baseline_calls"] == 100 and 0.8 < c["ratio"] < CO.REL_SLACK + 1
    assert c["candidate_request_s"] > 0 and c["baseline_request_s"] > 0 and c["wall_ms"] >= 100
    assert liar.status == "failed" and liar.reason.startswith("timing not corroborated"), liar.reason
    assert liar.corroboration["ratio"] > 5 and liar.speedup is None
    back, _ = R.load(run)                                        # the external times are on disk
    assert back[1].corroboration["wall_ms"] == liar.corroboration["wall_ms"]
    assert R.load(run) and (run / "worker_baseline.log").exists()
