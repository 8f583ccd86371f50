"""seqused_q's varlen segments (attention_plan._seqused_segments) in one launch of kernels/seqused_segments.cu.

    out = segments(cu_q, seqused_q, cu_k, used_k)   # -> (cu_q2 [2B+1], cu_k2 [2B+1], used2 [2B]) int32, or None

The torch composition it replaces issues ~11 small ops (each ~10-25 us of host time per call on the H200,
session 17's tools/hostcost.py --device cuda); this is one allocation and one launch, on the current
stream, with no host sync. None (the caller keeps the torch ops): CPU tensors, or inputs that are not
contiguous int32 on one device.
"""
from __future__ import annotations

import ctypes

import torch

from .paths import KERNELS

KERNEL = KERNELS / "seqused_segments.cu"
_FN: list = []


def _fn():
    if not _FN:
        from . import helper_lib
        fn = helper_lib.load(KERNEL).kseek_seqused_segments
        fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        _FN.append(fn)
    return _FN[0]


def _ok(t, dev) -> bool:
    return t.dtype == torch.int32 and t.device == dev and t.is_contiguous()


def segments(cu_q, seqused_q, cu_k, used_k):
    dev = cu_q.device
    if dev.type != "cuda" or not all(_ok(t, dev) for t in (cu_q, seqused_q, cu_k) + ((used_k,) if used_k is not None else ())):
        return None
    b = cu_q.numel() - 1
    out = torch.empty(6 * b + 2, dtype=torch.int32, device=dev)
    from .attention_core import _stream
    stream = _stream(dev)
    rc = _fn()(cu_q.data_ptr(), seqused_q.data_ptr(), cu_k.data_ptr(), used_k.data_ptr() if used_k is not None else None,
               b, out.data_ptr(), stream or None)
    if rc != 0:
        raise RuntimeError(f"kernelseek.attention: {KERNEL.name} returned status {rc} (2 invalid, 3 CUDA launch error)")
    return out[:2 * b + 1], out[2 * b + 1:4 * b + 2], out[4 * b + 2:]
