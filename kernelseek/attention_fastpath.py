"""A per-process fast path for kernelseek.attention calls that make one kernel call, or a pair: one helper
launch, then one kernel call (an append: kv_update, then kseek_fwd; a seqused_q call: seqused_segments,
then kseek_fwd): the same launches with less host time.

Why: a serving engine makes the same call (shapes, strides, dtypes, flags) every layer and step,
with new data. Planning, Core, Inputs, _Call and make_params cost 60-80 us of host time per call
on the H200 host (tools/hostcost.py), an append (flash_attn_with_kvcache with k=/v=) ~100 us more
with kv_update.update, a seqused_q call the segments' launch and torch ops besides. FlashAttention-3's
own call costs 25-30 us.

What: attention._forward_only's wrapper calls `call`. The key is everything except the data: the
entry point, each argument (a scalar by type and value; a tensor by dtype, device, shape, strides
and 16-byte alignment, and only where TENSOR_ARGS allows one), KSEEK_ATTENTION_KERNEL/_DEFINES and
attention_core._run_reference (the CPU harness swaps it). A miss runs the entry point as before; from
the key's second sighting (RECORD_ON) on, it also records its launches (attention_core.recording:
kseek_fwd's, kv_update.update's as a kv_update.Launched, seqused_segments.segments' as a
seqused_segments.Launched).
The key gets an Entry only when the call is provably a function of the key and the data pointers:
exactly one kernel call; no plan step other than view-only ones (VIEW_STEPS); the result is the
kernel's o/lse (or out=); every params pointer is the fresh o/lse/workspace, or the data of exactly
one argument (that argument, or a view of the one argument on its storage: the plan derives views
from metadata only, so the offset is fixed). Otherwise the key is marked SLOW and keeps the slow
path; an ambiguous alias (one tensor passed twice, two arguments sharing the storage a pointer comes
from) is not marked, so a later call can still be cached.
A pair is [helper launch, kseek_fwd] whose helper is one of PRE_KINDS (by its params' type), with that
kind's steps first (kv_update: "kv-update", KVU_STEP; seqused_segments: "packed", "seqused-q-segments",
SEG_STEPS) and then view-only ones. Its Entry has a `pre` (Pre), proven as above: every helper pointer is
its own fresh output (kv_update: q_out when it rotates q, seqused_out; seqused_segments: out, the one
[6B+2] int32 buffer of cu_q2, cu_k2 and used2) or the data of exactly one argument (so an int
cache_seqlens made into a tensor, int64 lengths copied to int32, or fp8 descales repeated per segment
keep the slow path), and the helper module's _LIB holds the function it called. kseek_fwd's pointers may
also be this call's helper outputs (q: the rotated q_out; seqused_k: seqused; cu_seqlens_q, cu_seqlens_k,
seqused_k: views of the segments' out at fixed offsets), which follow the arguments as slots of their own.
What the plan does with torch ops instead stays SLOW: the torch-op append (kv_update does not take the
call: CPU tensors, odd strides), and the torch segments (seqused_segments does not take the call: not
contiguous int32). Without seqused_k, the plan passes the segments kernel used_k NULL, and the kernel
reads each sequence's key rows from cu_k itself (the same values as the cu_k[1:] - cu_k[:-1] it was given
before: tests/unit/test_seqused_segments.py), so such a call is just the pair.
A hit copies the params template and sets the pointers. For a pair it first replays the helper: its
params template with the argument pointers, its own outputs (kv_update: seqused [B] int32, q_out like q;
seqused_segments: out [6B+2] int32) at 256-byte offsets of one buffer (one allocation per hit: they are never
returned, only their addresses reach the kernels), one launch on the current stream (kv_update writes the cache
in place, as on the slow path). An append whose kv_update library has kseek_kv_update_then (kv_update.THEN:
kernels/kv_update.cu's) makes both launches in one foreign call instead (Entry._run_then: the update's outputs
and kseek_fwd's workspace in one buffer: 2 us less host time per hit on a CPU, 8.5 us on the H200's host,
tools/append_cost.py).
It allocates o, lse and the workspace as the slow path does; the workspace is sized per call by
kseek_workspace_bytes, because the kernel's path, and so the workspace, depends on pointer alignment.
The hit launches on the current stream and records RECORD and PATH_COUNTS as the slow path would
(kseek_last_path is read on every call). It is as capture-safe as the slow path: no host sync, and
every allocation goes through torch. No tensor is kept. A library that changed (kseek_fwd's or the
helper's) or a non-OK status drops the entry and reruns the slow path, which raises its error;
when kseek_fwd refuses after kv_update ran, the rerun appends the same rows again (the update reads
only arguments, so it writes the same values). To turn the fast path off: KSEEK_ATTENTION_FASTPATH=0
(read at import), or ENABLED = False. The qv route's one kseek_qv_fwd call: fastpath_qv (QV_ENABLED).
"""
from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

