"""seqused_q's varlen segments (attention_plan._seqused_segments) in one launch of kernels/seqused_segments.cu.

    out = segments(cu_q, seqused_q, cu_k, used_k)   # -> (cu_q2 [2B+1], cu_k2 [2B+1], used2 [2B]) int32, or None

The torch composition it replaces issues ~11 small ops (each ~10-25 us of host time per call on the H200,
session 17's tools/hostcost.py --device cuda); this is one allocation and one launch, on the current
stream, with no host sync. used_k None: every sequence's keys are all its rows in cu_k (the kernel reads
cu_k[b+1] - cu_k[b] itself). The three results are views of one int32 buffer [6B+2]. None (the caller keeps
the torch ops): tensors on a device outside DEVICE_TYPES (CPU), or inputs that are not contiguous int32 on
one device.

While attention_core.recording is open, the launch appends a `Launched` (the function, its arguments as
SegParams and the tensor behind each pointer; "out" is its own) to the recording's list: attention_fastpath
replays it on a hit. DEVICE_TYPES: host_standins.segments_on_cpu adds "cpu", against a host-only build
of the kernel, so the tests run this host code without a GPU.
"""
from __future__ import annotations

import ctypes
from ctypes import c_int, c_void_p

import torch

from . import kv_update
from .paths import KERNELS

KERNEL = KERNELS / "seqused_segments.cu"
DEVICE_TYPES = {"cuda"}
_LIB: list = []


class SegParams(ctypes.Structure):
    """kseek_seqused_segments' arguments but the stream, in order (the function takes them one by one)."""
    _fields_ = [("cu_q", c_void_p), ("seqused_q", c_void_p), ("cu_k", c_void_p), ("used_k", c_void_p),
                ("batch", c_int), ("out", c_void_p)]


class Launched(kv_update.Launched):
    """One kseek_seqused_segments call, as attention_core.recording keeps it: fn, params (SegParams), tensors."""
    __slots__ = ()


def _fn():
    if not _LIB:
        from . import helper_lib
        fn = helper_lib.load(KERNEL).kseek_seqused_segments
        fn.argtypes = [c_void_p] * 4 + [c_int, c_void_p, c_void_p]
        fn.restype = c_int
        _LIB.append(fn)
    return _LIB[0]


def launch(fn, p: SegParams, stream) -> int:
    """fn (a kseek_seqused_segments) on the arguments p, on `stream`: its status."""
    return fn(p.cu_q, p.seqused_q, p.cu_k, p.used_k, p.batch, p.out, stream)


def _ok(t, dev) -> bool:
    return t.dtype == torch.int32 and t.device == dev and t.is_contiguous()


def segments(cu_q, seqused_q, cu_k, used_k):
    dev = cu_q.device
    if dev.type not in DEVICE_TYPES or not all(_ok(t, dev) for t in (cu_q, seqused_q, cu_k) + ((used_k,) if used_k is not None else ())):
        return None
    b = cu_q.numel() - 1
    out = torch.empty(6 * b + 2, dtype=torch.int32, device=dev)
    from .attention_core import _TLS, _stream
    fn = _fn()
    p = SegParams(cu_q.data_ptr(), seqused_q.data_ptr(), cu_k.data_ptr(),
                  used_k.data_ptr() if used_k is not None else None, b, out.data_ptr())
    rc = launch(fn, p, _stream(dev) or None)
    if rc != 0:
        raise RuntimeError(f"kernelseek.attention: {KERNEL.name} returned status {rc} (2 invalid, 3 CUDA launch error)")
    rec = getattr(_TLS, "rec", None)
    if rec is not None:
        rec.append(Launched(fn, p, dict(cu_q=cu_q, seqused_q=seqused_q, cu_k=cu_k, used_k=used_k, out=out)))
    return out[:2 * b + 1], out[2 * b + 1:4 * b + 2], out[4 * b + 2:]
