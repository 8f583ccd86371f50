"""The suspicious flag and exit codes of kernelseek.evaluate, and a whole evaluation that survives a
misbehaving worker, all without a GPU.

make_row is fed replies shaped like the worker's (status, time_ms, baselines {name: {status,
time_ms, version}}): a row is flagged (suspicious) when its speedup is above SUSPICIOUS_SPEEDUP,
and FAILED when its rate is above the GPU's datasheet peak + 5% (TFLOP/s for its dtype, GB/s of
minimum traffic); measured ceilings play no part, and honest numbers are neither. Then
evaluate() runs on a small grid through tests/fixtures/worker/standin_worker.py, which crashes,
hangs, answers garbage, prints noise or fails a check by scenario name: every row must say what
happened and the run must finish with its results file. A cuBLAS kernel is refused before any
worker starts.
"""
from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelseek import evaluate as E
from kernelseek import peaks
from kernelseek import results as R
from kernelseek.scenarios import Scenario

REPO = Path(__file__).resolve().parents[2]
STANDIN = [sys.executable, str(REPO / "tests" / "fixtures" / "worker" / "standin_worker.py")]
NAIVE = REPO / "kernels" / "naive_fwd.cu"
BLAS = REPO / "tests" / "adversarial" / "blas_direct.cu"
S_MAX = E.SUSPICIOUS_SPEEDUP

DENSE = Scenario(name="dense_1k", heads_q=8, heads_kv=8, head_dim=128, batch=2, seqlen_q=1024, seqlen_k=1024)
DECODE = Scenario(name="decode_8k", heads_q=8, heads_kv=1, head_dim=128, batch=4, seqlen_q=1, seqlen_k=8192)


def reply(time_ms, baselines=None, status="passed", reason="", **kw):
    """A worker reply: the candidate's fields and {baseline: {status, time_ms, version}}."""
    if baselines is None:
        baselines = {}
    elif not isinstance(baselines, dict):
        baselines = {"cudnn": {"status": "passed", "time_ms": baselines, "version": "torch 2.x, cuDNN 9"}}
    return {"status": status, "reason": reason, "max_err": 1e-3, "ref_err": 1e-3, "err_bound": 3e-3,
            "err_ratio": 0.3, "time_ms": time_ms, "time_p10_ms": time_ms, "time_p90_ms": time_ms,
            "kernel_ms": time_ms, "host_ms": 0.005, "baselines": baselines, **kw}


def ms_for_tflops(s: Scenario, tflops: float) -> float:
    return s.flops() / (tflops * 1e12) * 1e3


def ms_for_gbps(s: Scenario, gbps: float) -> float:
    return s.min_bytes() / (gbps * 1e9) * 1e3


# ---- the speedup threshold ---------------------------------------------------------------------------
@pytest.mark.parametrize("speedup", [0.3, 0.9, 1.0, 1.1, 1.5, S_MAX])
def test_honest_speedups_are_not_suspicious(speedup):
    row = E.make_row(DENSE, "g", reply(1.0, baselines=speedup * 1.0))
    assert row.status == "passed" and row.baseline == "cudnn"
    assert row.speedup == pytest.approx(speedup)
    assert not row.suspicious and row.suspicious_reason == ""


@pytest.mark.parametrize("speedup", [S_MAX * 1.01, 2 * S_MAX, 1000.0])
def test_speedup_above_the_threshold_is_suspicious(speedup):
    row = E.make_row(DENSE, "g", reply(1.0, baselines=speedup))
    assert row.suspicious
    assert f"speedup {speedup:.2f}x above {S_MAX}x" in row.suspicious_reason


def test_a_gain_over_a_tiny_baseline_kernel_is_left_to_the_fail_lines():
    """Below SUSPICIOUS_MIN_BASE_KERNEL_MS of baseline kernel time a large gain is launch and tile
    quantization (one small block against a 128-row tile), not evidence of skipped work."""
    floor = E.SUSPICIOUS_MIN_BASE_KERNEL_MS
    tiny = {"fa4": {"status": "passed", "time_ms": 0.2, "kernel_ms": floor * 0.9, "version": "x"}}
    row = E.make_row(DENSE, "g", reply(0.005, tiny, kernel_ms=0.004))
    assert row.speedup > S_MAX and row.kernel_speedup > S_MAX and not row.suspicious
    big = {"fa4": {"status": "passed", "time_ms": 0.2, "kernel_ms": floor * 1.1, "version": "x"}}
    row = E.make_row(DENSE, "g", reply(0.005, big, kernel_ms=0.004))
    assert row.suspicious and "above" in row.suspicious_reason
    # the fail lines still apply to tiny shapes: 5000 TFLOP/s is no flag, it is a failure
    row = E.make_row(DENSE, "g", reply(ms_for_tflops(DENSE, 5000.0), tiny, kernel_ms=0.004), H200)
    assert row.status == "failed" and "faster than the hardware allows" in row.reason


