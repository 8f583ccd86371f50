"""flash_attn_with_kvcache's cache update (append new K/V, rotary on K and Q) in one CUDA launch.

    res = update(q, k_cache, v_cache, k, v, seqlens=..., page_table=..., batch_idx=..., cu_q=...,
                 cu_new=..., cos=..., sin=..., ro=..., interleaved=..., per_row=...)
    # -> (q rotated (or q), seqused_k [B] int32 after the append), or None: use the torch path

kernels/kv_update.cu does what attention_cache.append_kv and rotate_q do with ~30-70 small torch
ops, bit for bit (tests/gpu/test_kv_update_gpu.py), in one launch and without a host sync. It takes
CUDA tensors of one element type (bf16, fp16, fp8 e4m3) whose rows are 8-element aligned; anything
else answers None and attention.py keeps the torch ops (CPU tensors, mixed dtypes, odd strides).
The library is built once per process (helper_lib: the harness's cached nvcc build and constraint check).

While attention_core.recording is open, a launch appends a `Launched` (the function, its params and the
tensor behind each pointer) to the recording's list: attention_fastpath replays it on a hit.
DEVICE_TYPES: the devices whose tensors the kernel takes (host_standins.kv_update_on_cpu adds "cpu",
against a host-only library, so the tests run this host code without a GPU).
"""
from __future__ import annotations

import ctypes
from ctypes import c_int32, c_int64, c_void_p

import torch

from . import abi
from . import attention_core as core
from .paths import KERNELS

KERNEL = KERNELS / "kv_update.cu"
ABI_VERSION = 1
_CODES = {torch.bfloat16: 0, torch.float16: 1, getattr(torch, "float8_e4m3fn", None): 2}
_CS_CODES = {torch.float32: 3, torch.bfloat16: 0, torch.float16: 1}
DEVICE_TYPES = {"cuda"}


class KvuParams(ctypes.Structure):
    """kernels/kv_update.cu's kseek_kvu_params, field for field."""
    _fields_ = [("abi_version", c_int32), ("dtype", c_int32), ("batch", c_int32), ("heads_q", c_int32),
                ("heads_kv", c_int32), ("head_dim", c_int32), ("head_dim_v", c_int32),
                ("q", c_void_p), ("q_out", c_void_p), ("cu_q", c_void_p), ("total_q", c_int64),
                ("seqlen_q", c_int32), ("per_row", c_int32),
                ("q_batch_stride", c_int64), ("q_row_stride", c_int64), ("q_head_stride", c_int64),
                ("qo_batch_stride", c_int64), ("qo_row_stride", c_int64), ("qo_head_stride", c_int64),
                ("k_new", c_void_p), ("v_new", c_void_p), ("cu_new", c_void_p), ("total_new", c_int64),
                ("seqlen_new", c_int32),
                ("kn_batch_stride", c_int64), ("kn_row_stride", c_int64), ("kn_head_stride", c_int64),
                ("vn_batch_stride", c_int64), ("vn_row_stride", c_int64), ("vn_head_stride", c_int64),
                ("k_cache", c_void_p), ("v_cache", c_void_p),
                ("kc_batch_stride", c_int64), ("kc_row_stride", c_int64), ("kc_head_stride", c_int64),
                ("vc_batch_stride", c_int64), ("vc_row_stride", c_int64), ("vc_head_stride", c_int64),
                ("capacity", c_int64), ("page_table", c_void_p), ("page_table_stride", c_int64),
                ("page_size", c_int32), ("num_pages", c_int32), ("batch_idx", c_void_p), ("seqlens", c_void_p),
                ("seqused_out", c_void_p), ("rotary_dim", c_int32), ("interleaved", c_int32),
                ("cs_dtype", c_int32), ("cs_rows", c_int32), ("cs_row_stride", c_int64),
                ("cos", c_void_p), ("sin", c_void_p), ("ro", c_void_p)]


_LIB: list = []
# (kseek_kv_update, its library's kseek_kv_update_then) where it has one: the update and then a kseek_fwd
# (by address) in one foreign call (attention_fastpath's append hits; host_standins registers its own).
THEN: list = []


