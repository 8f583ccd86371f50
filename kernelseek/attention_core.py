"""One call of the ABI (kernels/kseek.h) for kernelseek.attention: `Core` describes it, `run` makes it.

Every kernelseek.attention call becomes one or more Core calls (attention_plan.py builds them).
On CUDA tensors a Core call launches the kernel (built once per process) on the current stream and
records which path the kernel took (`kseek_last_path`: decode, prefill, prefill_fp8, naive; "empty"
when the call has no query rows or no keys and nothing is launched); on CPU
tensors it is answered by reference_fa3.attention_ref in float64 (slow; it lets the composition be
tested without a GPU) and recorded as "reference".

RECORD is what the last top-level kernelseek.attention call did: "steps" (the plan's torch-side
transforms, in order) and "paths" (one entry per Core call). `PATH_COUNTS` counts paths over the
process, so a test or a serving engine can assert that nothing ran on the naive fallback.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections import Counter
from dataclasses import dataclass, field

import torch

from . import abi
from .inputs import Inputs
from .paths import KERNELS

DEFAULT_KERNEL = KERNELS / "fa3_hopper"
PATH_NAMES = abi.PATH_NAMES
RECORD: dict = {"steps": [], "paths": []}
PATH_COUNTS: Counter = Counter()
_LIBS: dict[str, object] = {}
_DEFAULT_KEY = str(DEFAULT_KERNEL)
_LAST_ENV: list = []               # [(KSEEK_ATTENTION_KERNEL, KSEEK_ATTENTION_DEFINES), _LIBS key] of the last call
_TLS = threading.local()           # .rec: the list `recording` gives, while it is open on this thread
CALLS = itertools.count()          # next() per call that resets RECORD (atomic): a recorder sees overlaps


@contextlib.contextmanager
def recording():
    """Within: each kernel call on this thread appends (Inputs, abi.Launch, library, its _LIBS key, path)
    to the list given (attention_fastpath builds its entries from them)."""
    prev, _TLS.rec = getattr(_TLS, "rec", None), []
    try:
        yield _TLS.rec
    finally:
        _TLS.rec = prev


def reset_record() -> None:
    next(CALLS)
    RECORD["steps"], RECORD["paths"] = [], []


def step(name: str) -> None:
    """Note one torch-side transform of the current call (attention_plan calls it)."""
    RECORD["steps"].append(name)


@dataclass
class _Call:
    """What abi.make_params reads from a Scenario, for one call (no host copies of lengths)."""
    n_batch: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dv: int
    max_q: int
    max_k: int
    causal: bool
    window: tuple
    softcap: float
    softmax_scale: float
    num_splits: int
    attention_chunk: int = 0           # ABI 3: chunked local attention, 0 = off
    name: str = "flash_attn call"

    def q_lens(self):
        return [self.max_q]

    def k_capacity(self):
        return [self.max_k]

    @property
    def effective_window(self):
        left, right = self.window
        if self.causal:
            right = 0 if right < 0 else min(right, 0)
        return left, right


@dataclass
class Core:
    """One kseek_fwd call. q dense [B,Sq,Hq,D] or packed [T,Hq,D] (cu_seqlens_q); k/v dense
    [B,Sk,Hkv,*], packed [Tk,Hkv,*] (cu_seqlens_k) or paged [pages,page_size,Hkv,*] (page_table).
    max_q/max_k: host bounds of the per-sequence lengths (kseek.h seqlen_q / seqlen_k)."""
    q: object
    k: object
    v: object
    batch: int
    max_q: int
    max_k: int
    scale: float
    causal: bool = False
    window: tuple = (-1, -1)
    softcap: float = 0.0
    cu_seqlens_q: object = None
    cu_seqlens_k: object = None
    seqused_k: object = None
    leftpad_k: object = None
    page_table: object = None
    sinks: object = None
    descales: tuple = (None, None, None)
    num_splits: int = 0
    chunk: int = 0                     # attention_chunk (kseek.h ABI 3), 0 = off
    extra: dict = field(default_factory=dict)


def out_dtype(q):
    return torch.bfloat16 if q.dtype == getattr(torch, "float8_e4m3fn", None) else q.dtype


def _lib(kernel: str | os.PathLike | None = None):
    """The loaded kernel library (built, checked and loaded on the first call per path; then cached).
    KSEEK_ATTENTION_KERNEL names another kernel; KSEEK_ATTENTION_DEFINES="NAME=VALUE,..." builds a variant
    (the -D flags of `kernelseek eval --define`, for A/B runs through this interface)."""
    env = None if kernel else (os.environ.get("KSEEK_ATTENTION_KERNEL"), os.environ.get("KSEEK_ATTENTION_DEFINES"))
    if env is not None and _LAST_ENV and _LAST_ENV[0] == env:   # the per-call case: same settings as last time
        lib = _LIBS.get(_LAST_ENV[1])
        if lib is not None:
            return lib
    path = str(kernel) if kernel else (env[0] or _DEFAULT_KEY)
    spec = ((env[1] if env is not None else os.environ.get("KSEEK_ATTENTION_DEFINES")) or "").strip()
    defines = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"KSEEK_ATTENTION_DEFINES: {item!r} is not NAME=VALUE")
        defines[name] = value
    key = path + "".join(f" -D{k}={v}" for k, v in sorted(defines.items()))
    if env is not None:
        _LAST_ENV[:] = [env, key]
    lib = _LIBS.get(key)
    if lib is not None:
        return lib
    from . import build, constraints
    res = build.build(path, defines=defines or None)
    if not res.ok:
        raise RuntimeError(f"{path}: build failed:\n{res.log[-2000:]}")
    chk = constraints.check_binary(res.so_path)
    if not chk.ok:
        raise RuntimeError(f"{path}: refused by the constraint check: {'; '.join(chk.reasons)}")
    _LIBS[key] = abi.load(res.so_path)
    return _LIBS[key]


def _alloc(c: Core):
    """o like q with Dv (out dtype), lse [Hq, T] (packed q) or [B, Hq, Sq], float32."""
    q = c.q
    o = torch.empty(q.shape[:-1] + (c.v.shape[-1],), dtype=out_dtype(q), device=q.device)
    if q.dim() == 3:
        lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)
    else:
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32, device=q.device)
    return o, lse


def check_bounds(c: Core) -> None:
    """The ABI's host bounds hold: every sequence has at most max_q rows and max_k keys (kseek.h
    seqlen_q / seqlen_k). Reads lengths back, so only the CPU path runs it (the tests' guard)."""
    if c.cu_seqlens_q is not None:
        rows = int((c.cu_seqlens_q[1:] - c.cu_seqlens_q[:-1]).max()) if c.batch else 0
    else:
        rows = c.q.shape[1]
    if c.seqused_k is not None:
        keys = int(c.seqused_k.max()) if c.batch else 0
    elif c.cu_seqlens_k is not None:
        keys = int((c.cu_seqlens_k[1:] - c.cu_seqlens_k[:-1]).max()) if c.batch else 0
    else:
        keys = c.page_table.shape[1] * c.k.shape[1] if c.page_table is not None else c.k.shape[1]
    if rows > c.max_q or keys > c.max_k:
        raise ValueError(f"kseek call bounds violated: {rows} rows > max_q {c.max_q} or {keys} keys > max_k {c.max_k}")


def _run_reference(c: Core):
    from .reference_fa3 import attention_ref
    check_bounds(c)
    qd, kd, vd = c.descales
    o, lse = attention_ref(c.q, c.k, c.v, cu_seqlens_q=c.cu_seqlens_q, cu_seqlens_k=c.cu_seqlens_k,
                           seqused_k=c.seqused_k, leftpad_k=c.leftpad_k, page_table=c.page_table,
                           softmax_scale=c.scale, causal=c.causal, window_size=c.window, softcap=c.softcap,
                           s_aux=c.sinks, q_descale=qd, k_descale=kd, v_descale=vd, attention_chunk=c.chunk)
    RECORD["paths"].append("reference")
    PATH_COUNTS["reference"] += 1
    return o.to(out_dtype(c.q)), lse.float()


def _stream(dev) -> int:
    """The current stream of a CUDA device as an int (what abi.Launch reads by default); 0 for the CPU
    (host_standins.kernel_prep_on_cpu runs this path on CPU tensors against a library that launches nothing)."""
    if dev.type != "cuda":
        return 0
    if _RAW_STREAM is not None:      # the raw cudaStream_t, without building a torch.cuda.Stream (~3 us less)
        return _RAW_STREAM(dev.index if dev.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(dev).cuda_stream


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)   # torch 2.11 and 2.13 have it


def _as(t, dev, dtype):
    """t on dev as a contiguous dtype tensor: t itself when it already is (what t.to(...).contiguous()
    returns then, without its argument parsing); None stays None."""
    if t is None or (t.dtype == dtype and t.device == dev and t.is_contiguous()):
        return t
    return t.to(device=dev, dtype=dtype).contiguous()


def _run_kernel(c: Core):
    dev = c.q.device
    i32, f32 = torch.int32, torch.float32
    qd, kd, vd = (_as(d, dev, f32) for d in c.descales)
    inp = Inputs(q=c.q, k=c.k, v=c.v, cu_seqlens_q=_as(c.cu_seqlens_q, dev, i32),
                 cu_seqlens_k=_as(c.cu_seqlens_k, dev, i32), seqused_k=_as(c.seqused_k, dev, i32),
                 leftpad_k=_as(c.leftpad_k, dev, i32), page_table=_as(c.page_table, dev, i32),
                 sinks=_as(c.sinks, dev, f32), q_descale=qd, k_descale=kd, v_descale=vd, out_dtype=out_dtype(c.q))
    call = _Call(c.batch, c.q.shape[-2], c.k.shape[-2], c.q.shape[-1], c.v.shape[-1], int(c.max_q), int(c.max_k),
                 bool(c.causal), tuple(int(w) for w in c.window), float(c.softcap or 0.0), float(c.scale),
                 int(c.num_splits or 0), int(c.chunk or 0))
    o, lse = _alloc(c)
    lib = _lib()
    try:
        launched = abi.launch(lib, call, inp, o, lse, _stream(dev))   # on q's device's current stream
    except abi.Unsupported as e:
        raise NotImplementedError(f"kernelseek.attention: the kernel does not support this combination "
                                  f"({call})") from e
    except abi.LaunchError as e:
        raise RuntimeError(f"kernelseek.attention: {e}") from e
    path = lib.last_path() or "unknown"
    RECORD["paths"].append(path)
    PATH_COUNTS[path] += 1
    rec = getattr(_TLS, "rec", None)
    if rec is not None:
        rec.append((inp, launched, lib, _LAST_ENV[1] if _LAST_ENV else None, path))
    return o, lse


def no_work(c: Core) -> bool:
    """No query rows, or no key rows at all (q/k/v with 0 rows: total_q or total_k 0, Sq 0, Sk 0,
    no pages). Such a tensor has no storage (data_ptr() 0), which the kernel refuses as a null
    pointer (KSEEK_ERR_INVALID); FA3 answers it, e.g. a varlen batch whose key lengths are all 0."""
    for t in (c.q, c.k, c.v):
        for n in t.shape[:-2]:
            if n == 0:
                return True
    return False


def _run_empty(c: Core):
    """kseek.h's answer without a launch: every row sees no key, so O = 0 and lse = -inf (sinks or not)."""
    o, lse = _alloc(c)
    o.zero_()
    lse.fill_(float("-inf"))
    RECORD["paths"].append("empty")
    PATH_COUNTS["empty"] += 1
    return o, lse


def run(c: Core):
    """(o, lse) of one Core call: the kernel on CUDA tensors, the float64 reference on CPU tensors;
    a call with no rows or no keys launches nothing (path "empty")."""
    if not c.q.is_cuda and c.q.device.type != "cpu":
        raise ValueError(f"kernelseek.attention: tensors must be on a CUDA device (got {c.q.device})")
    if no_work(c):
        return _run_empty(c)
    return _run_kernel(c) if c.q.is_cuda else _run_reference(c)
