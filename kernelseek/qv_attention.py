"""FlashAttention-3's qv term (MLA-style models) on a tensor-core kernel: kernels/qv_fwd.

    takes(q, k, v, qv, ...) -> bool   # does the kernel take this call (attention_plan asks first)?
    run(c, qv) -> (o, lse)            # one attention_core.Core call plus its qv tensor

score = scale (q.k + qv.v), with q/k head dim 64 and qv/v/o head dim 256 or 512 (the shapes FA3 takes
qv with), bf16 or fp16 CUDA tensors, no sinks; layouts, masks, softcap, seqused_k and leftpad as
kseek.h. Without qv (PLAIN) it also takes those head dims' plain calls. The call is recorded as the path
"qv". Calls it does not take keep the other routes (with qv: [q, qv] . [k, v] concatenated on the naive
wide kernel, attention_plan's step "qv-concat"; without: q/k padded, V split).
The library is built once per process (helper_lib: the harness's cached nvcc build and constraint check).
"""
from __future__ import annotations

import ctypes
from ctypes import c_int64, c_void_p

import torch

from . import abi
from . import attention_core as core
from .inputs import Inputs
from .paths import KERNELS

KERNEL = KERNELS / "qv_fwd"
ABI_VERSION = 1
DIM, DIMS_V = 64, (256, 512)
PATH = "qv"
PLAIN = True   # also take D 64 / Dv 256-512 calls without qv (one call instead of padding q/k and splitting V)

_LIB: list = []
CPU_OK = False   # host_standins.qv_on_cpu: CPU tensors take this route (against a host-only library)


class Launched:
    """One kseek_qv_fwd call, as attention_core.recording keeps it (attention_fastpath proves a cache entry
    from it): the function, its params, `inp` (the Inputs the params' pointers came from), qv and its
    (batch, row, head) strides, and the call's own o, lse and workspace."""
    __slots__ = ("fn", "params", "inp", "qv", "strides", "o", "lse", "workspace")

    def __init__(self, fn, params, inp, qv, strides, o, lse, workspace):
        self.fn, self.params, self.inp, self.qv, self.strides = fn, params, inp, qv, strides
        self.o, self.lse, self.workspace = o, lse, workspace


def _lib():
    """(kseek_qv_fwd, kseek_qv_workspace_bytes, kseek_qv_last_splits, kseek_qv_set_big_kernel) of the library."""
    if _LIB:
        return _LIB[0]
    from . import helper_lib
    dll = helper_lib.load(KERNEL)
    if int(dll.kseek_qv_abi()) != ABI_VERSION:
        raise RuntimeError(f"{KERNEL}: qv ABI {int(dll.kseek_qv_abi())}, expected {ABI_VERSION}")
    fwd, ws, splits = dll.kseek_qv_fwd, dll.kseek_qv_workspace_bytes, dll.kseek_qv_last_splits
    big = dll.kseek_qv_set_big_kernel
    fwd.argtypes = [ctypes.POINTER(abi.KseekParams), c_void_p, c_int64, c_int64, c_int64, c_void_p]
    fwd.restype = ctypes.c_int
    ws.argtypes, ws.restype = [ctypes.POINTER(abi.KseekParams)], ctypes.c_size_t
    splits.argtypes, splits.restype = [], ctypes.c_int
    big.argtypes, big.restype = [ctypes.c_int], ctypes.c_int
    _LIB.append((fwd, ws, splits, big))
    return _LIB[0]


def _rows16(t) -> bool:
    """Last dim contiguous, every other stride a multiple of 8 elements, 16-byte aligned start:
    the kernel's cp.async copies 16-byte chunks of every row."""
    st = t.stride()
    return st[-1] == 1 and all(s % 8 == 0 for s in st[:-1]) and t.data_ptr() % 16 == 0


