"""The adversarial kernels (tests/adversarial/) without a GPU: headers, builds, constraint check.

Every kernel is built once with the real nvcc (module fixture, two at a time, into the session's
build cache shared with test_build.py and test_constraints.py). The two cuBLAS kernels must be
refused by the constraint check with reasons naming what gave them away; every other adversarial
kernel and kernels/naive_fwd.cu must pass it (no false positives: their tricks are for the worker
to catch). The matching rule the GPU test applies (tests/adversarial/expect.py) is checked on
synthetic rows, and a committed results file (tests/adversarial/results*.json) is re-checked.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from kernelseek import build as kb
from kernelseek import evaluate as E
from kernelseek import peaks
from kernelseek.constraints import check_binary, check_source
from kernelseek.scenarios import load_grid

REPO = Path(__file__).resolve().parents[2]
ADV = REPO / "tests" / "adversarial"
NAIVE = kb.REPO_KERNELS / "naive_fwd.cu"


def _load_expect():
    spec = importlib.util.spec_from_file_location("adversarial_expect", ADV / "expect.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses resolve the module by name
    spec.loader.exec_module(mod)
    return mod


X = _load_expect()
FILES = X.kernel_files()
EXPECTS = {f.stem: X.parse(f) for f in FILES}
REFUSED = {n for n, e in EXPECTS.items() if e.status == "refused" and not e.runtime_refusal}   # statically
RUNTIME = {n for n, e in EXPECTS.items() if e.runtime_refusal}       # only the run-time check sees them


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "kseek-build-cache"   # shared with test_build.py


@pytest.fixture(scope="module")
def built(cache) -> dict[str, kb.BuildResult]:
    srcs = [NAIVE, *FILES]                  # the longest build first
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda f: kb.build(f, cache_dir=cache), srcs))
    return {f.stem: r for f, r in zip(srcs, results)}


# ---- headers ------------------------------------------------------------------------------------
def test_every_kernel_names_its_trick_and_expectation():
    assert len(FILES) >= 12, [f.name for f in FILES]
    exps = [X.parse(f) for f in FILES]          # raises, naming the file, on a bad header
    for e in exps:
        assert len(e.trick) > 30, f"{e.name}: TRICK too short to say what it does: {e.trick!r}"
        assert e.status in X.STATUSES
        if e.status != "passed":
            assert e.reasons and all(r.strip() for r in e.reasons), e.name
    statuses = {e.status for e in exps}
    assert {"failed", "error", "timeout", "refused", "passed"} <= statuses, statuses
    grid = {s.name for s in load_grid(X.GRID)}
    for e in exps:
        if e.where is not None:
            assert any(e.where in g for g in grid), f"{e.name}: where={e.where!r} matches no scenario"
            assert any(e.where not in g for g in grid), f"{e.name}: where={e.where!r} matches every scenario"
        if e.scenarios is not None:
            assert set(e.scenarios.split(",")) <= grid, f"{e.name}: scenarios={e.scenarios!r}: not all in grid.yaml"
    # the grid has an awkward length and a common one, all bf16
    gs = load_grid(X.GRID)
    assert all(s.dtype == "bf16" for s in gs)
    assert any(s.seqlen_q % 64 and s.seqlen_k % 64 for s in gs)
    assert any(s.seqlen_q % 64 == 0 and s.seqlen_k % 64 == 0 for s in gs)


def test_readme_lists_every_kernel():
    readme = (ADV / "README.md").read_text()
    missing = [f.name for f in FILES if f"`{f.name}`" not in readme]
    assert not missing, f"README.md table lacks {missing}"


def test_header_parser_rejects_incomplete_headers(tmp_path):
    bad = {
        "no_trick.cu": '// EXPECT: status=failed, reason contains "x"\nint x;\n',
        "no_expect.cu": "// TRICK: something sneaky enough to need a description here\nint x;\n",
        "bad_status.cu": '// TRICK: t\n// EXPECT: status=crashed, reason contains "x"\nint x;\n',
        "no_reason.cu": "// TRICK: t\n// EXPECT: status=failed\nint x;\n",
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=name):
            X.parse(tmp_path / name)
    (tmp_path / "ok.cu").write_text('// TRICK: a\n//   b\n// EXPECT: status=error, reason contains "p|q",\n'
                                   '//   scenarios="s1", timeout=8\n// HOLE: h\n#include "x.h"\n')
    e = X.parse(tmp_path / "ok.cu")
    assert (e.trick, e.status, e.reasons, e.scenarios, e.timeout_s, e.hole) == ("a b", "error", ["p", "q"], "s1", 8.0, "h")


# ---- builds and the constraint check -------------------------------------------------------------
def _dynamic_defined(so: Path) -> set[str]:
    with so.open("rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".dynsym")
        assert isinstance(sec, SymbolTableSection)
        return {s.name for s in sec.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}


def test_every_kernel_builds_and_exports_the_abi(built):
    for name, r in built.items():
        assert r.ok, f"{name} does not build:\n{r.log[-3000:]}"
        exported = _dynamic_defined(r.so_path)
        assert {"kseek_fwd", "kseek_workspace_bytes", "kseek_name"} <= exported, (name, sorted(exported)[:20])


def test_build_cache_key_covers_the_honest_core():
    dirs = [ADV, kb.REPO_KERNELS]
    for f in FILES:
        if '#include "honest_core.cuh"' in f.read_text():
            assert ADV / "honest_core.cuh" in kb.local_headers(f, dirs), f.name


def test_direct_cublas_call_is_refused_naming_the_symbols(built):
    e = X.parse(ADV / "blas_direct.cu")
    res = check_binary(built["blas_direct"].so_path)
    assert not res.ok
    text = "; ".join(res.reasons)
    assert "symbol cublasCreate_v2 imported (undefined)" in text and "cuBLAS" in text
    assert "cublasSetStream_v2" in text
    # nothing in the source names the library in a string: the binary is what gives it away
    assert check_source(ADV / "blas_direct.cu").ok
    assert any(r in "constraint check refused the kernel: " + text for r in e.reasons)


def test_runtime_loaded_cublas_is_refused_naming_the_strings(built):
    e = X.parse(ADV / "blas_dlopen.cu")
    res = check_binary(built["blas_dlopen"].so_path)
    assert not res.ok
    text = "; ".join(res.reasons)
    assert "'libcublas.so.13'" in text and "'cublasCreate_v2'" in text
    assert not any(r.startswith("symbol ") for r in res.reasons), "no cuBLAS symbol: only strings"
    assert any("dlopen" in r for r in res.reasons)   # loading libraries at run time is refused too
    src = check_source(ADV / "blas_dlopen.cu")
    assert not src.ok and any("libcublas.so.13" in r for r in src.reasons)
    assert any(r in "constraint check refused the kernel: " + text for r in e.reasons)


def test_refused_kernels_are_refused_or_a_known_hole(built):
    assert {"blas_direct", "blas_dlopen"} <= REFUSED
    for name in sorted(REFUSED):
        e = EXPECTS[name]
        b, s = check_binary(built[name].so_path), check_source(e.path)
        reason = "constraint check refused the kernel: " + "; ".join(b.reasons + s.reasons)   # as evaluate words it
        if b.ok and s.ok and e.hole:
            continue                       # reported below as an expected failure
        assert not (b.ok and s.ok), f"{name} passes the constraint check"
        assert any(r in reason for r in e.reasons), (name, reason)
    holes = [n for n in sorted(REFUSED) if EXPECTS[n].hole and check_binary(built[n].so_path).ok
             and check_source(EXPECTS[n].path).ok]
    if holes:
        pytest.xfail("known holes, not refused by the constraint check today: "
                     + "; ".join(f"{n}: {EXPECTS[n].hole}" for n in holes))


def test_runtime_refusals_pass_the_name_rules_and_the_host_gate_names_their_imports(built):
    """blas_hidden reaches cuBLAS without a name, a loader import or a DT_NEEDED entry: the name
    rules (constraints.py) see nothing; reading /proc/self/maps and the library file by hand takes
    file and mapping imports, which the host-code gate refuses by name. (The run-time check stays
    behind it, for code that finds the library without any import.)"""
    assert "blas_hidden" in RUNTIME
    for name in sorted(RUNTIME):
        b, s = check_binary(built[name].so_path), check_source(EXPECTS[name].path)
        names = [r for r in b.reasons if not r.startswith("host-code gate")]
        assert names == [] and s.ok, (name, names, s.reasons)
        gate = " ".join(r for r in b.reasons if r.startswith("host-code gate"))
        assert "imports fopen" in gate and "imports mmap" in gate, (name, gate)
        code = "\n".join(ln.split("//", 1)[0] for ln in EXPECTS[name].path.read_text().lower().splitlines())
        assert "cublas" not in code and "dlopen" not in code and "dlsym" not in code, name   # code, not comments


def test_a_library_in_the_file_name_is_not_a_use(built):
    """nocublas.cu and cutlass_free.cu are naive_fwd.cu under a library's name: the name reaches the
    kernels' symbols (nvcc names the anonymous namespace after the file), and is not refused."""
    for name, lib in (("nocublas", "nocublas"), ("cutlass_free", "cutlass_free")):
        assert EXPECTS[name].honest and EXPECTS[name].status == "passed"
        syms = _all_symbols(built[name].so_path)
        assert any(f"_{len(lib) + 3}_{lib}_cu_" in n for n in syms), name      # the name is in there
        assert check_binary(built[name].so_path).ok, check_binary(built[name].so_path).reasons
    # the real detections still refuse: a forbidden name next to a file id is still found
    from kernelseek.constraints import forbidden_name, strip_file_ids
    fid = "_ZN44_GLOBAL__N__fa56f966_11_nocublas_cu_8020c445L16naive_fwd_kernelIfEEvv"
    assert not forbidden_name(fid) and "nocublas" not in strip_file_ids(fid)
    assert forbidden_name(fid.replace("naive_fwd_kernel", "cublasSgemm_v2"))
    assert forbidden_name("_ZN44_GLOBAL__N__fa56f966_11_nocublas_cu_8020c445") is False
    assert forbidden_name("_ZN7cutlass4gemm6kernelEv") and forbidden_name("cublasLtMatmul")
    assert forbidden_name("_11_nocublas_cu_8020c44")          # not an exact id (7 hex digits): still refused
    digits = "_ZN44_GLOBAL__N__26798326_11_nocublas_cu_8020c44517file_named_kernelEPi"   # an all-digit hash
    assert strip_file_ids(digits) == "_ZN44_GLOBAL__N__26798326_<file>17file_named_kernelEPi" and not forbidden_name(digits)