import torch

from . import abi
from . import attention_core as core
from . import fastpath_qv, kv_update, qv_attention, seqused_segments
from .fastpath_proof import _PTRS, SLOW, VIEW_STEPS, _filled, _pointers, _ptr_fields, finish, result_shape  # noqa: F401

ENABLED = os.environ.get("KSEEK_ATTENTION_FASTPATH", "1") != "0"
# The qv route's entries (fastpath_qv): on since session 21, whose H200 run showed hits equal to the slow
# path bit for bit there (tests/gpu/test_fastpath_gpu.py); KSEEK_ATTENTION_FASTPATH_QV=0 (read at import) or
# QV_ENABLED = False turns them off alone.
QV_ENABLED = os.environ.get("KSEEK_ATTENTION_FASTPATH_QV", "1") != "0"
MAX_ENTRIES = 1024                    # then keys seen once go, or all (keys with NaN scalars never match)
RECORD_ON = 2                         # the sighting of a key on which its call is recorded (costs ~40 us
                                      # once): a key seen once (varlen prefill lengths) costs only the key
# Arguments that may be tensors: the kernel reads their data by pointer and the host only their
# metadata. (A tensor anywhere else, e.g. a 0-d max_seqlen_q whose value is read, is never keyed.)
TENSOR_ARGS = frozenset({
    "q", "k", "v", "qv", "out", "q_descale", "k_descale", "v_descale", "s_aux", "cu_seqlens_q", "cu_seqlens_k",
    "seqused_q", "seqused_k", "k_cache", "v_cache", "rotary_cos", "rotary_sin", "cache_seqlens", "cache_batch_idx",
    "cache_leftpad", "page_table", "cu_seqlens_k_new", "rotary_seqlens", "scheduler_metadata"})
PASS = object()                       # `call`'s answer for a call it does not key
CACHE: dict = {}
_STAND_IN = 1 << 40                   # where _run_then places the helper's outputs to size the workspace
KVU_STEP = "kv-update"                # attention._update_cache's step for its one kv_update launch
SEG_STEPS = ("packed", "seqused-q-segments")   # attention_plan._packed's steps for a seqused_q call
_SCALARS = frozenset({int, float, bool, str, type(None)})
_NUMS = frozenset({int, float, bool})
_T = torch.Tensor
_RAW_ENV = hasattr(os.environ, "_data") and hasattr(os.environ, "encodekey")   # CPython's os._Environ
_K1, _K2 = (os.environ.encodekey(n) if _RAW_ENV else n for n in ("KSEEK_ATTENTION_KERNEL", "KSEEK_ATTENTION_DEFINES"))


def clear() -> None:
    CACHE.clear()


def key(fn, names, args, kwargs):
    """(key or None, the arguments in order, their names). None when an argument cannot be keyed:
    a tensor where TENSOR_ARGS has none, a tensor subclass, a value of another type, or a tensor
    that requires grad in grad mode (attention._forward_only's case)."""
    if kwargs:
        kn = tuple(kwargs)
        vals, names = args + tuple(kwargs.values()), names[:len(args)] + kn
    else:
        kn, vals = (), args
    env = os.environ._data if _RAW_ENV else os.environ   # os.environ.get decodes: ~1 us per read
    parts = [fn, len(args), kn, env.get(_K1), env.get(_K2), core._run_reference]
    try:
        return _parts(parts, names, vals, torch.is_grad_enabled()), vals, names
    except Exception:      # a tensor without data (meta) or strides (sparse): the slow path answers it
        return None, vals, names


