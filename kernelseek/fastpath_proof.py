"""What attention_fastpath and fastpath_qv share to prove and replay an entry: the markers, the params
template filled with a hit's pointers, the proof that each recorded pointer is an argument's data (or the
call's own output), the shape of the result, and the bookkeeping a hit leaves as the slow path would.
(A module of its own so that fastpath_qv needs nothing of attention_fastpath: no import circle.)
"""
from __future__ import annotations

import ctypes

import torch

from . import abi
from . import attention_core as core

VIEW_STEPS = frozenset({"batch-idx-as-pages", "wide-naive"})   # steps that copy or write nothing
SLOW = "slow"                         # a key that keeps the slow path
_T = torch.Tensor


def _filled(cls, template, ptrs, vals):
    """A copy of the params `template` with each (field, slot, offset) of `ptrs` set to vals[slot]'s data + offset."""
    p = cls.from_buffer_copy(template)
    for name, slot, delta in ptrs:
        setattr(p, name, vals[slot].data_ptr() + delta)
    return p


def _ptr_fields(cls):
    return tuple(n for n, t in cls._fields_ if t is ctypes.c_void_p)


_PTRS = _ptr_fields(abi.KseekParams)


def result_shape(res, o, lse, args, names):
    """(pair: the call returns (o, lse), out_slot: the argument `out` that gets o, or None) for a result `res` of
    the kernel's o and lse; SLOW when it is anything else."""
    pair = type(res) is tuple
    if pair and (len(res) != 2 or res[1] is not lse):
        return SLOW
    first = res[0] if pair else res
    if first is o:
        return pair, None
    slots = [i for i, x in enumerate(args) if x is first and names[i] == "out"]
    return (pair, slots[0]) if len(slots) == 1 else SLOW


def finish(e, path, o, lse, vals):
    """What a hit of entry `e` returns, with RECORD and PATH_COUNTS as the slow path leaves them."""
    next(core.CALLS)
    core.RECORD["steps"], core.RECORD["paths"] = list(e.steps), [path]
    core.PATH_COUNTS[path] += 1
    if e.out_slot is not None:
        out = vals[e.out_slot]
        out.copy_(o)
        o = out
    return (o, lse) if e.pair else o


def _pointers(p, fields, own, src_of, vals):
    """(a copy of the params p with its pointer `fields` cleared, ((field, slot, offset in bytes), ...))
    when each pointer is own[field] (a fresh output) or the data of exactly one of vals (src_of(field):
    the tensor the host code pointed it at; see _source); SLOW when one is neither, None when aliasing
    makes it ambiguous."""
    tmpl = type(p).from_buffer_copy(p)
    ptrs = []
    for f in fields:
        val = getattr(p, f) or 0
        setattr(tmpl, f, None)
        if f in own:
            if val != own[f]:
                return SLOW
            continue
        src = src_of(f)
        if src is None:
            if val:
                return SLOW      # a pointer that is not the data of a tensor the call was given
            continue
        where = _source(vals, src)
        if where is None:
            return None
        if where is SLOW or vals[where[0]].data_ptr() + where[1] != val:
            return SLOW
        ptrs.append((f, *where))
    return tmpl, tuple(ptrs)


def _source(vals, src):
    """(slot, offset in bytes) of the one argument whose data `src` is: src itself, or a view of the
    one argument sharing src's storage. SLOW when src is no argument's data (a copy); None when aliasing
    makes it ambiguous (the same tensor in two slots, two arguments on src's storage)."""
    same = [i for i, x in enumerate(vals) if x is src]
    if len(same) == 1:
        return same[0], 0
    if same:
        return None
    base = src.untyped_storage().data_ptr()
    if not base:
        return SLOW
    same = [i for i, x in enumerate(vals) if type(x) is _T and x.untyped_storage().data_ptr() == base]
    if not same:
        return SLOW
    if len(same) > 1:
        return None
    return same[0], src.data_ptr() - vals[same[0]].data_ptr()
