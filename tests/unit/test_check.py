"""check.py: FlashAttention-3's pass rule on synthetic tensors and on real references."""
import math

import pytest
import torch

from kernelseek.check import LSE_ATOL, check_output, fwd_atol, tolerance_factor
from kernelseek.inputs import alloc_outputs, make_inputs
from kernelseek.reference import attention_ref
from kernelseek.scenarios import Scenario

S = Scenario(name="syn", batch=1, seqlen_q=4, seqlen_k=4, heads_q=2, heads_kv=2, head_dim=8)


def test_tolerance_factor():
    assert tolerance_factor(S) == 2
    assert tolerance_factor(Scenario(name="c", batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1,
                                     head_dim=8, softcap=30.0)) == 3
    assert tolerance_factor(Scenario(name="f", batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1,
                                     head_dim=8, dtype="fp8", softcap=30.0)) == 4


def test_fwd_atol_is_twice_the_output_rounding_error():
    # 1.0 in bf16: 1 + 0.3 -> 1.296875 (step 2^-7), - 0.3 -> 0.99609375 (step 2^-8): off by 2^-8
    ones = torch.ones(3, 5)
    assert fwd_atol(ones, torch.bfloat16) == 2 * 2.0 ** -8
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    assert fwd_atol(x, torch.float16) < fwd_atol(x, torch.bfloat16)  # fp16 has 3 more mantissa bits
    assert fwd_atol(x * 8, torch.bfloat16) > fwd_atol(x, torch.bfloat16)  # scales with magnitude


def _synthetic():
    """o32 on the bf16 grid in [0.5, 1) and a lowp reference off by exactly 2^-8 at one entry."""
    g = torch.Generator().manual_seed(1)
    o32 = (0.5 + 0.5 * torch.rand(1, 4, 2, 8, generator=g)).to(torch.bfloat16).float()
    olp = o32.clone()
    olp[0, 1, 0, 2] += 2.0 ** -8
    lse32 = torch.randn(1, 2, 4, generator=g)
    lselp = lse32.clone()
    lselp[0, 0, 0] += 2.0 ** -10
    return (o32, lse32), (olp, lselp)


def test_passes_exactly_at_the_bound_and_fails_just_past():
    ref32, reflp = _synthetic()
    atol = fwd_atol(ref32[0], torch.bfloat16)
    assert atol > 0
    bound = 2 * 2.0 ** -8 + atol
    o = ref32[0].double()
    o[0, 2, 1, 3] += bound
    res = check_output(S, o, None, ref32, reflp)
    assert res.passed, res.reason
    assert res.max_err == bound and res.err_bound == bound and res.err_ratio == 1.0
    assert res.ref_err == 2.0 ** -8 and res.nonfinite == 0 and res.lse_err is None
    o[0, 2, 1, 3] += 2.0 ** -30
    res = check_output(S, o, None, ref32, reflp)
    assert not res.passed and res.err_ratio > 1.0
    assert f"max error {res.max_err:.4g} > bound {bound:.4g}" in res.reason
    assert f"(2 x ref err {2.0 ** -8:.4g} + atol {atol:.4g})" in res.reason
    assert "batch 0 row 2 head 1 col 3" in res.reason and "syn" in res.reason


def test_nan_and_inf_fail_and_are_counted():
    ref32, reflp = _synthetic()
    o = ref32[0].to(torch.bfloat16)
    o.view(-1)[5:17] = float("nan")
    o[0, 3, 1, 7] = float("inf")
    res = check_output(S, o, None, ref32, reflp)
    assert not res.passed and res.nonfinite == 13
    assert "12 NaN and 1 inf in output (unwritten or computed)" in res.reason
    assert "first at batch 0 row 0 head 0 col 5" in res.reason
    assert res.max_err == 0.0  # the finite entries are exact


def test_unwritten_poisoned_output_fails():
    s = Scenario(name="poison", batch=1, seqlen_q=3, seqlen_k=5, heads_q=2, heads_kv=1, head_dim=8)
    inp = make_inputs(s, 0)
    ref32, reflp = attention_ref(s, inp), attention_ref(s, inp, "lowp")
    o, lse = alloc_outputs(s, inp)
    res = check_output(s, o, lse, ref32, reflp)
    assert not res.passed and res.nonfinite == o.numel()
    assert "lse: 6 NaN" in res.reason


def test_references_pass_and_a_wrong_mask_fails():
    s = Scenario(name="real", batch=2, seqlen_q=24, seqlen_k=40, heads_q=4, heads_kv=2, head_dim=32,
                 causal=True)
    inp = make_inputs(s, 3)
    ref32, reflp = attention_ref(s, inp), attention_ref(s, inp, "lowp")
    good = check_output(s, reflp[0], reflp[1], ref32, reflp)  # the lowp reference is within its own error
    assert good.passed, good.reason
    assert 0 < good.max_err == good.ref_err and good.err_ratio < 1
    top_left = Scenario(name="real", batch=2, seqlen_q=24, seqlen_k=24, heads_q=4, heads_kv=2, head_dim=32,
                        causal=True, cache_seqlens=(24, 24))
    wrong = attention_ref(top_left, inp, "lowp")  # top-left causal: sees a different set of keys
    o_bad = wrong[0]
    bad = check_output(s, o_bad, None, ref32, reflp)
    assert not bad.passed and bad.err_ratio > 3 and "max error" in bad.reason