def _parts(parts, names, vals, grad):
    """`parts` plus one part per argument, as a tuple; None for an argument `key` does not key."""
    for name, x in zip(names, vals):
        t = type(x)
        if t is _T:
            if name not in TENSOR_ARGS or (grad and x.requires_grad):
                return None
            parts.append((x.dtype, x.device, x.shape, x.stride(), x.data_ptr() & 15))   # 16-byte alignment:
            # qv_attention.takes routes on it (and the kernel's paths do; those read it per call anyway)
        elif t in _SCALARS:
            parts.append((t, x))     # 1, 1.0 and True are equal as keys: the type keeps them apart
        elif t is tuple or t is list:
            for y in x:
                if type(y) not in _NUMS:
                    return None
            parts.append((t, tuple(map(type, x)), tuple(x)))
        else:
            return None
    return tuple(parts)


class Kind(NamedTuple):
    """A launch a pair may start with: its Launched type, its module (whose _LIB holds the function), the
    steps the plan notes before kseek_fwd, its own outputs in the order they follow the arguments, how
    to call the function ((fn, params, stream) -> status) and its params' pointer fields."""
    launched: type
    mod: object
    steps: tuple
    own: tuple
    call: object
    fields: tuple


PRE_KINDS = {       # by the type of the Launched's params
    kv_update.KvuParams: Kind(kv_update.Launched, kv_update, (KVU_STEP,), ("q_out", "seqused_out"),
                              lambda fn, p, stream: fn(ctypes.byref(p), stream), _ptr_fields(kv_update.KvuParams)),
    seqused_segments.SegParams: Kind(seqused_segments.Launched, seqused_segments, SEG_STEPS, ("out",),
                                     seqused_segments.launch, _ptr_fields(seqused_segments.SegParams)),
}


class Pre:
    """The launch before kseek_fwd in a pair (a kv_update or seqused_segments Launched, proven): its Kind
    (PRE_KINDS) and function, its params without pointers, where each pointer comes from, and where its own
    outputs lie in the one buffer a hit allocates for them ((field, byte offset or None when this call has
    none), ...; `nbytes` in all), in the order they follow the arguments. One allocation, not one per output:
    the outputs are the helper's and kseek_fwd's alone (never returned), so only their addresses matter, and
    each torch.empty costs a few microseconds of host time per call (tools/append_cost.py)."""
    __slots__ = ("kind", "fn", "template", "ptrs", "device", "layout", "nbytes", "then", "own_at")

    def run(self, vals):
        """(this call's outputs of the launch as _At addresses (None where it has none), the buffer that holds
        them), allocated and launched as the slow path does; None if the library changed or the kernel refused."""
        lib = self.kind.mod._LIB
        if not lib or lib[0] is not self.fn:
            return None
        p = _filled(type(self.template), self.template, self.ptrs, vals)
        buf = torch.empty(self.nbytes, dtype=torch.uint8, device=self.device)
        base = buf.data_ptr()
        made = []
        for name, off in self.layout:
            if off is None:
                made.append(None)
            else:
                setattr(p, name, base + off)
                made.append(_At(base + off))
        if self.kind.call(self.fn, p, ctypes.c_void_p(core._stream(self.device) or None)) != 0:
            return None
        return tuple(made), buf


class _At:
    """An address where kseek_fwd's params take a tensor (fastpath_proof._filled reads only data_ptr())."""
    __slots__ = ("p",)

    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


