"""The defence's flow (kernelseek/defence.py) on the CPU, with kernels written in Python.

The GPU parts (events, the L2, CUPTI) are replaced by nothing: the set pool, the refresh before
each batch, the sampled verification after it and the checks after timing run as in the worker,
on CPU tensors, with the real reference and pass rule. An honest kernel passes; a kernel that
skips calls on pointers it has seen is caught by the verification of timed calls; a memoizer on a
few bytes of content computes every timed call (nothing repeats) and is caught by the near-repeat
traps; one that hashes all of its inputs is correct and is never caught, and never faster."""
import hashlib
from types import SimpleNamespace

import pytest
import torch

from kernelseek import defence as D
from kernelseek import fresh
from kernelseek.check import check_output
from kernelseek.inputs import alloc_outputs, make_inputs
from kernelseek.reference import attention_ref
from kernelseek.scenarios import Scenario

S = Scenario(name="cpu_defence", batch=1, seqlen_q=48, seqlen_k=80, heads_q=2, heads_kv=1, head_dim=64, causal=True)


def verify(st, o, lse):
    return check_output(S, o, lse, attention_ref(S, st, "fp32"), attention_ref(S, st, "lowp"))


class Kernel:
    """A candidate computing into the pool's per-set outputs; `memo` picks its trick."""

    def __init__(self, pool, memo=None):
        self.pool, self.memo, self.table, self.computed = pool, memo, {}, 0

    def key(self, i):
        st = self.pool.sets[i]
        if self.memo == "pointer":
            return (st.q.data_ptr(), st.k.data_ptr(), st.v.data_ptr())
        if self.memo == "few_bytes":           # 16 bytes of each input, like memo_host.cu
            raw = b"".join(t.view(torch.uint8).flatten()[:16].numpy().tobytes() for t in (st.q, st.k, st.v))
            return (st.q.data_ptr(), raw)
        if self.memo == "all_bytes":           # a full hash: a correct function
            return hashlib.sha256(b"".join(t.view(torch.uint8).numpy().tobytes() for t in (st.q, st.k, st.v))).hexdigest()
        return None

    def __call__(self, i):
        o, lse = self.pool.outputs(i)
        k = self.key(i)
        if k is not None and k in self.table:
            if self.memo != "pointer":         # copy the stored answer out
                o.copy_(self.table[k][0]), lse.copy_(self.table[k][1])
            return                              # "pointer": skip the call, O keeps what it had
        self.computed += 1
        ro, rl = attention_ref(S, self.pool.sets[i], "lowp")
        o.copy_(ro.to(o.dtype)), lse.copy_(rl)
        if k is not None:
            self.table[k] = (o.clone(), lse.clone())


def run(memo=None, batches=6, k=3):
    pool = D.SetPool(S, 7, "cpu", lambda i: make_inputs(S, 100 + i), lambda st: SimpleNamespace(**dict(zip(("o", "lse"), alloc_outputs(S, st))), params=None),
                     lambda st: {})
    for _ in range(k):
        pool.add()
    d = D.Defence(on=True, so=None)
    hooks = d.hooks(pool, verify)
    kern = Kernel(pool, memo)
    for i in range(k):                          # warm-up: every set once, as timing's warm-up does
        kern(i)
    cursor = 0
    for b in range(batches):
        sets = [(cursor + j) % k for j in range(k)]
        cursor = (cursor + k) % k
        hooks.before_batch("candidate", sets)
        for i in sets:
            kern(i)
        hooks.after_batch("candidate", sets, b, b == batches - 1)
    timed_failures = list(d.failures)
    if not d.failures:
        d.after_timing(pool, lambda: kern(0), verify)
    return d, kern, timed_failures


def test_an_honest_kernel_passes_and_the_cost_is_counted():
    d, kern, _ = run()
    assert d.failures == []
    assert kern.computed == 3 + 6 * 3 + 1 + len(fresh.TRAPS)   # warm-up, timed calls, in place, traps
    assert d.cost["defence_refresh"] > 0 and d.cost["defence_verify"] > 0 and d.cost["defence_traps"] > 0


def test_a_pointer_memoizer_is_caught_on_a_timed_call():
    d, kern, timed = run("pointer")
    assert kern.computed == 3                           # only the warm-up: every timed call skipped
    assert timed and "a timed call's output is wrong" in timed[0] and D.STALE in timed[0]


def test_a_content_memoizer_computes_every_timed_call_and_a_trap_catches_it():
    d, kern, timed = run("few_bytes")
    assert timed == []                                  # fresh content: nothing came back, all correct
    assert kern.computed >= 3 + 6 * 3                   # so it gained nothing in timing
    assert d.failures and "near repeat after timing" in d.failures[0] and D.STALE in d.failures[0]


def test_a_memoizer_on_every_byte_is_correct_and_never_hits_in_timing():
    d, kern, _ = run("all_bytes")
    assert d.failures == []
    assert kern.computed == 3 + 6 * 3 + 1 + len(fresh.TRAPS)   # no timed call or trap repeated content


def test_with_the_defence_off_only_the_in_place_check_runs():
    pool = D.SetPool(S, 7, "cpu", lambda i: make_inputs(S, 100 + i), lambda st: SimpleNamespace(**dict(zip(("o", "lse"), alloc_outputs(S, st))), params=None),
                     lambda st: {})
    pool.add()
    d = D.Defence(on=False, so=None)
    kern = Kernel(pool, "few_bytes")
    kern(0)
    d.after_timing(pool, lambda: kern(0), verify)       # content changed in place: recomputed, correct
    assert d.failures == [] and kern.computed == 2
    assert D.Defence.end({"status": "passed"}) == {"status": "passed"}   # no current defence: unchanged