def test_lse_rows_without_keys():
    s = Scenario(name="empty", batch=1, seqlen_q=5, seqlen_k=2, heads_q=2, heads_kv=2, head_dim=8, causal=True)
    inp = make_inputs(s, 4)
    ref32, reflp = attention_ref(s, inp), attention_ref(s, inp, "lowp")
    o = ref32[0].clone()
    res = check_output(s, o, ref32[1].clone(), ref32, reflp)
    assert res.passed and res.lse_err == 0.0
    lse = ref32[1].clone()
    lse[0, 1, 0] = 0.0  # row 0 has no visible key
    lse[0, 0, 2] = 3.0
    lse[0, 0, 1] = float("inf")
    res = check_output(s, o, lse, ref32, reflp)
    assert not res.passed
    assert "lse: 3 rows not -inf where reference is -inf (no visible key), first at batch 0 row 1 head 0" in res.reason
    lse = ref32[1].clone()
    lse[0, 1, 4] = float("-inf")  # row 4 sees both keys
    res = check_output(s, o, lse, ref32, reflp)
    assert not res.passed and "lse: 1 rows infinite where reference is finite, first at batch 0 row 4 head 1" in res.reason
    lse = ref32[1].clone()
    lse[0, 0, 3] = float("nan")
    res = check_output(s, o, lse, ref32, reflp)
    assert not res.passed and "lse: 1 NaN, first at batch 0 row 3 head 0" in res.reason


def test_lse_bound_is_k_times_lowp_error_plus_floor():
    ref32, reflp = _synthetic()
    o = ref32[0]
    ref_lse_err = 2.0 ** -10
    bound = 2 * ref_lse_err + LSE_ATOL
    lse = ref32[1].double().clone()
    lse[0, 1, 2] += bound * 0.999
    res = check_output(S, o, lse, ref32, reflp)
    assert res.passed and res.lse_err == pytest.approx(bound * 0.999, rel=1e-9)
    lse[0, 1, 2] = ref32[1][0, 1, 2].double() + bound * 1.001
    res = check_output(S, o, lse, ref32, reflp)
    assert not res.passed
    assert f"lse error {res.lse_err:.4g} > bound {bound:.4g} (2 x ref err {ref_lse_err:.4g} + 0.001)" in res.reason
    assert "at batch 0 row 2 head 1" in res.reason


def test_varlen_worst_element_names_sequence_and_row():
    s = Scenario(name="vl", seqlens_q=(3, 5), seqlens_k=(4, 6), heads_q=2, heads_kv=1, head_dim=8)
    inp = make_inputs(s, 2)
    ref32, reflp = attention_ref(s, inp), attention_ref(s, inp, "lowp")
    o = ref32[0].clone()
    o[6, 1, 4] += 1.0  # packed row 6 = sequence 1, row 3
    res = check_output(s, o, None, ref32, reflp)
    assert not res.passed and "batch 1 row 3 (packed row 6) head 1 col 4" in res.reason
    lse = ref32[1].clone()
    lse[1, 4] += 1.0
    res = check_output(s, ref32[0], lse, ref32, reflp)
    assert not res.passed and "at batch 1 row 1 head 1" in res.reason


def test_wrong_shape_fails_with_reason():
    ref32, reflp = _synthetic()
    res = check_output(S, ref32[0][:, :3], None, ref32, reflp)
    assert not res.passed and "output shape (1, 3, 2, 8) != expected (1, 4, 2, 8)" in res.reason
    assert math.isnan(res.max_err)


def test_fp8_lse_bound_grows_with_the_logit():
    """fp8: the H200 probe's case (tools/fp8_trap_probe.py): a planted key makes |lse| ~46 and FA3's own
    LSE error 0.10 while the low-precision reference is off by only 0.0064. That passes now (FP8_LSE_REL x
    |lse32| per row); a stale answer (off by nats) and the same error on a bf16 row still fail."""
    from kernelseek.check import FP8_LSE_REL
    f8 = Scenario(name="f8", batch=1, seqlen_q=4, seqlen_k=4, heads_q=2, heads_kv=2, head_dim=8, dtype="fp8")
    ref32, reflp = _synthetic()
    lse32 = ref32[1].clone()
    lse32[0, 1, 2] = 46.45                                   # the trapped row
    lselp = lse32.clone()
    lselp[0, 0, 0] += 0.0064
    ref32, reflp = (ref32[0], lse32), (reflp[0], lselp)
    lse = lse32.double().clone()
    lse[0, 1, 2] += 0.1004                                   # FA3's and our measured error there
    old_bound = 4 * 0.0064 + LSE_ATOL
    assert 0.1004 > old_bound and 0.1004 < old_bound + FP8_LSE_REL * 46.45
    assert check_output(f8, ref32[0], lse, ref32, reflp).passed
    res = check_output(S, ref32[0], lse, ref32, reflp)       # the same numbers on a bf16 row: k = 2, no allowance
    assert not res.passed and "lse error 0.1004" in res.reason
    lse[0, 1, 2] = 46.45 - 3.0                               # a stale LSE
    res = check_output(f8, ref32[0], lse, ref32, reflp)
    assert not res.passed and "x |lse32| 46.45" in res.reason and "at batch 0 row 2 head 1" in res.reason
    lse = lse32.double().clone()
    lse[0, 0, 3] += old_bound + FP8_LSE_REL * abs(float(lse32[0, 0, 3])) + 0.01   # a small row: little allowance
    assert not check_output(f8, ref32[0], lse, ref32, reflp).passed
