"""kernels/fa3_hopper (the folder, from its one translation unit) built with the real nvcc (sm_90a),
as CI can without a GPU.

What the H200 runs rely on and a compile can show: the file builds, passes the constraint check
(no cuBLAS/cuDNN/CUTLASS/CuTe, no dlopen), no kernel spills, and each path uses the instructions it
is meant to: HGMMA + TMA for bf16/fp16 prefill, QGMMA for fp8, mma.sync (HMMA) with cp.async
(LDGSTS) for split-KV decode. (One build, about a minute on two cores.)
"""
from __future__ import annotations

import re

import pytest

from kernelseek import build as kb, constraints, profile

FA3 = kb.REPO_KERNELS / "fa3_hopper" / "fa3_hopper.cu"   # the folder's translation unit


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> kb.BuildResult:
    r = kb.build(FA3, cache_dir=tmp_path_factory.getbasetemp() / "kseek-build-cache")
    assert r.ok, r.log[-3000:]
    return r


def test_builds_and_passes_the_constraint_check(built):
    res = constraints.check_binary(built.so_path)
    assert res.ok, res.reasons


def test_no_kernel_spills(built):
    names = {k["demangled"] for k in built.ptxas}
    assert any(n.startswith("void fa3::fwd_kernel<") for n in names)
    assert any(n.startswith("void fa3::f8::fwd_kernel<") for n in names)
    assert any(n.startswith("void dec::splitkv_kernel<") for n in names)
    spilled = [(k["demangled"], k["spill_stores_bytes"], k["spill_loads_bytes"]) for k in built.ptxas
               if (k["spill_stores_bytes"] or k["spill_loads_bytes"]) and not k["demangled"].startswith("void naive::")]
    # Known (NOTES v13): the paged/mixed (PG) instantiations with the dynamic schedule at hd192/hd256
    # spill at most 32 bytes (their producer's page walk under setmaxnreg 40); every other kernel spills
    # nothing.
    known = [x for x in spilled if re.search(r"fwd_kernel<[^,]+, (192|256), \d+, \d+, 2, true, true>", x[0])
             and max(x[1], x[2]) <= 32]
    assert not [x for x in spilled if x not in known], spilled


@pytest.mark.skipif(profile.find_tool("cuobjdump") is None, reason="cuobjdump not installed")
def test_each_path_uses_its_instructions(built):
    text = profile.sass(built.so_path)
    prefill = profile.instruction_mix(text, "_ZN3fa310fwd_kernelI13__nv_bfloat16Li128ELi128ELi128ELi2E")
    assert prefill["HGMMA"] >= 16 and prefill["UTMALDG"] > 0 and prefill["STL"] == 0
    fp8 = profile.instruction_mix(text, "_ZN3fa32f810fwd_kernelILi128ELi128ELi128ELi128E")
    assert fp8["QGMMA"] >= 8 and fp8["HGMMA"] == 0
    decode = profile.instruction_mix(text, "_ZN3dec14splitkv_kernelI13__nv_bfloat16Li128E")
    assert decode["HMMA"] > 0 and decode["LDGSTS"] > 0 and decode["HGMMA"] == 0


def test_no_environment_read_in_the_kernel():
    """The A/B switches are build variants (variants.cuh), not getenv in the call path."""
    files = [f for f in sorted((kb.REPO_KERNELS / "fa3_hopper").iterdir()) if f.suffix in (".cu", ".cuh")]
    assert len(files) >= 10
    for f in files + [kb.REPO_KERNELS / "naive_core.cuh"]:
        assert not re.search(r"\bgetenv\s*\(", f.read_text()), f.name