class Entry:
    """What a hit needs: the params without pointers, where each pointer comes from, and the outputs;
    `pre`: the kv_update launch before it (a Pre), or None."""
    __slots__ = ("lib", "lib_key", "template", "ptrs", "device", "o_shape", "o_dtype", "lse_shape", "steps",
                 "out_slot", "pair", "pre", "own_ptrs", "fwd_addr")

    def run(self, vals):
        """The call on `vals` (the arguments in order): its result, or None if a library changed or a
        kernel refused (the caller runs the slow path instead)."""
        lib = core._LIBS.get(self.lib_key)
        if lib is not self.lib:
            return None
        if self.own_ptrs is not None:  # a pair whose helper library launches both (kv_update's THEN)
            return self._run_then(lib, vals)
        if self.pre is not None:       # its outputs follow the arguments: kseek_fwd's pointers may come from them
            pre = self.pre.run(vals)
            if pre is None:
                return None
            vals = vals + pre[0]       # (pre[1], the outputs' buffer, lives until this call returns)
        p = _filled(abi.KseekParams, self.template, self.ptrs, vals)
        dev = self.device
        o = torch.empty(self.o_shape, dtype=self.o_dtype, device=dev)
        lse = torch.empty(self.lse_shape, dtype=torch.float32, device=dev)
        p.o, p.lse = o.data_ptr(), lse.data_ptr()
        ws = torch.empty(max(lib.workspace_bytes(p), abi.MIN_WORKSPACE_BYTES), dtype=torch.uint8, device=dev)
        abi.set_workspace(p, ws)
        if lib.fwd(p, core._stream(dev)) != abi.OK:
            return None
        return finish(self, lib.last_path() or "unknown", o, lse, vals)

    def _run_then(self, lib, vals):
        """The pair in one foreign call (kv_update.THEN: the update, then kseek_fwd by address): both params
        filled, the helper's own outputs and kseek_fwd's workspace in one allocation (the outputs at their
        Pre.layout offsets, the workspace after them). The workspace is sized with the outputs at a stand-in
        address of at least their alignment and checked again at the real one: a library whose size depends
        on more than alignment gets None (the slow path), never a short workspace."""
        pre = self.pre
        ulib = pre.kind.mod._LIB
        if not ulib or ulib[0] is not pre.fn:
            return None
        u = _filled(type(pre.template), pre.template, pre.ptrs, vals)
        p = _filled(abi.KseekParams, self.template, self.ptrs, vals)
        dev = self.device
        o = torch.empty(self.o_shape, dtype=self.o_dtype, device=dev)
        lse = torch.empty(self.lse_shape, dtype=torch.float32, device=dev)
        p.o, p.lse = o.data_ptr(), lse.data_ptr()
        for name, off in self.own_ptrs:
            setattr(p, name, _STAND_IN + off)
        n = pre.nbytes
        ws = max(lib.workspace_bytes(p), abi.MIN_WORKSPACE_BYTES)
        buf = torch.empty(n + ws, dtype=torch.uint8, device=dev)
        base = buf.data_ptr()
        for name, off in pre.own_at:
            setattr(u, name, base + off)
        for name, off in self.own_ptrs:
            setattr(p, name, base + off)
        p.workspace, p.workspace_bytes = base + n, ws
        if lib.workspace_bytes(p) > ws:
            return None
        if pre.then(ctypes.byref(u), self.fwd_addr, ctypes.byref(p), ctypes.c_void_p(core._stream(dev) or None)):
            return None
        return finish(self, lib.last_path() or "unknown", o, lse, vals)


def call(fn, names, args, kwargs):
    """fn(*args, **kwargs) through the cache (names: fn's parameter names in order), or PASS when the
    call is not keyed (the fast path is off, or `key` gives None): the caller then calls fn itself."""
    if not ENABLED:
        return PASS
    k, vals, names = key(fn, names, args, kwargs)
    if k is None:
        return PASS
    e = CACHE.get(k)
    if type(e) in _ENTRY_TYPES:
        res = e.run(vals)
        if res is not None:
            return res
        CACHE.pop(k, None)
    elif e is not SLOW:
        seen = (e or 0) + 1           # e: None or the sightings so far
        if seen >= RECORD_ON:
            return _miss(k, fn, args, kwargs, vals, names)
        _store(k, seen)
    return fn(*args, **kwargs)


def _store(k, e) -> None:
    if len(CACHE) >= MAX_ENTRIES:     # drop the keys only seen; if that is not enough, all
        for old, v in list(CACHE.items()):
            if type(v) is int:
                CACHE.pop(old, None)
        if len(CACHE) >= MAX_ENTRIES // 2:
            CACHE.clear()
    CACHE[k] = e


def _miss(k, fn, args, kwargs, vals, names):
    n0 = next(core.CALLS)
    with core.recording() as rec:
        res = fn(*args, **kwargs)
    env = os.environ._data if _RAW_ENV else os.environ
    if next(core.CALLS) != n0 + 2 or (env.get(_K1), env.get(_K2)) != k[3:5]:
        return res   # another call reset RECORD meanwhile (a thread), or the kernel settings changed: prove nothing
    e = entry(rec, vals, names, res)
    if e is not None:
        _store(k, e)
    return res


