"""The FlashAttention-3-compatible API: its signature, and what it refuses (backward; what FA3 refuses)."""
import inspect

import pytest
import torch

from kernelseek import attention as A


def t(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.bfloat16, requires_grad=grad)


def test_forward_runs_on_inputs_that_require_grad_and_backward_raises():
    q, k, v = t(1, 8, 2, 64, grad=True), t(1, 8, 2, 64), t(1, 8, 2, 64)
    out, lse = A.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    with torch.no_grad():
        ref = A.flash_attn_func(q.detach(), k, v, causal=True)
    assert out.requires_grad and not lse.requires_grad and torch.equal(out.detach(), ref)
    with pytest.raises(NotImplementedError, match="backward"):
        out.float().sum().backward()
    with torch.no_grad():                                         # no grad mode: a plain tensor
        assert not A.flash_attn_func(q, k, v).requires_grad


def test_rotary_without_new_kv_is_refused_as_fa3_does():
    with pytest.raises(ValueError, match="rotary"):
        A.flash_attn_with_kvcache(t(1, 1, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64), rotary_cos=t(8, 32),
                                  rotary_sin=t(8, 32))


def test_tensors_off_cuda_and_cpu_are_refused_clearly():
    m = lambda *s: torch.empty(*s, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match="CUDA device"):
        A.flash_attn_func(m(1, 8, 2, 64), m(1, 8, 2, 64), m(1, 8, 2, 64))


def test_argument_names_match_flash_attention_3():
    names = {f: list(inspect.signature(getattr(A, f)).parameters) for f in
             ("flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache")}
    assert names["flash_attn_func"][:10] == ["q", "k", "v", "softmax_scale", "causal", "qv", "q_descale",
                                            "k_descale", "v_descale", "window_size"]
    assert {"softcap", "num_splits", "return_attn_probs", "s_aux"} <= set(names["flash_attn_func"])
    assert names["flash_attn_varlen_func"][:7] == ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                                   "max_seqlen_k"]
    assert {"page_table", "cache_seqlens", "cache_leftpad", "num_splits", "return_softmax_lse", "s_aux"} \
        <= set(names["flash_attn_with_kvcache"])
    assert names["flash_attn_with_kvcache"][:17] == [
        "q", "k_cache", "v_cache", "k", "v", "qv", "rotary_cos", "rotary_sin", "cache_seqlens", "cache_batch_idx",
        "cache_leftpad", "page_table", "cu_seqlens_q", "cu_seqlens_k_new", "max_seqlen_q", "rotary_seqlens",
        "q_descale"]
    assert list(inspect.signature(A.flash_attn_combine).parameters) == ["out_partial", "lse_partial", "out",
                                                                         "out_dtype"]


def test_window_folds_causal_bottom_right():
    c = A._Call(1, 2, 2, 64, 64, 4, 8, True, (16, -1), 0.0, 0.125, 0)
    assert c.effective_window == (16, 0)
    assert A._Call(1, 2, 2, 64, 64, 4, 8, False, (-1, -1), 0.0, 0.125, 0).effective_window == (-1, -1)