def test_fallback_variant_builds_only_the_fallback(tmp_path_factory):
    r = kb.build(FA3, extra_flags=["-DKSEEK_FA3_FORCE_FALLBACK=1"],
                 cache_dir=tmp_path_factory.getbasetemp() / "kseek-build-cache")
    assert r.ok, r.log[-3000:]
    names = sorted(k["demangled"] for k in r.ptxas)
    assert len(names) == 10 and all(n.startswith(("void naive::naive_fwd_kernel<", "void naive::naive_wide_kernel<"))
                                    for n in names), names


def test_page_gather_adds_only_the_copy_kernel(built, tmp_path_factory):
    """KSEEK_FA3_PAGE_GATHER (page_gather.cuh; 2, the default since v14): built with 0 there is no copy
    kernel; the default has it, and otherwise the same kernels, with no new spills (its dispatch change
    is host code)."""
    r = kb.build(FA3, extra_flags=["-DKSEEK_FA3_PAGE_GATHER=0"],
                 cache_dir=tmp_path_factory.getbasetemp() / "kseek-build-cache")
    assert r.ok, r.log[-3000:]
    assert constraints.check_binary(r.so_path).ok
    var = {k["demangled"]: k for k in built.ptxas}
    base = {k["demangled"]: k for k in r.ptxas}
    assert not any("gather_pages" in n for n in base)
    assert set(var) - set(base) == {"pg::gather_pages(pg::Args)"}, set(var) ^ set(base)
    g = var["pg::gather_pages(pg::Args)"]
    assert g["spill_stores_bytes"] == g["spill_loads_bytes"] == 0
    assert all(var[n]["spill_stores_bytes"] == base[n]["spill_stores_bytes"] for n in base)


def test_mixed_gather_adds_the_list_split_and_the_slot_copy(built, tmp_path_factory):
    """KSEEK_FA3_MIXED_GATHER (fa3_hopper.cu run_mixed_slots, page_gather.cuh gather_listed; 1, the default
    since v15): built with 0 (v14) neither new kernel is there; the default has both and otherwise the same
    kernels (the PG ones read Args::kslot, so their code differs). Spills: none, except a few words in the
    producer warp (40 registers) of the hd192/hd256 paged, dynamically scheduled kernels (known since v13,
    in both builds); the hd128 kernels the serving rows run do not spill."""
    r = kb.build(FA3, extra_flags=["-DKSEEK_FA3_MIXED_GATHER=0"],
                 cache_dir=tmp_path_factory.getbasetemp() / "kseek-build-cache")
    assert r.ok, r.log[-3000:]
    assert constraints.check_binary(r.so_path).ok
    base = {k["demangled"] for k in r.ptxas}
    var = {k["demangled"]: k for k in built.ptxas}
    assert set(var) - base == {"pg::gather_listed(pg::Args, int const*)", "split_ids(int const*, int, int, int*, int*)"}
    assert base <= set(var)
    spilled = {n: k["spill_stores_bytes"] for n, k in var.items() if k["spill_stores_bytes"] or k["spill_loads_bytes"]}
    assert all(re.search(r"fwd_kernel<__\w+, (192|256), \d+, \d+, 2, true, true>", n) for n in spilled), spilled
    assert all(b <= 32 for b in spilled.values()), spilled


@pytest.mark.parametrize("flag, says", [("-DKSEEK_FA3_BN=100", "KSEEK_FA3_BN must be"),
                                        ("-DKSEEK_FA3_PAGE_GATHER=3", "KSEEK_FA3_PAGE_GATHER must be"),
                                        ("-DKSEEK_FA3_MIXED_GATHER=2", "KSEEK_FA3_MIXED_GATHER must be"),
                                        ("-DKSEEK_FA3_VARIANT=3", "KSEEK_FA3_VARIANT must be"),
                                        ("-DKSEEK_FA3_SCHED=fast", "sched_fast")])
def test_a_bad_variant_value_fails_to_build_naming_it(tmp_path, flag, says):
    r = kb.build(FA3, extra_flags=[flag], cache_dir=tmp_path)
    assert not r.ok and says in r.log, r.log[-2000:]
