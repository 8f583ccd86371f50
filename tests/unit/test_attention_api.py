"""The FlashAttention-3-compatible API refuses what it does not implement, before running anything."""
import inspect

import pytest
import torch

from kernelseek import attention as A


def t(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.bfloat16, requires_grad=grad)


@pytest.mark.parametrize("call, what", [
    (lambda: A.flash_attn_func(t(1, 8, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64), qv=t(1, 8, 2, 64)), "qv"),
    (lambda: A.flash_attn_func(t(1, 8, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64), attention_chunk=4), "attention chunk"),
    (lambda: A.flash_attn_with_kvcache(t(1, 1, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64), k=t(1, 1, 2, 64),
                                       v=t(1, 1, 2, 64)), "appending new k v"),
    (lambda: A.flash_attn_with_kvcache(t(1, 1, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64), rotary_cos=t(8, 32),
                                       rotary_sin=t(8, 32)), "rotary"),
    (lambda: A.flash_attn_with_kvcache(t(1, 1, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64),
                                       cache_batch_idx=torch.zeros(1, dtype=torch.int32)), "cache batch idx"),
    (lambda: A.flash_attn_varlen_func(t(8, 2, 64), t(8, 2, 64), t(8, 2, 64), torch.tensor([0, 8]),
                                      torch.tensor([0, 8]), 8, 8, seqused_q=torch.tensor([8])), "seqused q"),
    (lambda: A.flash_attn_func(t(1, 8, 2, 64, grad=True), t(1, 8, 2, 64), t(1, 8, 2, 64)), "backward"),
])
def test_unsupported_features_raise_not_implemented(call, what):
    with pytest.raises(NotImplementedError, match=what):
        call()


def test_cpu_tensors_are_refused_clearly():
    with pytest.raises(ValueError, match="CUDA device"):
        A.flash_attn_func(t(1, 8, 2, 64), t(1, 8, 2, 64), t(1, 8, 2, 64))


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


def test_window_folds_causal_bottom_right():
    c = A._Call(1, 2, 2, 64, 64, 4, 8, True, (16, -1), 0.0, 0.125, 0)
    assert c.effective_window == (16, 0)
    assert A._Call(1, 2, 2, 64, 64, 4, 8, False, (-1, -1), 0.0, 0.125, 0).effective_window == (-1, -1)
