"""`kernelseek eval` end to end on the GPU: naive_fwd on smoke against the best baseline."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]


def test_naive_on_smoke_passes_and_is_timed(tmp_path):
    from kernelseek.evaluate import evaluate, exit_code
    run, rows, meta = evaluate("kernels/naive_fwd.cu", "smoke", "best", runs_dir=str(tmp_path), budget_s=0.1,
                               progress=False)
    assert all(r.status == "passed" for r in rows), [(r.scenario, r.reason) for r in rows if r.status != "passed"]
    assert all(r.time_ms and r.time_ms > 0 and r.kernel_ms and r.host_ms for r in rows)
    assert all(r.err_ratio is not None and r.err_ratio <= 1 for r in rows)
    assert meta["env"]["gpu"] and meta["env"]["driver"] and meta["kernel_sha256"]
    assert not any(r.suspicious for r in rows), [(r.scenario, r.baseline, r.speedup, r.kernel_speedup, r.suspicious_reason)
                                                for r in rows if r.suspicious]
    timed = [r for r in rows if r.speedup]
    assert timed, "at least one smoke scenario has a baseline"
    assert exit_code(rows) in (0, 5)
    assert (run / "results.json").exists() and (run / "build" / "ptxas.json").exists()
