"""kernels/seqused_segments.cu without a GPU: its host-only build (host_standins.segments_host_lib: the real
source, its kernel run on the host for every (block, thread) of its grid) against the torch composition it
replaces in attention_plan._seqused_segments, with used_k given and with used_k NULL (what the plan passes
since the fast path caches seqused_q calls: the kernel reads each sequence's key rows from cu_k itself);
and, through flash_attn_varlen_func, that kseek_fwd reads the same segments whichever of the three made them.
"""
import ctypes
import contextlib

import pytest
import torch

from kernelseek import abi
from kernelseek import attention as A
from kernelseek import attention_fastpath as F
from kernelseek import host_standins as HS
from kernelseek import attention_plan as P
from kernelseek import seqused_segments as S


@pytest.fixture(scope="module")
def seg_lib(tmp_path_factory):
    return HS.segments_host_lib(tmp_path_factory.mktemp("seg_hostonly"))


def _i32(xs):
    return torch.tensor(xs, dtype=torch.int32)


def _cu(lens):
    return _i32([0] + torch.tensor(lens).cumsum(0).tolist())


def _torch_segments(cu_q, used_q, cu_k, used_k):
    """attention_plan._seqused_segments' torch composition (segments() answers None off DEVICE_TYPES)."""
    assert "cpu" not in S.DEVICE_TYPES
    p = P.Problem(q=None, k=None, v=None, kv="packed", batch=cu_q.numel() - 1, max_q=1, max_k=1, scale=1.0,
                  seqused_q=used_q)
    return [t.to(torch.int32) for t in P._seqused_segments(p, cu_q, cu_k, used_k)[:3]]


CASES = [
    ([5, 0, 7, 3], [3, 0, 9, -2], [9, 4, 7, 0], [6, 4, 7, 0]),       # over-long and negative seqused_q, empty rows
    ([1000, 1, 2000], [999, 1, 0], [1000, 3000, 1], None),          # no seqused_k
    ([64, 49, 125], [63, 1, 125], [64, 94, 132], None),             # the fa3api row seqused_q_varlen, shrunk 16x
    ([7] * 700, list(range(700)), [9] * 700, [5] * 700),            # several blocks of the grid
    ([3] * 1100, [2] * 1100, list(range(1100)), None),              # several blocks, no seqused_k
]


@pytest.mark.parametrize("lens_q, used_q, lens_k, used_k", CASES)
def test_the_kernel_equals_the_torch_composition_and_a_null_used_k_the_key_rows(seg_lib, lens_q, used_q, lens_k,
                                                                                used_k):
    """The kernel's cu_q2, cu_k2, used2 (one buffer, as segments() views it) equal the torch ops' bit for bit;
    without seqused_k, the NULL used_k the plan passes now gives what used_k = cu_k[1:] - cu_k[:-1] (the
    plan's argument before) gave."""
    cu_q, cu_k, uq = _cu(lens_q), _cu(lens_k), _i32(used_q)
    rows = cu_k[1:] - cu_k[:-1]
    want = torch.cat(_torch_segments(cu_q, uq, cu_k, _i32(used_k) if used_k is not None else rows))
    with HS.segments_on_cpu(seg_lib):
        got = [torch.cat(S.segments(cu_q, uq, cu_k, k)) for k in
               ((_i32(used_k),) if used_k is not None else (None, rows))]
    for g in got:
        assert g.dtype == torch.int32 and torch.equal(g, want)


def test_the_host_build_refuses_what_the_kernel_refuses(seg_lib):
    """Status 2 for a null pointer or a negative batch (the source's own checks), before any thread runs."""
    cu, out = _i32([0, 2, 5]), torch.full((14,), -1, dtype=torch.int32)
    assert seg_lib(None, cu.data_ptr(), cu.data_ptr(), None, 2, out.data_ptr(), None) == 2
    assert seg_lib(cu.data_ptr(), cu.data_ptr(), cu.data_ptr(), None, -1, out.data_ptr(), None) == 2
    assert (out == -1).all()


def test_the_host_source_is_the_kernels_with_its_launch_rewritten():
    src = S.KERNEL.read_text()
    host = HS.segments_host_source()
    assert host.startswith(HS.SEG_HOST_PRELUDE)
    assert host[len(HS.SEG_HOST_PRELUDE):].replace("HOST_LAUNCH(seqused_segments_kernel, ", "seqused_segments_kernel<<<") \
        .replace(")(cu_q, seqused_q", ">>>(cu_q, seqused_q") == src


@contextlib.contextmanager
def _fwd_reads(lib, seen):
    """Within kernel_prep_on_cpu: seen gets, per kseek_fwd, the bytes of its cu_seqlens_q [2B+1], cu_seqlens_k
    [2B+1] and seqused_k [2B] (int32; 2B: the kernel's batch, the segments)."""
    fwd = abi.KernelLib.fwd

    def spy(self, p, stream=0):
        d = p.to_dict()
        n = (d["batch"] + 1, d["batch"] + 1, d["batch"])
        seen.append([bytes(ctypes.string_at(d[f], 4 * m)) for f, m in zip(("cu_seqlens_q", "cu_seqlens_k",
                                                                           "seqused_k"), n)])
        return fwd(self, p, stream)
    abi.KernelLib.fwd = spy
    try:
        with HS.kernel_prep_on_cpu(lib):
            yield
    finally:
        abi.KernelLib.fwd = fwd


def test_the_call_hands_the_kernel_the_same_segments_as_before(seg_lib, tmp_path):
    """flash_attn_varlen_func with seqused_q and no seqused_k: kseek_fwd reads the same segments from the
    kernel (used_k NULL), from the torch ops (CPU tensors without the kernel) and from the kernel given
    used_k = cu_k[1:] - cu_k[:-1] (what the plan passed before)."""
    lib = HS.host_lib(tmp_path)
    lens_q, lens_k, used = [64, 49, 125], [64, 94, 132], [63, 1, 125]
    cu_q, cu_k, uq = _cu(lens_q), _cu(lens_k), _i32(used)
    q, k, v = torch.randn(238, 4, 128).bfloat16(), torch.randn(290, 2, 128).bfloat16(), torch.randn(290, 2, 128).bfloat16()
    seen, saved = [], F.ENABLED
    F.ENABLED = False
    try:
        with _fwd_reads(lib, seen):
            A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 125, 132, seqused_q=uq, causal=True)
            with HS.segments_on_cpu(seg_lib):
                A.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 125, 132, seqused_q=uq, causal=True)
                before = [t.numpy().tobytes() for t in S.segments(cu_q, uq, cu_k, cu_k[1:] - cu_k[:-1])]
    finally:
        F.ENABLED = saved
    assert len(seen) == 2 and seen[0] == seen[1] == before