def _all_symbols(so) -> set[str]:
    with so.open("rb") as f:
        elf = ELFFile(f)
        return {s.name for sec in elf.iter_sections() if isinstance(sec, SymbolTableSection) for s in sec.iter_symbols()}


def test_no_false_positives_on_the_other_kernels(built):
    for name, r in built.items():
        if name in REFUSED or name in RUNTIME:       # RUNTIME: the host-code gate refuses them too
            continue
        src = ADV / f"{name}.cu" if name != "naive_fwd" else NAIVE
        b, s = check_binary(r.so_path), check_source(src)
        assert b.ok and b.reasons == [], (name, b.reasons)
        assert s.ok and s.reasons == [], (name, s.reasons)
        assert b.notes == [], (name, b.notes)          # none of them loads libraries at run time


# ---- the rule the GPU test applies ----------------------------------------------------------------
def _row(scenario, status="passed", reason="", time_ms=0.1, suspicious=False):
    return {"scenario": scenario, "status": status, "reason": reason, "time_ms": time_ms,
            "suspicious": suspicious, "suspicious_reason": "speedup 3x" if suspicious else ""}


def test_rule_on_synthetic_rows():
    zeros = X.parse(ADV / "zeros.cu")
    assert X.problems(zeros, [_row("common_128", "failed", "common_128: max error 2 > bound 0.03")]) == []
    assert X.problems(zeros, [_row("common_128")])                                     # passed: wrong
    assert X.problems(zeros, [_row("common_128", "failed", "lse: 3 NaN")])              # other reason
    assert X.problems(zeros, [])                                                          # no rows at all

    awk = X.parse(ADV / "awkward_tail.cu")
    good = [_row("common_128"), _row("awkward_113x203", "failed", "x: 9 NaN ...; max error 0.6 > bound")]
    assert X.problems(awk, good) == []
    assert X.problems(awk, [_row("common_128", "failed", "max error")])                 # common must pass
    assert X.problems(awk, [_row("common_128", time_ms=None)])                          # passed but untimed
    assert X.problems(awk, [_row("common_128")])                                         # where never hit

    oob = X.parse(ADV / "oob_read.cu")
    for why in ("AcceleratorError: CUDA error: an illegal memory access was encountered",
                "RuntimeError: CUDA error: unspecified launch failure"):
        assert X.problems(oob, [_row("common_128", "error", why)]) == []
    assert X.problems(oob, [_row("common_128", "error", "worker crashed (exit -11)")])

    naive = X.honest(NAIVE)
    assert X.problems(naive, [_row("common_128"), _row("awkward_113x203")]) == []
    assert X.problems(naive, [_row("common_128", suspicious=True)])                      # honest: never flagged
    assert X.problems(X.parse(ADV / "control_honest.cu"), [_row("common_128", suspicious=True)])   # TRICK: none

    closed = X.parse(ADV / "poison_sense.cu")          # was a hole; its verdict needs the timing guards
    assert not closed.hole and not closed.decided_before_timing
    passed = [_row("common_128"), _row("awkward_113x203")]
    assert X.problems(closed, passed) and not X.slips_through(closed, passed)   # no longer a known hole
    caught = [_row("common_128", "failed", "after timing ... (stale or skipped work?): 9 NaN")]
    assert X.problems(closed, caught) == [] and not X.slips_through(closed, caught)
    import dataclasses
    hole = dataclasses.replace(closed, hole="a known hole")                  # the rule for HOLE kernels
    assert X.slips_through(hole, passed) and not X.slips_through(hole, caught)
    assert not X.slips_through(zeros, [_row("common_128")])                              # only HOLE kernels


