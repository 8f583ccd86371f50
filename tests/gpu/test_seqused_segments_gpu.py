"""kernels/seqused_segments.cu against the torch composition it replaces, and seqused_q through the API."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import attention as A  # noqa: E402
from kernelseek import attention_core as C  # noqa: E402
from kernelseek import attention_plan as P  # noqa: E402
from kernelseek import reference_fa3 as R  # noqa: E402
from kernelseek import seqused_segments as S  # noqa: E402


def _i32(xs):
    return torch.tensor(xs, dtype=torch.int32, device="cuda")


@pytest.mark.parametrize("lens_q, used_q, lens_k, used_k", [
    ([5, 0, 7, 3], [3, 0, 9, -2], [9, 4, 7, 0], [6, 4, 7, 0]),        # over-long and negative seqused_q, empty rows
    ([1000, 1, 2000], [999, 1, 0], [1000, 3000, 1], None),           # no seqused_k
    ([7] * 700, list(range(700)), [9] * 700, [5] * 700),             # several blocks' worth of sequences
])
def test_kernel_matches_the_torch_composition(lens_q, used_q, lens_k, used_k):
    cu = lambda lens: _i32([0] + torch.tensor(lens).cumsum(0).tolist())   # noqa: E731
    cu_q, cu_k = cu(lens_q), cu(lens_k)
    uk = _i32(used_k) if used_k is not None else (cu_k[1:] - cu_k[:-1])
    p = P.Problem(q=None, k=None, v=None, kv="packed", batch=len(lens_q), max_q=1, max_k=1, scale=1.0,
                  seqused_q=_i32(used_q))
    saved = S.segments
    S.segments = lambda *a: None
    try:
        want = P._seqused_segments(p, cu_q, cu_k, uk)[:3]
    finally:
        S.segments = saved
    got = S.segments(cu_q, _i32(used_q), cu_k, _i32(used_k) if used_k is not None else None)
    torch.cuda.synchronize()
    for g, w in zip(got, want):
        assert torch.equal(g, w.to(torch.int32))


def test_api_seqused_q_one_segment_launch_and_the_reference():
    g = torch.Generator(device="cuda").manual_seed(3)
    lens_q, lens_k = [300, 1, 77], [500, 40, 77]
    cu = lambda lens: _i32([0] + torch.tensor(lens).cumsum(0).tolist())   # noqa: E731
    q = torch.randn(sum(lens_q), 8, 128, generator=g, device="cuda").bfloat16()
    k = torch.randn(sum(lens_k), 2, 128, generator=g, device="cuda").bfloat16()
    v = torch.randn(sum(lens_k), 2, 128, generator=g, device="cuda").bfloat16()
    used_q, used_k = _i32([250, 0, 77]), _i32([480, 40, 50])
    o, lse = A.flash_attn_varlen_func(q, k, v, cu(lens_q), cu(lens_k), 300, 500, seqused_q=used_q, seqused_k=used_k,
                                      causal=True, return_attn_probs=True)
    assert C.RECORD["steps"] == ["packed", "seqused-q-segments"] and C.RECORD["paths"] == ["prefill"], C.RECORD
    ro, rl = R.attention_ref(q.cpu(), k.cpu(), v.cpu(), cu_seqlens_q=cu(lens_q).cpu(), cu_seqlens_k=cu(lens_k).cpu(),
                             seqused_q=used_q.cpu(), seqused_k=used_k.cpu(), causal=True)
    assert (o.cpu().double() - ro).abs().max().item() < 2e-2
    fin = torch.isfinite(rl)
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(rl))
    assert (lse.cpu().double()[fin] - rl[fin]).abs().max().item() < 1e-3
    assert (o[250:301] == 0).all()                      # rows past seqused_q: zeros (and lse -inf, checked above)
