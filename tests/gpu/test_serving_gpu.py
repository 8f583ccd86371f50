"""The serving host path on the GPU (issue 26): one step's call takes no host sync and no device->host copy,
and it can be captured in a CUDA graph whose replay gives the eager answer. Rows: a CPU-sized copy of every
serving row (serving_grid.scaled: the same route through attention_plan), and for the sync check every real
row (for the capture, s01).
Never run yet (session 9 had no GPU): tools/gpu_serving.sh runs it after the grid."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import attention_core as core  # noqa: E402
from kernelseek import serving_grid as G  # noqa: E402

ROWS = G.load_rows()
CASES = [G.scaled(r, decodes=20) for r in ROWS] + [ROWS[0]]
SYNC_CASES = [G.scaled(r, decodes=20) for r in ROWS] + ROWS     # every real row too (its plan, its sizes)


@pytest.fixture(scope="module", autouse=True)
def _kernel_loaded():
    core._lib()   # build or load once, outside every check (it blocks, once per process)


@pytest.mark.parametrize("row", SYNC_CASES, ids=lambda r: r.name)
def test_step_has_no_host_sync(row):
    call = G.make_call(row, device="cuda", seed=3)
    G.ours(call)                                   # first call: allocator growth, library state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")        # any synchronizing CUDA call raises from here on
    try:
        o = G.ours(call)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert core.RECORD["paths"], "no kernel path recorded"
    if row.name.endswith("_cpu"):                  # the real rows are checked by tools/serving_bench.py
        ref = G.independent(call, dtype=torch.float32)
        assert float((o.float() - ref).abs().max()) <= 2e-2
    del call, o
    torch.cuda.empty_cache()


@pytest.mark.parametrize("row", CASES, ids=lambda r: r.name)
def test_step_captures_in_a_cuda_graph(row):
    call = G.make_call(row, device="cuda", seed=4)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager = G.ours(call)                       # warm on the capture stream
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        captured = G.ours(call)
    call.t["q"].normal_()                          # new content at the same pointers
    g.replay()
    torch.cuda.synchronize()
    fresh = G.ours(call)
    torch.cuda.synchronize()
    assert "naive" not in core.RECORD["paths"]              # the MLA (qv) row too: kernels/qv_fwd.cu
    assert ("qv" in core.RECORD["paths"]) == bool(row.qv)
    err = float((captured.float() - fresh.float()).abs().max())
    assert err <= 1e-2, f"the replay did not recompute from the new q (max diff {err})"
    assert float((eager.float() - fresh.float()).abs().max()) > 0.1    # new q: a different answer