def test_speedup_is_against_the_fastest_real_baseline_not_a_stand_in():
    bl = {"cudnn": {"status": "passed", "time_ms": 1.2, "version": "a"},
          "fa2": {"status": "passed", "time_ms": 1.1, "version": "b"},
          "flex": {"status": "failed", "time_ms": 0.1, "reason": "max error", "version": "c"},  # wrong: no bar
          "cudnn-dense-standin": {"status": "passed", "time_ms": 0.01, "version": "d"}}         # not the same work
    row = E.make_row(DENSE, "g", reply(1.0, bl))
    assert row.baseline == "fa2" and row.speedup == pytest.approx(1.1)
    assert row.stand_in["name"] == "cudnn-dense-standin"
    assert not row.suspicious


def test_no_usable_baseline_gives_no_speedup_and_no_flag():
    bl = {"cudnn": {"status": "error", "reason": "cuDNN refused GQA", "version": "a"}}
    row = E.make_row(DENSE, "g", reply(0.001, bl, baselines_skipped=["fa2: no sliding window support"]))
    assert row.speedup is None and row.baseline is None and row.baseline_status == "n/a"
    assert "cuDNN refused GQA" in row.baseline_reason
    assert not row.suspicious


# ---- the fail lines: datasheet peaks + 5% (kernelseek/peaks.py) -----------------------------------
H200 = peaks.lines_for("NVIDIA H200")            # bf16 989 -> 1038.45, fp8 1979 -> 2077.95, 4800 -> 5040 GB/s


