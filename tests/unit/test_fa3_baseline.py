"""The fa3 baseline: where FA3's library is looked for, what a run records about it, and that a
module named flash_attn_interface which is not FlashAttention-3 is never taken for it."""
import sys

import pytest

from kernelseek.baselines import fa3_vllm, get
from kernelseek.baselines.flash_attn import is_real_fa3
from kernelseek.evaluate import note_baselines


@pytest.fixture(autouse=True)
def _fresh_cache():
    fa3_vllm.load.cache_clear()
    yield
    fa3_vllm.load.cache_clear()


def test_env_path_is_tried_first_and_a_non_library_is_refused_with_its_path(tmp_path, monkeypatch):
    bogus = tmp_path / "_vllm_fa3_C.abi3.so"
    bogus.write_bytes(b"not an ELF file")
    monkeypatch.setenv(fa3_vllm.ENV, str(bogus))
    assert fa3_vllm.candidates()[0] == bogus and fa3_vllm.find() == bogus
    op, why = fa3_vllm.load()
    assert op is None and str(bogus) in why and "did not load" in why
    assert str(bogus) in fa3_vllm.version() and "sha256" in fa3_vllm.version()


def test_missing_library_names_every_place_tried(tmp_path, monkeypatch):
    monkeypatch.setenv(fa3_vllm.ENV, str(tmp_path / "nope.so"))
    monkeypatch.setattr(fa3_vllm, "candidates", lambda: [tmp_path / "nope.so", tmp_path / "nope2.so"])
    ok, why = get("fa3").available()
    assert not ok and "nope.so" in why and "nope2.so" in why


def test_an_impostor_flash_attn_interface_is_not_fa3(tmp_path, monkeypatch):
    # a module of FA3's name and entry points, installed by no FA3 distribution (here: a bare file)
    (tmp_path / "flash_attn_interface.py").write_text(
        "def flash_attn_func(*a, **k): pass\ndef flash_attn_varlen_func(*a, **k): pass\n"
        "def flash_attn_with_kvcache(*a, **k): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("flash_attn_interface", None)
    try:
        ok, why = is_real_fa3("flash_attn_interface")
        assert not ok and "not FlashAttention-3" in why
        monkeypatch.setattr(fa3_vllm, "candidates", lambda: [tmp_path / "absent.so"])
        assert get("fa3").available()[0] is False
    finally:
        sys.modules.pop("flash_attn_interface", None)


def test_our_own_attention_module_is_never_fa3():
    ok, why = is_real_fa3("kernelseek.attention")
    assert not ok and "checkout" in why


def test_run_meta_counts_each_baseline_and_keeps_its_version():
    seen: dict = {}
    note_baselines(seen, {"baselines": {"fa3": {"status": "passed", "version": "FA3 /root/fa3/x.so sha256 ab"},
                                        "cudnn": {"status": "failed", "version": "cuDNN 9.19"}}})
    note_baselines(seen, {"baselines": {"fa3": {"status": "passed", "version": "FA3 /root/fa3/x.so sha256 ab"}}})
    assert seen == {"fa3": {"version": "FA3 /root/fa3/x.so sha256 ab", "passed": 2, "other": 0},
                    "cudnn": {"version": "cuDNN 9.19", "passed": 0, "other": 1}}


def test_unset_optional_arguments_are_passed_as_none():
    # torch's dispatcher refuses a call that omits an optional argument declared without a default
    # (seen on the H200: "_vllm_fa3_C::fwd() is missing value for argument 'k_new'"); a real op's
    # schema stands in for the library's here
    import torch
    op = torch.ops.aten._flash_attention_forward
    kw = fa3_vllm.with_unset_optionals(op, {"max_q": 1, "max_k": 1, "dropout_p": 0.0, "is_causal": True,
                                            "return_debug_mask": False})
    assert kw["cum_seq_q"] is None and kw["cum_seq_k"] is None   # Optional, no default: filled
    assert "scale" not in kw and "block_table" not in kw          # Optional with a default: left alone
    assert kw["is_causal"] is True
