"""The fast path's entry for the qv route (kernelseek.qv_attention: one kseek_qv_fwd call).

attention_fastpath keys a call and, from the key's second sighting, records it; when the record is one
qv_attention.Launched, `entry` proves a QvEntry as attention_fastpath.entry proves a kseek_fwd Entry: only
view-only plan steps; the result is the launch's o/lse (or out=); every params pointer is the call's fresh
o/lse/workspace or the data of exactly one argument; and so is qv's pointer (its strides are part of the key,
as every tensor argument's are). A hit copies the params template, sets the pointers, allocates o, lse and,
for a split call, the workspace as qv_attention.run does (its size, kseek_qv_workspace_bytes, is a function
of the key's scalars: the recorded one is used) and makes the one ctypes call: none of the planning
(attention_plan._solve_qv, qv_attention.takes), Inputs and make_params that tools/host_profile.py found in
every qv call (90 us of host time per call on dv512 against FA3's 36, session 20).
A replaced library or a non-OK status gives None: the caller drops the entry and reruns the slow path.
"""
from __future__ import annotations

import ctypes

import torch

from . import abi
from . import attention_core as core
from . import fastpath_proof as F
from . import qv_attention


class QvEntry:
    """What a qv hit needs: the library's function, the params without pointers and where each comes from,
    qv's (slot, offset) or None and its strides, the outputs' shapes, the recorded steps, pair / out_slot."""
    __slots__ = ("fn", "template", "ptrs", "qv_at", "strides", "device", "o_shape", "o_dtype", "lse_shape",
                 "steps", "out_slot", "pair", "ws_n")

    def run(self, vals):
        lib = qv_attention._LIB
        if not lib or lib[0][0] is not self.fn:
            return None
        fwd = lib[0][0]
        p = F._filled(abi.KseekParams, self.template, self.ptrs, vals)
        dev = self.device
        o = torch.empty(self.o_shape, dtype=self.o_dtype, device=dev)
        lse = torch.empty(self.lse_shape, dtype=torch.float32, device=dev)
        p.o, p.lse = o.data_ptr(), lse.data_ptr()
        if self.ws_n:   # a split call's workspace, as the slow path sized it (a function of the key)
            ws = torch.empty(self.ws_n, dtype=torch.uint8, device=dev)
            abi.set_workspace(p, ws)
        qv = None if self.qv_at is None else vals[self.qv_at[0]].data_ptr() + self.qv_at[1]
        if fwd(ctypes.byref(p), qv, *self.strides, core._stream(dev)) != abi.OK:
            return None
        return F.finish(self, qv_attention.PATH, o, lse, vals)


def entry(launched, vals, names, res, steps):
    """The QvEntry of a recorded qv call, F.SLOW when it is not provably a function of the key and the data
    pointers, None when this call's aliasing does not prove it (a later call may)."""
    lib = qv_attention._LIB
    o, lse = launched.o, launched.lse
    if (not lib or lib[0][0] is not launched.fn or core.RECORD["paths"] != [qv_attention.PATH]
            or not F.VIEW_STEPS.issuperset(steps) or not (o.is_contiguous() and lse.is_contiguous())):
        return F.SLOW
    shape = F.result_shape(res, o, lse, vals, names)
    if shape is F.SLOW:
        return F.SLOW
    ws = launched.workspace
    own = {"o": o.data_ptr(), "lse": lse.data_ptr(), "workspace": 0 if ws is None else ws.data_ptr()}
    proof = F._pointers(launched.params, F._PTRS, own, lambda f: getattr(launched.inp, f, None), vals)
    if type(proof) is not tuple:
        return proof
    qv_at = None
    if launched.qv is not None:
        qv_at = F._source(vals, launched.qv)
        if qv_at is None or qv_at is F.SLOW:
            return qv_at
    e = QvEntry()
    e.fn, (e.template, e.ptrs), e.qv_at, e.strides = launched.fn, proof, qv_at, tuple(launched.strides)
    e.template.workspace_bytes = 0
    e.ws_n = 0 if ws is None else ws.numel()
    e.device, e.o_shape, e.o_dtype, e.lse_shape = o.device, tuple(o.shape), o.dtype, tuple(lse.shape)
    e.steps, (e.pair, e.out_slot) = tuple(steps), shape
    return e