def test_the_h200_lines_are_the_datasheet_peaks_plus_the_margin():
    assert H200.peaks.name == "H200 SXM" and peaks.MARGIN == 0.05
    assert H200.tflops("bf16") == pytest.approx(989 * 1.05) and H200.tflops("fp16") == pytest.approx(989 * 1.05)
    assert H200.tflops("fp8") == pytest.approx(1979 * 1.05) and H200.gbps == pytest.approx(4800 * 1.05)
    # torch's names of other parts; GH200 contains "H200" and must not be taken for one
    assert peaks.peaks_for("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert peaks.peaks_for("NVIDIA H100 PCIe").hbm_gbps == 2000.0
    assert peaks.peaks_for("NVIDIA GH200 480GB").name.startswith("GH200")
    assert peaks.peaks_for("NVIDIA A100-SXM4-80GB").fp8_tflops is None
    assert peaks.peaks_for("StandIn GPU") is None and peaks.lines_for(None) is None


@pytest.mark.parametrize("tflops", [1100.0, 2000.0, 14500.0])
def test_tflops_above_the_line_fails_the_row_naming_rate_and_line(tflops):
    t = ms_for_tflops(DENSE, tflops)
    row = E.make_row(DENSE, "g", reply(t, baselines=t * 1.2), H200)
    assert row.status == "failed" and not row.suspicious
    assert f"{tflops:,.0f} TFLOP/s" in row.reason and "H200 SXM bf16 datasheet peak 989 + 5% = 1,038" in row.reason
    assert row.speedup is None and row.tflops is None          # a failed row carries no rates


@pytest.mark.parametrize("tflops", [300.0, 773.0 * 1.03, 989.0, 1030.0])
def test_tflops_under_the_line_passes_even_above_the_measured_ceiling(tflops):
    """773 TFLOP/s is the measured bf16 matmul ceiling; FA4 reaches 103% of it honestly."""
    t = ms_for_tflops(DENSE, tflops)
    row = E.make_row(DENSE, "g", reply(t, baselines=t * 1.1), H200)
    assert row.status == "passed" and row.tflops == pytest.approx(tflops)
    assert not row.suspicious, row.suspicious_reason


def test_the_line_of_the_scenarios_dtype_is_used():
    fp8 = Scenario(name="fp8", heads_q=8, heads_kv=8, head_dim=128, batch=2, seqlen_q=1024, seqlen_k=1024,
                   dtype="fp8")
    t8 = ms_for_tflops(fp8, 1500.0)               # above the bf16 line, under the fp8 one
    assert E.make_row(fp8, "g", reply(t8, baselines=t8), H200).status == "passed"
    t8 = ms_for_tflops(fp8, 2100.0)
    r = E.make_row(fp8, "g", reply(t8, baselines=t8), H200)
    assert r.status == "failed" and "fp8 datasheet peak 1,979" in r.reason
    a100 = peaks.lines_for("NVIDIA A100-SXM4-80GB")     # no fp8 tensor cores: no fp8 FLOP line
    assert "TFLOP/s" not in E.make_row(fp8, "g", reply(t8, baselines=t8), a100).reason


def test_bandwidth_above_the_hbm_line_fails():
    t = ms_for_gbps(DECODE, 5100.0)
    row = E.make_row(DECODE, "g", reply(t, baselines=t * 1.3), H200)
    assert row.status == "failed"
    assert "5,100 GB/s of minimum traffic" in row.reason and "HBM datasheet peak 4,800 + 5% = 5,040" in row.reason


@pytest.mark.parametrize("gbps", [4320.0, 4440.0, 4800.0, 5030.0])
def test_bandwidth_under_the_hbm_line_passes(gbps):
    """fa3_hopper read 4.44 TB/s on bench26 row 23, above the measured 4.32 TB/s: honest."""
    t = ms_for_gbps(DECODE, gbps)
    row = E.make_row(DECODE, "g", reply(t, baselines=t * 1.3), H200)
    assert row.status == "passed" and not row.suspicious


def test_a_graph_time_above_the_line_fails_too():
    t = ms_for_tflops(DENSE, 500.0)
    row = E.make_row(DENSE, "g", reply(t, baselines=t, graph_ms=ms_for_tflops(DENSE, 3000.0)), H200)
    assert row.status == "failed" and "graph_ms" in row.reason


def test_no_line_for_an_unknown_gpu():
    t = ms_for_tflops(DENSE, 1e6)
    assert E.make_row(DENSE, "g", reply(t, baselines=t), None).status == "passed"


def test_a_failed_row_has_no_rates_and_is_never_flagged():
    # a kernel that skipped its work is fast AND wrong: the failure is the verdict, not the speed
    row = E.make_row(DENSE, "g", reply(1e-4, baselines=1.0, status="failed", reason="max error 2 > bound"), H200)
    assert row.status == "failed" and row.reason == "max error 2 > bound"
    assert row.speedup is None and row.tflops is None and row.gbps is None
    assert not row.suspicious
    assert row.baseline == "cudnn"                 # the baseline is still reported


def test_a_reply_without_status_is_an_error_row():
    row = E.make_row(DENSE, "g", {"reason": "?"})
    assert row.status == "error" and not row.suspicious


# ---- exit codes ---------------------------------------------------------------------------------------
def _r(status, speedup=1.0, time_ms=1.0):
    return R.Row(scenario=f"s_{status}", status=status, speedup=speedup if status == "passed" else None,
                 time_ms=time_ms)


@pytest.mark.parametrize("statuses, code", [
    (["passed", "passed"], 0),
    (["passed", "failed"], 1),
    (["passed", "error"], 4),
    (["passed", "timeout"], 4),
    (["failed", "error", "timeout"], 1),           # a wrong answer outranks a crash
    (["refused", "failed", "passed"], 3),
    (["refused"], 3),
])
def test_exit_code_on_mixed_statuses(statuses, code):
    assert E.exit_code([_r(s) for s in statuses]) == code


def test_exit_code_for_rows_without_a_baseline():
    assert E.exit_code([_r("passed"), _r("passed", speedup=None)]) == 5       # timed, no baseline: n/a
    assert E.exit_code([_r("passed", None, None), _r("passed", None, None)]) == 0   # check only


# ---- a whole evaluation through the stand-in worker ------------------------------------------------
GRID = textwrap.dedent("""\
    grid: standin
    defaults: {dtype: bf16, batch: 1, seqlen_q: 128, seqlen_k: 128, heads_q: 4, heads_kv: 2, head_dim: 64}
    scenarios:
    - {name: ok_first}
    - {name: crash_in_kernel}
    - {name: ok_after_crash}
    - {name: hang_forever}
    - {name: garbage_reply}
    - {name: noisy_printf}
    - {name: fail_check}
    - {name: ok_last, seqlen_q: 113, seqlen_k: 203}
""")
EXPECTED = {  # scenario -> (status, substring of the reason)
    "ok_first": ("passed", ""),
    "crash_in_kernel": ("error", "worker crashed (exit 3)"),
    "ok_after_crash": ("passed", ""),
    "hang_forever": ("timeout", "no reply within"),
    "garbage_reply": ("error", "malformed reply"),
    "noisy_printf": ("passed", ""),
    "fail_check": ("failed", "bound"),
    "ok_last": ("passed", ""),
}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "kseek-build-cache"   # naive_fwd built once per session


@pytest.fixture
def grid(tmp_path) -> str:
    p = tmp_path / "standin.yaml"
    p.write_text(GRID)
    return str(p)


def test_evaluate_survives_every_misbehaving_scenario(grid, tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(shared_cache))
    t0 = time.monotonic()
    run, rows, meta = E.evaluate(str(NAIVE), grid, baseline="cudnn", timeout_s=2.0, budget_s=0.1,
                                 runs_dir=str(tmp_path / "runs"), progress=False, worker_cmd=STANDIN,
                                 command="test_suspicious")
    assert time.monotonic() - t0 < 120
    assert [r.scenario for r in rows] == list(EXPECTED)            # every row present, in grid order
    for r in rows:
        status, why = EXPECTED[r.scenario]
        assert r.status == status, (r.scenario, r.status, r.reason)
        assert why in r.reason, (r.scenario, r.reason)
        assert not r.suspicious
        if status == "passed":
            assert r.speedup == pytest.approx(0.5) and r.baseline == "cudnn" and r.tflops > 0
        else:
            assert r.speedup is None
    assert meta["worker_restarts"] == 3                          # after the crash, the hang, the garbage
    assert meta["env"]["gpu"] == "StandIn GPU"
    assert E.exit_code(rows) == 1                                # a failed check outranks the errors
    # the record on disk: results.json loadable, meta.json, the build log, the worker's stderr
    loaded, lmeta = R.load(run)
    assert [(r.scenario, r.status, r.reason) for r in loaded] == [(r.scenario, r.status, r.reason) for r in rows]
    assert lmeta["kernel"] == str(NAIVE) and lmeta["worker_restarts"] == 3
    doc = json.loads((run / "results.json").read_text())
    assert doc["summary"]["scenarios"] == 8 and doc["summary"]["passed"] == 4
    assert doc["summary"]["failed"] == 1 and doc["summary"]["errors"] == 3
    assert json.loads((run / "meta.json").read_text())["build"]["ok"] is True
    cpu = json.loads((run / "meta.json").read_text())["host_cpu_pct"]   # from /proc/stat (Linux)
    assert set(cpu) >= {"user", "idle", "steal"} and sum(cpu.values()) == pytest.approx(100, abs=0.1)
    assert "kernel printf noise" in (run / "worker.log").read_text()


@pytest.mark.parametrize("scenarios, code", [("ok_first,ok_last", 0), ("ok_first,crash_in_kernel", 4),
                                             ("garbage_reply,noisy_printf", 4)])
def test_evaluate_exit_code_without_failed_checks(grid, tmp_path, shared_cache, monkeypatch, scenarios, code):
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(shared_cache))
    _, rows, _ = E.evaluate(str(NAIVE), grid, baseline="cudnn", scenarios=scenarios, timeout_s=2.0,
                            runs_dir=str(tmp_path / "runs"), progress=False, worker_cmd=STANDIN)
    assert len(rows) == 2 and E.exit_code(rows) == code