def entry(rec, vals, names, res):
    """The Entry for a recorded call (rec: attention_core.recording's list), SLOW when the call is
    not one kernel call on the arguments (after at most one proven helper launch: PRE_KINDS), or None
    when this call's aliasing does not prove it."""
    steps = core.RECORD["steps"]
    if len(rec) == 1 and type(rec[0]) is qv_attention.Launched:
        return fastpath_qv.entry(rec[0], vals, names, res, steps) if QV_ENABLED else SLOW
    pre, views, args = None, steps, vals
    if len(rec) == 2:
        kind = PRE_KINDS.get(type(getattr(rec[0], "params", None)))
        if kind is None or type(rec[0]) is not kind.launched or tuple(steps[:len(kind.steps)]) != kind.steps:
            return SLOW
        pre = _pre(rec[0], kind, vals)
        if type(pre) is not Pre:
            return pre
        rec, views, vals = rec[1:], steps[len(kind.steps):], vals + tuple(map(rec[0].tensors.get, kind.own))
    if len(rec) != 1 or type(rec[0]) is not tuple or not VIEW_STEPS.issuperset(views):
        return SLOW
    inp, launch, lib, lib_key, path = rec[0]
    o, lse, p = launch.o, launch.lse, launch.params
    if (core.RECORD["paths"] != [path] or core._LIBS.get(lib_key) is not lib or lse is None
            or not (o.is_contiguous() and lse.is_contiguous())):
        return SLOW
    shape = result_shape(res, o, lse, args, names)
    if shape is SLOW:
        return SLOW
    pair, out_slot = shape
    own = {"o": o.data_ptr(), "lse": lse.data_ptr(), "workspace": launch.workspace.data_ptr()}
    proof = _pointers(p, _PTRS, own, lambda f: getattr(inp, f, None), vals)
    if type(proof) is not tuple:
        return proof
    e = Entry()
    e.lib, e.lib_key, (e.template, e.ptrs), e.device = lib, lib_key, proof, o.device
    e.template.workspace_bytes = 0
    e.o_shape, e.o_dtype, e.lse_shape = tuple(o.shape), o.dtype, tuple(lse.shape)
    e.steps, e.out_slot, e.pair, e.pre = tuple(steps), out_slot, pair, pre
    e.own_ptrs = e.fwd_addr = None
    if pre is not None and pre.then is not None and getattr(lib, "_fwd", None) is not None:
        n = len(args)          # kseek_fwd's pointers into the helper's outputs: byte offsets in _run_then's buffer
        own = [(f, pre.layout[slot - n][1], d) for f, slot, d in e.ptrs if slot >= n]
        if any(off is None for _, off, _ in own):
            return SLOW
        e.own_ptrs = tuple((f, off + d) for f, off, d in own)
        e.ptrs = tuple(x for x in e.ptrs if x[1] < n)
        e.fwd_addr = ctypes.c_void_p(ctypes.cast(lib._fwd, ctypes.c_void_p).value)
    return e


def _pre(launched, kind, vals):
    """The Pre of a recorded helper launch (its PRE_KINDS `kind`) whose every pointer is its own fresh
    (contiguous) output or the data of exactly one argument; SLOW / None as `entry`."""
    t, lib = launched.tensors, kind.mod._LIB
    made = [t.get(f) for f in kind.own]
    if not lib or lib[0] is not launched.fn or not all(x is None or x.is_contiguous() for x in made):
        return SLOW
    own = {f: 0 if x is None else x.data_ptr() for f, x in zip(kind.own, made)}
    proof = _pointers(launched.params, kind.fields, own, t.get, vals)
    if type(proof) is not tuple:
        return proof
    e = Pre()
    e.kind, e.fn, (e.template, e.ptrs) = kind, launched.fn, proof
    e.device = next(x for x in made if x is not None).device   # each kind has one output it always makes
    layout, n = [], 0
    for f, x in zip(kind.own, made):   # each output at a 256-byte boundary, as torch's allocator aligns them
        layout.append((f, None if x is None else n))
        if x is not None:
            n += (x.numel() * x.element_size() + 255) // 256 * 256
    e.layout, e.nbytes = tuple(layout), max(n, 256)
    e.own_at = tuple((f, off) for f, off in layout if off is not None)
    e.then = kind.mod.then_of(launched.fn) if hasattr(kind.mod, "then_of") else None   # kv_update's one-call pair
    return e


_ENTRY_TYPES = (Entry, fastpath_qv.QvEntry)