class Launched:
    """One kseek_kv_update call, as attention_core.recording keeps it: the function called, its params and
    `tensors` (pointer field -> the tensor `update` pointed it at; q_out and seqused_out are its own)."""
    __slots__ = ("fn", "params", "tensors")

    def __init__(self, fn, params, tensors):
        self.fn, self.params, self.tensors = fn, params, tensors


def _lib():
    """kseek_kv_update of the loaded library (helper_lib: built and checked on the first call per process)."""
    if _LIB:
        return _LIB[0]
    from . import helper_lib
    dll = helper_lib.load(KERNEL)
    fn = dll.kseek_kv_update
    fn.argtypes, fn.restype = [ctypes.POINTER(KvuParams), c_void_p], ctypes.c_int
    if int(dll.kseek_kv_update_abi()) != ABI_VERSION:
        raise RuntimeError(f"{KERNEL}: kv_update ABI {int(dll.kseek_kv_update_abi())}, expected {ABI_VERSION}")
    register_then(fn, dll)
    _LIB.append(fn)
    return fn


def register_then(fn, dll) -> None:
    """THEN gets (fn, dll's kseek_kv_update_then, typed (int (params*, fwd address, kseek_params*, stream))),
    when the library defines it."""
    then = getattr(dll, "kseek_kv_update_then", None)
    if then is not None:
        then.argtypes = [ctypes.POINTER(KvuParams), c_void_p, ctypes.POINTER(abi.KseekParams), c_void_p]
        then.restype = ctypes.c_int
        THEN.append((fn, then))


def then_of(fn):
    """The kseek_kv_update_then registered with `fn` (a kseek_kv_update), or None. (By identity: ctypes
    functions are not hashable.)"""
    for f, then in THEN:
        if f is fn:
            return then
    return None


def _rows_ok(t, dims: int) -> bool:
    """dims-D, last dim contiguous, 8-element aligned rows (16-byte vectors; 8 bytes for fp8)."""
    if t.dim() != dims or t.stride(-1) != 1 or t.shape[-1] % 8:
        return False
    esz = t.element_size()
    return t.data_ptr() % (8 * esz) == 0 and all(s % 8 == 0 for s in t.stride()[:-1])


def _i32(t):
    return t if t is None or (t.dtype == torch.int32 and t.is_contiguous()) else t.to(torch.int32).contiguous()


def _strides3(t):
    """(batch, row, head) strides of a dense [B, S, H, D] or packed [T, H, D] tensor (batch 0)."""
    s = t.stride()
    return (s[0], s[1], s[2]) if t.dim() == 4 else (0, s[0], s[1])


def supported(q, k_cache, v_cache, k, v, *, cu_q, cu_new, cos, page_table) -> bool:
    """Can the kernel take this update (else: the torch path)?"""
    code = _CODES.get(q.dtype)
    if code is None or q.device.type not in DEVICE_TYPES:
        return False
    if any(t.dtype != q.dtype or t.device != q.device for t in (k_cache, v_cache, k, v)):
        return False
    new_dims = 3 if cu_new is not None else 4
    if not (_rows_ok(k, new_dims) and _rows_ok(v, new_dims) and _rows_ok(k_cache, 4) and _rows_ok(v_cache, 4)):
        return False
    if cos is not None:
        if cos.dtype not in _CS_CODES:
            return False
        if not _rows_ok(q, 3 if cu_q is not None else 4) or cos.dim() != 2 or cos.stride(-1) != 1:
            return False
    return page_table is None or page_table.dim() == 2