def test_a_refused_kernel_never_reaches_a_worker(grid, tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(shared_cache))
    # a worker that would fail loudly: if evaluate started one, rows would be errors, not refused
    never = [sys.executable, "-c", "import sys; sys.exit(7)"]
    run, rows, meta = E.evaluate(str(BLAS), grid, baseline="cudnn", timeout_s=2.0,
                                 runs_dir=str(tmp_path / "runs"), progress=False, worker_cmd=never)
    assert len(rows) == len(EXPECTED)
    for r in rows:
        assert r.status == "refused"
        assert r.reason.startswith("constraint check refused the kernel: ")
        assert "symbol cublasCreate_v2 imported (undefined)" in r.reason and "cuBLAS" in r.reason
        assert r.time_ms is None and not r.suspicious
    assert E.exit_code(rows) == 3
    assert any("cublasCreate_v2" in c for c in meta["constraints"])
    assert not (run / "worker.log").exists()
    loaded, _ = R.load(run)
    assert {r.status for r in loaded} == {"refused"}


def test_cpu_shares_reads_proc_stat_and_names_steal(tmp_path):
    f = tmp_path / "stat"
    f.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3\n")
    a = E.cpu_times(str(f))
    assert a == {"user": 100, "nice": 0, "system": 50, "idle": 800, "iowait": 10, "irq": 0,
                 "softirq": 0, "steal": 40}
    b = {**a, "user": 160, "idle": 1100, "steal": 140}       # +60 user, +300 idle, +100 steal of 460
    sh = E.cpu_shares(a, b)
    assert sh["steal"] == pytest.approx(21.74) and sh["idle"] == pytest.approx(65.22)
    assert E.cpu_shares(a, a) is None and E.cpu_shares(None, b) is None
    assert E.cpu_times(str(tmp_path / "missing")) is None
    real = E.cpu_times()                                       # this machine's own counters
    assert real is not None and real["idle"] > 0