def takes(q, k, v, qv, *, sinks=None, descales=(None, None, None), seqused_q=None) -> bool:
    """Does kernels/qv_fwd take this call? CUDA, 16-bit, D 64 and Dv 256/512, qv shaped like q with Dv
    columns (or no qv when PLAIN), no sinks / descales / seqused_q, rows 16-byte aligned."""
    if (qv is None and not PLAIN) or not (q.is_cuda or CPU_OK) or q.dtype not in (torch.bfloat16, torch.float16):
        return False
    if q.shape[-1] != DIM or v.shape[-1] not in DIMS_V:
        return False
    if any(t.dtype != q.dtype or t.device != q.device for t in (k, v) + ((qv,) if qv is not None else ())):
        return False
    if qv is not None and tuple(qv.shape) != tuple(q.shape[:-1]) + (v.shape[-1],):
        return False
    if sinks is not None or seqused_q is not None or any(d is not None for d in descales):
        return False
    return all(_rows16(t) for t in (q, k, v, qv) if t is not None and t.numel())


def _strides(t):
    """(batch, row, head) strides of qv: dense [B, Sq, Hq, Dv] or packed [T, Hq, Dv] (batch 0)."""
    st = t.stride()
    return (st[0], st[1], st[2]) if t.dim() == 4 else (0, st[0], st[1])


def run(c: core.Core, qv: torch.Tensor):
    """(o, lse) of Core call `c` with the qv term (qv laid out like c.q, Dv columns), on q's device's
    current stream; no host sync."""
    if core.no_work(c):
        return core._run_empty(c)
    fwd, ws_bytes, _, _ = _lib()
    dev = c.q.device
    i32 = torch.int32
    inp = Inputs(q=c.q, k=c.k, v=c.v, cu_seqlens_q=core._as(c.cu_seqlens_q, dev, i32),
                 cu_seqlens_k=core._as(c.cu_seqlens_k, dev, i32), seqused_k=core._as(c.seqused_k, dev, i32),
                 leftpad_k=core._as(c.leftpad_k, dev, i32), page_table=core._as(c.page_table, dev, i32),
                 out_dtype=core.out_dtype(c.q))
    call = core._Call(c.batch, c.q.shape[-2], c.k.shape[-2], c.q.shape[-1], c.v.shape[-1], int(c.max_q),
                      int(c.max_k), bool(c.causal), tuple(int(w) for w in c.window), float(c.softcap or 0.0),
                      float(c.scale), int(c.num_splits or 0), int(c.chunk or 0))
    o, lse = core._alloc(c)
    params = abi.make_params(call, inp, o, lse)
    n = int(ws_bytes(ctypes.byref(params)))   # 0 unless the keys are split (kernels/qv_fwd/qv_fwd.cu ws_bytes)
    ws = torch.empty(n, dtype=torch.uint8, device=dev) if n else None   # kept alive by `ws` until return
    if ws is not None:
        abi.set_workspace(params, ws)
    strides = _strides(qv) if qv is not None else (0, 0, 0)
    rc = fwd(ctypes.byref(params), None if qv is None else qv.data_ptr(), *strides, core._stream(dev))
    try:
        abi.raise_for_status(rc, "kseek_qv_fwd")
    except abi.LaunchError as e:
        raise RuntimeError(f"kernelseek.attention (qv kernel): {e}") from e
    core.RECORD["paths"].append(PATH)
    core.PATH_COUNTS[PATH] += 1
    rec = getattr(core._TLS, "rec", None)
    if rec is not None:
        rec.append(Launched(fwd, params, inp, qv, strides, o, lse, ws))
    return o, lse


def last_splits() -> int:
    """Key splits of the last call (1 = none): the kernel's choice, for tests and notes."""
    return int(_lib()[2]())


def set_big_kernel(k: int) -> int:
    """Which kernel takes sequences of > 64 rows per KV head: 2 warp-specialized with K/V by TMA (default), 3 the
    same with K/V by cp.async, 4 / 5 the TMA form with warpgroup 1's overlap always / never (2 picks per shape),
    1 v18's wgmma form, 0 the mma.sync 64-row tiles (for A/B probes and tests); returns the previous setting."""
    return int(_lib()[3](int(k)))


def set_split_stages(s: int) -> int:
    """The split kernel's K/V stages where its grid has at most one CTA per SM: 3 (default) or 2 (v21's form),
    for A/B probes; returns the previous setting."""
    from . import helper_lib
    _lib()                                    # the ABI check
    f = helper_lib.load(KERNEL).kseek_qv_set_split_stages
    f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
    return int(f(int(s)))