def test_which_kernels_may_share_the_gpu():
    decided = {e.name for e in map(X.parse, FILES) if e.decided_before_timing}
    # the verdict of these comes before any timing, so they may run side by side
    assert {"zeros", "partial_write", "low_precision", "oob_read", "spin_forever", "blas_direct",
            "blas_dlopen", "python_escape", "blas_hidden"} <= decided
    # these are caught (or passed) by timing-dependent guards: they must run alone
    assert not decided & {"other_stream", "cache_result", "skip_repeat", "poison_sense", "awkward_tail",
                          "control_honest", "memo_host", "memo_gpu", "memo_graph", "cutlass_free", "nocublas"}


# ---- a committed GPU run ----------------------------------------------------------------------------
RECORDED = sorted(ADV.glob("results*.json"))


@pytest.mark.skipif(not RECORDED, reason="no committed GPU results (tests/adversarial/results*.json) yet")
@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_gpu_results(path):
    doc = json.loads(path.read_text())
    meta, kernels = doc["meta"], doc["kernels"]
    assert meta.get("gpu") and meta.get("git_rev")
    scen = {s.name: s for s in load_grid(X.GRID)}
    lines = peaks.lines_for(meta["gpu"])
    names = {f.stem for f in FILES}
    assert "naive_fwd" in kernels
    for name, rows in kernels.items():
        if name not in names and not (REPO / "kernels" / f"{name}.cu").exists():
            continue                                 # a kernel since removed
        exp = X.parse(ADV / f"{name}.cu") if name in names else X.honest(REPO / "kernels" / f"{name}.cu")
        probs = X.problems(exp, rows)
        assert not probs or X.slips_through(exp, rows), "\n".join(probs)
        if not exp.honest:
            continue
        for r in rows:             # today's make_row on the recorded numbers: still not suspicious
            reply = {k: r.get(k) for k in ("status", "reason", "max_err", "ref_err", "err_bound", "err_ratio",
                                           "lse_err", "time_ms", "time_p10_ms", "time_p90_ms", "kernel_ms",
                                           "host_ms", "baselines")}
            again = E.make_row(scen[r["scenario"]], r.get("grid", ""), reply, lines)
            assert again.status == "passed", f"{name} / {r['scenario']}: {again.reason}"   # under the fail line
            if r.get("speedup") is None:
                assert again.speedup is None
            else:
                assert again.speedup == pytest.approx(r["speedup"])
            assert not again.suspicious, f"{name} / {r['scenario']}: {again.suspicious_reason}"
    missing = sorted(names - set(kernels))
    if missing:      # kernels added after this recording: tools/gpu_trust.sh records them
        pytest.xfail(f"not recorded in {path.name} yet (run tools/gpu_trust.sh on the H200): {missing}")


def test_honest_core_refuses_chunked_attention_before_launching(built):
    """kseek.h ABI 3: a kernel without chunked attention answers KSEEK_ERR_UNSUPPORTED for attention_chunk > 0
    and KSEEK_ERR_INVALID for < 0, before any CUDA call (so no GPU is needed here); an ABI 2 caller is
    refused as a version mismatch."""
    from kernelseek import abi
    lib = abi.load(built["control_honest"].so_path)
    p = abi.KseekParams()
    p.abi_version, p.dtype, p.out_dtype = abi.ABI_VERSION, 0, 0
    p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v = 1, 4, 4, 2, 2, 64, 64
    p.q, p.k, p.v, p.o = 0x100000, 0x200000, 0x300000, 0x400000
    p.window_left = p.window_right = -1
    p.attention_chunk = 5
    assert lib.fwd(p, 0) == 1          # KSEEK_ERR_UNSUPPORTED
    p.attention_chunk = -1
    assert lib.fwd(p, 0) == 2          # KSEEK_ERR_INVALID
    p.abi_version = 2                  # an ABI 2 caller has no attention_chunk field: refused as a mismatch
    assert lib.fwd(p, 0) == 5
