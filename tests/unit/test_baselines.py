"""Baseline adapters on the CPU: what each declines, and the FA3 adapter through a stand-in module."""
import sys
from pathlib import Path

import pytest

from kernelseek.baselines import fa3_vllm
from kernelseek.baselines.flash_attn import _bind_interface
import torch

from kernelseek import baselines
from kernelseek.check import check_output
from kernelseek.inputs import make_inputs
from kernelseek.reference import attention_ref
from kernelseek.scenarios import Scenario

STANDIN = str(Path(__file__).parent.parent / "fixtures" / "fa3_standin")


def sc(**kw):
    base = dict(name="t", heads_q=4, heads_kv=2, head_dim=64, batch=2, seqlen_q=33, seqlen_k=47)
    base.update(kw)
    return Scenario(**base)


def test_sdpa_declines_top_left_causal_and_unsupported_features():
    sdpa = baselines.Sdpa("cudnn")
    assert not sdpa.supports(sc(causal=True))[0]              # Sq != Sk: is_causal would be top-left
    assert "top-left" in sdpa.supports(sc(causal=True))[1]
    assert sdpa.supports(sc(causal=True, seqlen_q=47))[0]     # Sq == Sk: both alignments agree
    for kw, what in ((dict(window=(8, 0)), "window"), (dict(softcap=30.0), "softcap"), (dict(sinks=True), "sinks"),
                     (dict(page_size=16, seqlen_q=1, seqlen_k=64), "paged"), (dict(dtype="fp8"), "fp8")):
        ok, why = sdpa.supports(sc(**kw))
        assert not ok and what in why


def test_best_without_gpu_is_na_with_reasons():
    picked, skipped = baselines.choose("best", sc())
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert picked == []
    assert any("cudnn" in s and "CUDA" in s for s in skipped)
    assert any("FA3 unavailable" in s for s in skipped)


def test_unknown_baseline_names_the_known_ones():
    with pytest.raises(ValueError, match="known: best, all"):
        baselines.get("nonsense")


@pytest.fixture
def standin(monkeypatch):
    """tests/fixtures/fa3_standin's flash_attn_interface: FA3's calling convention over a reference,
    to test how the adapter calls FA3's Python interface. It is never taken for FA3 itself."""
    monkeypatch.syspath_prepend(STANDIN)
    monkeypatch.setattr(fa3_vllm, "candidates", lambda: [])     # no staged FA3 library either
    fa3_vllm.load.cache_clear()
    sys.modules.pop("flash_attn_interface", None)
    import flash_attn_interface
    yield flash_attn_interface
    sys.modules.pop("flash_attn_interface", None)
    fa3_vllm.load.cache_clear()


def test_the_standin_is_never_taken_for_fa3(standin):
    ok, why = baselines.FA3().available()
    assert not ok and "not FlashAttention-3" in why and "checkout" in why


@pytest.mark.parametrize("kw", [
    dict(causal=True),                                                     # bottom-right, Sq < Sk
    dict(causal=True, window=(5, 0), softcap=20.0, sinks=True),
    dict(seqlens_q=(5, 1, 9), seqlens_k=(12, 7, 9), causal=True, batch=1),  # varlen
    dict(seqlen_q=2, seqlen_k=50, page_size=8, cache_seqlens=(50, 21), leftpad=(3, 0), kind="decode"),
    dict(seqlen_q=1, seqlen_k=64, page_size=16, kind="decode", sinks=True),
])
def test_fa3_interface_calls_through_standin_match_reference(standin, kw):
    s = sc(**kw)
    assert baselines.FA3().supports(s)[0]
    inp = make_inputs(s, seed=3)
    b = _bind_interface(standin, s, inp)
    o, lse = b.result(b.call())
    ref32, reflp = attention_ref(s, inp, "fp32"), attention_ref(s, inp, "lowp")
    c = check_output(s, o, lse, ref32, reflp)
    assert c.passed, c.reason


def test_fa3_unavailable_is_said_plainly():
    sys.modules.pop("flash_attn_interface", None)
    ok, why = baselines.FA3().available()
    assert not ok and "FA3 unavailable" in why