def update(q, k_cache, v_cache, k, v, *, seqlens, page_table, batch_idx, cu_q, cu_new, cos, sin, ro,
           interleaved, per_row):
    """One launch on the current stream: -> (q rotated or q itself, seqused [B] int32), or None when
    `supported` says no. Shapes as attention_cache.append_kv / rotate_q."""
    if not supported(q, k_cache, v_cache, k, v, cu_q=cu_q, cu_new=cu_new, cos=cos, page_table=page_table):
        return None
    if cos is not None and (sin is None or sin.dtype != cos.dtype or sin.stride() != cos.stride()
                            or sin.shape != cos.shape):
        return None
    from .attention_cache import _check_rotary
    nb = seqlens.numel()
    p = KvuParams()
    p.abi_version, p.dtype, p.batch = ABI_VERSION, _CODES[q.dtype], nb
    p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v = q.shape[-2], k.shape[-2], k.shape[-1], v.shape[-1]
    seqlens, cu_q, cu_new, batch_idx, page_table = (_i32(x) for x in (seqlens, cu_q, cu_new, batch_idx, page_table))
    seqused = torch.empty(nb, dtype=torch.int32, device=q.device)
    q_out = q
    if cos is not None:
        _check_rotary(cos, sin, k.shape[-1])
        ro = _i32(ro)
        q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        p.q, p.q_out = q.data_ptr(), q_out.data_ptr()
        p.cu_q = cu_q.data_ptr() if cu_q is not None else None
        p.total_q = q.shape[0] if cu_q is not None else q.shape[0] * q.shape[1]
        p.seqlen_q = 0 if cu_q is not None else q.shape[1]
        p.per_row = int(per_row)
        p.q_batch_stride, p.q_row_stride, p.q_head_stride = _strides3(q)
        p.qo_batch_stride, p.qo_row_stride, p.qo_head_stride = _strides3(q_out)
        p.rotary_dim, p.interleaved = 2 * cos.shape[1], int(bool(interleaved))
        p.cs_dtype, p.cs_rows, p.cs_row_stride = _CS_CODES[cos.dtype], cos.shape[0], cos.stride(0)
        p.cos, p.sin, p.ro = cos.data_ptr(), sin.data_ptr(), ro.data_ptr()
    p.k_new, p.v_new = k.data_ptr(), v.data_ptr()
    p.cu_new = cu_new.data_ptr() if cu_new is not None else None
    p.total_new = k.shape[0] if cu_new is not None else k.shape[0] * k.shape[1]
    p.seqlen_new = 0 if cu_new is not None else k.shape[1]
    p.kn_batch_stride, p.kn_row_stride, p.kn_head_stride = _strides3(k)
    p.vn_batch_stride, p.vn_row_stride, p.vn_head_stride = _strides3(v)
    p.k_cache, p.v_cache = k_cache.data_ptr(), v_cache.data_ptr()
    p.kc_batch_stride, p.kc_row_stride, p.kc_head_stride = _strides3(k_cache)
    p.vc_batch_stride, p.vc_row_stride, p.vc_head_stride = _strides3(v_cache)
    if page_table is not None:
        p.page_table, p.page_table_stride = page_table.data_ptr(), page_table.stride(0)
        p.page_size, p.num_pages = k_cache.shape[1], k_cache.shape[0]
        p.capacity = page_table.shape[1] * k_cache.shape[1]
    else:
        p.capacity = k_cache.shape[1]
    p.batch_idx = batch_idx.data_ptr() if batch_idx is not None else None
    p.seqlens, p.seqused_out = seqlens.data_ptr(), seqused.data_ptr()
    fn = _lib()
    rc = fn(ctypes.byref(p), c_void_p(core._stream(q.device) or None))
    if rc != 0:
        raise RuntimeError(f"kernelseek.attention: {KERNEL.name} returned status {rc} "
                           f"(1 ABI, 2 invalid params, 3 CUDA launch error)")
    rec = getattr(core._TLS, "rec", None)
    if rec is not None:
        t = dict(k_new=k, v_new=v, cu_new=cu_new, k_cache=k_cache, v_cache=v_cache, page_table=page_table,
                 batch_idx=batch_idx, seqlens=seqlens, seqused_out=seqused)
        if cos is not None:
            t.update(q=q, q_out=q_out, cu_q=cu_q, cos=cos, sin=sin, ro=ro)
        rec.append(Launched(fn, p, t))
    return q_out, seqused
