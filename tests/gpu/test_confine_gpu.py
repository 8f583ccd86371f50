"""The confined worker on the GPU: naive_fwd on smoke, built and run under bubblewrap (as campaign
evaluations are), gives the same statuses and baselines as the plain run.
Run on the H200: `bash tools/confine_check.sh` (it carries or finds bwrap first)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]


def test_naive_on_smoke_confined_matches_plain(tmp_path):
    from kernelseek.confine import unavailable
    from kernelseek.evaluate import evaluate
    assert unavailable() is None, unavailable()          # a confined campaign needs it: fail, never skip
    kw = dict(runs_dir=str(tmp_path), budget_s=0.1, progress=False)
    _, plain, _ = evaluate("kernels/naive_fwd.cu", "smoke", "best", **kw)
    _, conf, meta = evaluate("kernels/naive_fwd.cu", "smoke", "best", confine=True, **kw)
    assert meta["confined"] is True and meta["env"]["gpu"] and meta["env"]["cuda_available"]
    assert [r.status for r in conf] == [r.status for r in plain], [(r.scenario, r.reason) for r in conf]
    assert all(r.status == "passed" and r.time_ms for r in conf), [(r.scenario, r.reason) for r in conf]
    assert [r.baseline for r in conf] == [r.baseline for r in plain]     # the same baselines were found
