"""kernels/qv_fwd.cu's host side without a GPU: a real nvcc build through the harness (constraint check
included), its parameter checks (status codes, nothing launched), its workspace sizing, and the plan's
choice between the qv kernel and the concatenated route."""
import ctypes

import pytest

torch = pytest.importorskip("torch")

from kernelseek import abi, qv_attention  # noqa: E402
from kernelseek import attention as A  # noqa: E402
from kernelseek import attention_core as core  # noqa: E402
from kernelseek.reference_fa3 import attention_ref  # noqa: E402

OK, INVALID, UNSUPPORTED, WORKSPACE, ABI = 0, 2, 1, 4, 5


def _params(batch=4, sq=1, sk=2049, hq=16, hkv=1, d=64, dv=512, splits=0):
    """A dense decode-shaped call with aligned fake addresses (the checks never dereference them)."""
    p = abi.KseekParams()
    p.abi_version, p.dtype, p.out_dtype = abi.ABI_VERSION, 0, 0
    p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v = batch, sq, sk, hq, hkv, d, dv
    p.q, p.k, p.v, p.o = 0x100000, 0x200000, 0x300000, 0x400000
    p.q_batch_stride, p.q_row_stride, p.q_head_stride = sq * hq * d, hq * d, d
    p.k_batch_stride, p.k_row_stride, p.k_head_stride = sk * hkv * d, hkv * d, d
    p.v_batch_stride, p.v_row_stride, p.v_head_stride = sk * hkv * dv, hkv * dv, dv
    p.o_batch_stride, p.o_row_stride, p.o_head_stride = sq * hq * dv, hq * dv, dv
    p.scale, p.window_left, p.window_right, p.num_splits = 0.07, -1, -1, splits
    return p


def _fwd(p, qv=0x500000, strides=(16 * 512, 16 * 512, 512)):
    fwd = qv_attention._lib()[0]
    return fwd(ctypes.byref(p), qv, *strides, None)


def test_library_builds_and_refuses_what_it_does_not_take():
    assert _fwd(_params()) == WORKSPACE                 # a split decode needs its workspace: refused, not launched
    p = _params()
    p.abi_version = 99
    assert _fwd(p) == ABI
    assert _fwd(_params(), qv=None) == WORKSPACE        # no qv: the plain D 64 / Dv 512 call, still split
    p = _params()
    p.q = None
    assert _fwd(p) == INVALID                           # no q
    p = _params()
    p.heads_q = 15                                      # not a multiple of heads_kv
    p.heads_kv = 2
    assert _fwd(p) == INVALID
    assert _fwd(_params(d=128)) == UNSUPPORTED          # FA3's qv shapes only: D 64
    assert _fwd(_params(dv=128)) == UNSUPPORTED         # Dv 256 / 512
    p = _params()
    p.dtype = p.out_dtype = 2                           # fp8: FA3 refuses it with qv too
    assert _fwd(p) == UNSUPPORTED
    p = _params()
    p.sinks = 0x600000
    assert _fwd(p) == UNSUPPORTED
    p = _params()
    p.k_row_stride = 68                                 # rows not 16-byte aligned: cp.async cannot copy them
    assert _fwd(p) == UNSUPPORTED
    assert _fwd(_params(), qv=0x500008) == UNSUPPORTED  # qv not 16-byte aligned
    assert _fwd(_params(), strides=(16 * 512, 16 * 512, 516)) == UNSUPPORTED


def test_workspace_is_sized_by_the_split_count():
    ws = qv_attention._lib()[1]
    assert ws(ctypes.byref(_params(splits=1))) == 0                      # one split: o / lse written directly
    rows = 4 * 1 * 16                                                     # B x Hkv x rows per KV head (16)
    assert ws(ctypes.byref(_params(splits=4))) == 4 * rows * (512 + 1) * 4 + 256
    assert ws(ctypes.byref(_params(splits=0))) > ws(ctypes.byref(_params(splits=4)))   # its own choice: more
    assert ws(ctypes.byref(_params(sq=300, hq=6, hkv=2, splits=0))) == 0  # 900 rows per KV head: no split
    p = _params(splits=4)
    buf = (ctypes.c_uint8 * 16)()
    p.workspace, p.workspace_bytes = ctypes.addressof(buf), 16
    assert _fwd(p) == WORKSPACE                                           # too small: refused


def test_takes_only_what_the_kernel_computes():
    q, k = torch.zeros(1, 2, 4, 64, dtype=torch.bfloat16), torch.zeros(1, 9, 4, 64, dtype=torch.bfloat16)
    v, qv = torch.zeros(1, 9, 4, 512, dtype=torch.bfloat16), torch.zeros(1, 2, 4, 512, dtype=torch.bfloat16)
    assert not qv_attention.takes(q, k, v, qv)        # CPU tensors: the reference answers the concatenated call
    assert not qv_attention.takes(q, k, v, None)
    # the A/B switch: 2 (warp-specialized, TMA) by default, 3 its cp.async form, 4 / 5 its overlap always / never,
    # each setting read back, out-of-range values clamped
    assert qv_attention.set_big_kernel(1) == 2 and qv_attention.set_big_kernel(0) == 1
    assert qv_attention.set_big_kernel(7) == 0 and qv_attention.set_big_kernel(3) == 5
    assert qv_attention.set_big_kernel(4) == 3 and qv_attention.set_big_kernel(-1) == 4
    assert qv_attention.set_big_kernel(2) == 0 and qv_attention.set_big_kernel(2) == 2


def test_cpu_call_takes_the_concatenated_route_and_matches_the_reference():
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 3, 4, 64, generator=g), torch.randn(1, 20, 2, 64, generator=g)
    v, qv = torch.randn(1, 20, 2, 256, generator=g), torch.randn(1, 3, 4, 256, generator=g)
    q, k, v, qv = (t.to(torch.bfloat16) for t in (q, k, v, qv))
    o, lse = A.flash_attn_func(q, k, v, qv=qv, causal=True, return_attn_probs=True)
    assert core.RECORD["steps"][0] == "qv-concat" and core.RECORD["paths"] == ["reference"]
    ro, rl = attention_ref(q, k, v, qv=qv, causal=True)
    assert (o.double() - ro).abs().max().item() < 2e-2
    assert (lse.double() - rl).abs().max().item() < 1e-3
