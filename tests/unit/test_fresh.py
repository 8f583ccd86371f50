"""The input side of the defence against memoized inputs (kernelseek/fresh.py), on the CPU.

Refresh: new values in place (same storage), structure kept. Traps: one row changes, and a
memoizer's stored answer (the honest low-precision output of the content before the trap) FAILS
the real pass rule on the trap's content while the honest answer on it passes, on every layout
(dense, GQA, varlen, paged with leftpad and cache lengths, fp8, softcap, sliding window, Sq > Sk)."""
import random

import pytest
import torch

from kernelseek import fresh
from kernelseek.check import check_output
from kernelseek.inputs import make_inputs
from kernelseek.reference import attention_ref
from kernelseek.scenarios import Scenario

SCENARIOS = [
    Scenario(name="dense_causal_gqa", batch=2, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=2, head_dim=64,
             causal=True),
    Scenario(name="sq_gt_sk_causal", batch=1, seqlen_q=96, seqlen_k=40, heads_q=2, heads_kv=2, head_dim=64,
             causal=True),
    Scenario(name="varlen", seqlens_q=(17, 64, 33), seqlens_k=(40, 64, 90), heads_q=4, heads_kv=1, head_dim=64,
             causal=True),
    Scenario(name="paged_leftpad", batch=2, seqlen_q=8, seqlen_k=96, heads_q=4, heads_kv=2, head_dim=64,
             page_size=16, cache_seqlens=(70, 96), leftpad=(5, 0)),
    Scenario(name="long_softcap_window", batch=1, seqlen_q=64, seqlen_k=1024, heads_q=2, heads_kv=1, head_dim=128,
             causal=True, softcap=30.0, window=(256, 0)),
    Scenario(name="fp8", batch=1, seqlen_q=64, seqlen_k=128, heads_q=2, heads_kv=1, head_dim=64, dtype="fp8"),
]


def _clone(inp):
    import dataclasses
    return dataclasses.replace(inp, **{n: t.clone() for n, t in inp.tensors().items()})


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
@pytest.mark.parametrize("trap", [fresh.trap_q_row, fresh.trap_k_row, fresh.trap_q_element, fresh.trap_k_element],
                         ids=["q", "k", "q_element", "k_element"])
def test_a_trap_changes_one_row_and_a_stored_answer_fails_the_check(s, trap):
    inp = make_inputs(s, seed=3)
    before = attention_ref(s, inp, "lowp")                     # what a kernel answered before
    for attempt in range(4):                                   # random rows: every draw must work
        new = _clone(inp)
        where = trap(s, new, random.Random(attempt))
        name = "q" if trap in (fresh.trap_q_row, fresh.trap_q_element) else "k"
        changed = (getattr(new, name).float() != getattr(inp, name).float())
        rows = changed.reshape(-1, changed.shape[-1]).any(dim=1).sum().item()
        assert rows == 1, (where, rows)
        if trap in (fresh.trap_q_element, fresh.trap_k_element):
            assert changed.sum().item() <= (4 if s.dtype == "fp8" else 1), where   # elements, not a row
        others = [n for n in ("q", "k", "v") if n != name]
        assert all(torch.equal(getattr(new, n), getattr(inp, n)) for n in others)
        r32, rlp = attention_ref(s, new, "fp32"), attention_ref(s, new, "lowp")
        stale = check_output(s, before[0], before[1], r32, rlp)
        honest = check_output(s, rlp[0], rlp[1], r32, rlp)
        assert honest.passed, honest.reason
        assert not stale.passed, f"{where}: the stored answer passes: {stale.reason}"


def test_refresh_replaces_values_in_place_and_keeps_the_structure():
    s = SCENARIOS[3]                                           # paged: a page table that must stay
    inp = make_inputs(s, seed=1)
    old = _clone(inp)
    ptrs = {n: t.data_ptr() for n, t in inp.tensors().items()}
    fresh.refresh_(inp, fresh.urandom_generator("cpu"))
    assert {n: t.data_ptr() for n, t in inp.tensors().items()} == ptrs
    for n in ("q", "k", "v"):
        t = getattr(inp, n)
        assert t.dtype == getattr(old, n).dtype and t.shape == getattr(old, n).shape
        assert (t != getattr(old, n)).float().mean() > 0.99     # (almost) every value is new
        assert abs(t.float().mean().item()) < 0.05 and 0.9 < t.float().std().item() < 1.1
    for n in ("page_table", "seqused_k", "leftpad_k"):
        assert torch.equal(getattr(inp, n), getattr(old, n))


def test_refresh_of_fp8_keeps_make_inputs_raw_spread():
    s = SCENARIOS[-1]
    inp = make_inputs(s, seed=2)
    spread = inp.q.float().std().item()
    fresh.refresh_(inp, fresh.urandom_generator("cpu"))
    assert inp.q.dtype == torch.float8_e4m3fn
    assert 0.7 < inp.q.float().std().item() / spread < 1.3
    assert inp.q.float().abs().max().item() <= fresh.FP8_MAX


def test_two_refreshes_never_repeat_content():
    s = SCENARIOS[0]
    inp = make_inputs(s, seed=1)
    seen = []
    for _ in range(3):
        fresh.refresh_(inp, fresh.urandom_generator("cpu"))
        seen.append(inp.q.clone())
    assert not torch.equal(seen[0], seen[1]) and not torch.equal(seen[1], seen[2])


def test_scrambled_outputs_are_finite_and_in_place():
    o = torch.full((2, 8, 4, 16), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((2, 4, 8), float("nan"))
    p = o.data_ptr()
    fresh.scramble_outputs_(o, lse, fresh.urandom_generator("cpu"))
    assert o.data_ptr() == p and torch.isfinite(o.float()).all() and torch.isfinite(lse).all()
    assert o.float().abs().max() <= 2 and lse.abs().max() <= 3 and o.float().std() > 0.5


def test_no_trap_where_no_row_sees_a_key():
    s = Scenario(name="empty", batch=1, seqlen_q=4, seqlen_k=8, heads_q=1, heads_kv=1, head_dim=64,
                 cache_seqlens=(0,))
    with pytest.raises(ValueError, match="no query row sees a key"):
        fresh.trap_q_row(s, make_inputs(s, 0), random.Random(0))


def test_sets_for_one_set_per_call_within_the_memory_share():
    assert fresh.sets_for(20, 270e6, 2, 140e9) == 20             # bench26 prefill: 5.4 GB of 35 GB
    assert fresh.sets_for(4, 2.15e9, 2, 140e9) == 4
    assert fresh.sets_for(64, 2.15e9, 2, 20e9) == 2              # memory-bound: never below the L2 rule
    assert fresh.sets_for(1, 1e6, 8, 140e9) == 8


def test_l2_flush_touches_twice_the_l2():
    f = fresh.L2Flush("cpu", l2_bytes=1 << 20)
    assert f.buf.numel() * 4 == 2 << 20
    f()
    f()
    assert int(f.buf[0]) == 2
