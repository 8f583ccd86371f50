"""Kernel folders, the include path and build variants (defines), with the real nvcc.

The fixtures (tests/fixtures/kernel_folders/README.md) are tiny: a two-file folder kernel whose
own header and a parent-relative header are part of its key and hash, a define that picks the
template instance (so the kernel's symbol changes), a folder without its entry file. Builds go to
a cache under each test's temporary directory.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import build as kb
from kernelseek import kernel_source as ks
from kernelseek.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "kernel_folders"


@pytest.fixture
def kdir(tmp_path) -> Path:
    """A writable copy of the fixture kernels (twofile/, shared_tile.cuh, ...)."""
    shutil.copytree(FIX, tmp_path / "k")
    return tmp_path / "k"


def _names(r: kb.BuildResult) -> list[str]:
    return sorted(k["kernel"] for k in r.ptxas)


# ---- kernel folders -------------------------------------------------------------------------------
def test_folder_builds_from_its_entry_and_its_headers_are_in_the_key(kdir, tmp_path):
    cache = tmp_path / "cache"
    folder = kdir / "twofile"
    a = kb.build(folder, cache_dir=cache)
    assert a.ok, a.log
    assert a.so_path.name == "twofile.so" and _names(a) == ["_Z14twofile_kernelILi64EEvPf"]
    assert a.source == str(folder) and a.source_hash == ks.kernel_hash(folder) and a.defines == {}
    # the folder and its entry file are one kernel: same key (served from the cache), same hash
    b = kb.build(folder / "twofile.cu", cache_dir=cache)
    assert b.cached and b.key == a.key and ks.kernel_hash(folder / "twofile.cu") == a.source_hash
    # a file of the folder that nothing includes is not part of the kernel
    (folder / "notes.txt").write_text("not compiled\n")
    assert kb.build(folder, cache_dir=cache).cached and ks.kernel_hash(folder) == a.source_hash
    # the folder's own header and the parent-relative one are: each edit is a new key and hash
    seen_keys, seen_hashes = {a.key}, {a.source_hash}
    for hdr, old, new in ((folder / "scale.cuh", "2.0f", "3.0f"),
                          (kdir / "shared_tile.cuh", "threadIdx.x % tile", "(threadIdx.x + 1) % tile")):
        hdr.write_text(hdr.read_text().replace(old, new))
        c = kb.build(folder, cache_dir=cache)
        assert c.ok and not c.cached, c.log
        assert c.key not in seen_keys and ks.kernel_hash(folder) not in seen_hashes
        seen_keys.add(c.key)
        seen_hashes.add(ks.kernel_hash(folder))


def test_closure_and_hash_of_a_lone_file(kdir, tmp_path):
    lone = kdir / "lone_with_header.cu"
    assert ks.closure(lone)[0] == lone.resolve() and (kdir / "shared_tile.cuh").resolve() in ks.closure(lone)
    assert ks.kernel_hash(lone) != hashlib.sha256(lone.read_bytes()).hexdigest()   # it has a header
    plain = tmp_path / "plain.cu"
    plain.write_text('#include "kseek.h"\n__global__ void k(float* x) { x[0] = 1.0f; }\n')
    want = hashlib.sha256(plain.read_bytes()).hexdigest()
    assert ks.kernel_hash(plain) == want and ks.is_lone_file(plain)     # kseek.h: the harness's, elsewhere
    shutil.copyfile(ks.KSEEK_H, tmp_path / "kseek.h")                      # an unchanged copy beside it
    assert ks.kernel_hash(plain) == want and ks.is_lone_file(plain)
    (tmp_path / "kseek.h").write_text(ks.KSEEK_H.read_text() + "\n#define EDITED 1\n")
    assert ks.kernel_hash(plain) != want and not ks.is_lone_file(plain)  # an edited copy is the kernel's


def test_a_folder_without_its_entry_and_a_missing_kernel(tmp_path, capsys):
    bad = FIX / "no_entry"
    r = kb.build(bad, cache_dir=tmp_path)
    assert not r.ok and r.so_path is None and len(r.log.splitlines()) == 1
    assert str(bad) in r.log and "no_entry/no_entry.cu" in r.log
    with pytest.raises(ks.KernelError, match="no_entry/no_entry.cu"):
        ks.kernel_hash(bad)
    assert cli_main(["build", str(bad), "--cache-dir", str(tmp_path)]) == 2
    out = capsys.readouterr().err.strip()
    assert out.startswith("kernelseek build: kernel folder ") and "no_entry/no_entry.cu" in out and "\n" not in out
    assert cli_main(["eval", str(bad), "--grid", "smoke", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no_entry/no_entry.cu" in err and "\n" not in err and not (tmp_path / "runs").exists()
    assert cli_main(["build", str(tmp_path / "missing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


# ---- the include path -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["naive_fwd.cu", "fa3_hopper.cu", "fa3_hopper/fa3_hopper.cu"])
def test_a_candidate_cannot_include_the_repositorys_kernels_by_name(tmp_path, name):
    src = tmp_path / "cand" / "cand.cu"
    src.parent.mkdir()
    src.write_text(f'#include "{name}"\n')
    r = kb.build(src, cache_dir=tmp_path / "cache")
    assert not r.ok and f"{name}: No such file or directory" in r.log, r.log[-600:]
    assert f"-I{kb.REPO_KERNELS}" not in r.log.splitlines()[0].split()   # kernels/ is not on the path


def test_kseek_h_everywhere_and_relative_includes(tmp_path):
    """The control for the test above: a kernel beside the candidate is included (relative to the
    including file), and kseek.h resolves from a directory that has none."""
    assert (kb.REPO_KERNELS / "naive_fwd.cu").is_file()
    src = tmp_path / "cand" / "sub" / "cand.cu"
    src.parent.mkdir(parents=True)
    shutil.copyfile(kb.REPO_KERNELS / "naive_fwd.cu", tmp_path / "cand" / "naive_fwd.cu")
    for f in ks.closure(kb.REPO_KERNELS / "naive_fwd.cu")[1:]:   # naive_fwd.cu's own headers, if any
        shutil.copyfile(f, tmp_path / "cand" / f.name)
    src.write_text('#include "../naive_fwd.cu"\n')
    assert not (tmp_path / "cand" / "sub" / "kseek.h").exists()
    r = kb.build(src, cache_dir=tmp_path / "cache")
    assert r.ok, r.log[-2000:]
    assert any("naive_fwd_kernel" in k["kernel"] for k in r.ptxas)


# ---- build variants -----------------------------------------------------------------------------------
def test_define_changes_the_symbol_the_key_and_is_recorded(kdir, tmp_path, capsys):
    cache = tmp_path / "cache"
    folder = kdir / "twofile"
    base = kb.build(folder, cache_dir=cache)
    v = kb.build(folder, cache_dir=cache, defines={"TWOFILE_TILE": 128})
    assert base.ok and v.ok, v.log
    assert _names(v) == ["_Z14twofile_kernelILi128EEvPf"] != _names(base)
    assert v.defines == {"TWOFILE_TILE": "128"} and "-DTWOFILE_TILE=128" in v.flags and v.key != base.key
    assert v.source_hash == base.source_hash                  # same kernel, another variant
    assert json.loads((v.so_path.parent / "meta.json").read_text())["defines"] == {"TWOFILE_TILE": "128"}
    again = kb.build(folder, cache_dir=cache, defines={"TWOFILE_TILE": "128"})
    assert again.cached and again.so_path == v.so_path
    assert cli_main(["build", str(folder), "--define", "TWOFILE_TILE=128", "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert f"built {folder} with TWOFILE_TILE=128 -> {v.so_path} (cached" in out
    assert "twofile_kernel<128>" in out


@pytest.mark.parametrize("defines, what", [
    ({"9LIVES": "1"}, "C identifier"), ({"A-B": "1"}, "C identifier"), ({"X": "a b"}, "whitespace"),
    ({"X": '"q"'}, "quotes"), ({"X": "it's"}, "quotes"), ({"X": ""}, "non-empty"), ({"X": 1.5}, "string or an integer"),
    ({"X": "a\\b"}, "backslash")])
def test_bad_defines_are_refused_naming_the_define(defines, what, tmp_path):
    with pytest.raises(ks.KernelError, match=what):
        kb.build(FIX / "twofile", cache_dir=tmp_path, defines=defines)
    assert not tmp_path.joinpath("x").exists() and list(tmp_path.iterdir()) == []   # nothing compiled


def test_parse_defines_and_the_cli_refusals(tmp_path, capsys):
    assert ks.parse_defines(["B=2", "A"]) == {"A": "1", "B": "2"}
    assert ks.define_flags({"B": 2, "A": "x"}) == ["-DA=x", "-DB=2"]
    with pytest.raises(ks.KernelError, match="defined twice"):
        ks.parse_defines(["A=1", "A=2"])
    assert cli_main(["build", str(FIX / "twofile"), "--define", "1X=2"]) == 2
    assert "build define '1X'" in capsys.readouterr().err
    assert cli_main(["eval", str(FIX / "twofile"), "--define", "X=a b", "--runs-dir", str(tmp_path / "r")]) == 2
    assert "build define X='a b'" in capsys.readouterr().err and not (tmp_path / "r").exists()
    assert cli_main(["main", "--replay", "--define", "X=1", "--out", str(tmp_path / "out")]) == 2
    assert "builds nothing" in capsys.readouterr().err


def test_kernel_id_joins_the_file_and_the_folder_it_became():
    one = {ks.kernel_id(p) for p in ("kernels/fa3_hopper.cu", "kernels/fa3_hopper", "kernels/fa3_hopper/",
                                     "./kernels/fa3_hopper/fa3_hopper.cu")}
    assert one == {"kernels/fa3_hopper"}
    assert ks.kernel_id("kernels/naive_fwd.cu") != ks.kernel_id("kernels/fa3_hopper.cu")
    assert ks.kernel_id("kernels/ab/fa3_hopper.cu") != ks.kernel_id("kernels/fa3_hopper")
    assert ks.kernel_id(None) == ""


def test_constraints_read_the_folder_and_its_headers(kdir):
    from kernelseek.constraints import check_source
    assert check_source(kdir / "twofile").ok
    (kdir / "twofile" / "scale.cuh").write_text('#include <cublas_v2.h>\n#define TWOFILE_SCALE 2.0f\n')
    res = check_source(kdir / "twofile")
    assert not res.ok and "scale.cuh:1: #include of cublas_v2.h" in res.reasons[0]
    assert "no_entry/no_entry.cu" in check_source(FIX / "no_entry").reasons[0]


def test_gpu_round_defab_runs_the_variant_off_on_on_off(tmp_path):
    """tools/gpu_round.sh defab, with a python3 on PATH that logs its arguments instead of evaluating:
    four benchsel evaluations of the kernel, the build variant passed as --define in the middle two,
    and no KSEEK_FA3_* switch left in the environment of any A/B phase of the tools."""
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "$*" >> "$FAKE_LOG"\necho "correct 1/1  geomean speedup 1.000x"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "FAKE_LOG": str(tmp_path / "calls.txt"), "OUT": str(tmp_path / "out"),
           "HOME": str(tmp_path), "KERNEL": "kernels/fa3_hopper", "DEFAB": "KSEEK_FA3_BN=128 KSEEK_FA3_X=on",
           "SCEN": "16"}
    r = subprocess.run(["bash", "tools/gpu_round.sh", "defab"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    calls = [ln for ln in (tmp_path / "calls.txt").read_text().splitlines() if " eval " in f" {ln} "]
    base = ("-m kernelseek eval kernels/fa3_hopper{} --grid bench26 --baseline best --no-progress "
            "--runs-dir runs/bench --scenarios 16")
    on = base.format(" --define KSEEK_FA3_BN=128 --define KSEEK_FA3_X=on")
    assert calls == [base.format(""), on, on, base.format("")]
    assert r.stdout.count("correct 1/1") == 4
    missing = subprocess.run(["bash", "tools/gpu_round.sh", "defab"], cwd=REPO, env={**env, "DEFAB": ""},
                             capture_output=True, text=True, timeout=60)
    assert "DEFAB=NAME=VALUE" in missing.stderr
    for sh in ("gpu_round.sh", "h200.sh"):
        code = [ln for ln in (REPO / "tools" / sh).read_text().splitlines() if not ln.lstrip().startswith("#")]
        # no KSEEK_FA3_* switch read from the environment: only defines (--define, DEFINES=, or the
        # probes' nvcc -DKSEEK_FA3_... flags)
        env_use = [ln for ln in code if "KSEEK_FA3_" in ln and "DEFINES=" not in ln
                   and ln.count("KSEEK_FA3_") != ln.count("-DKSEEK_FA3_")]
        assert env_use == [], sh


# ---- an evaluation of a folder variant (through the stand-in worker: no GPU needed) ------------------
STANDIN = [sys.executable, str(REPO / "tests" / "fixtures" / "worker" / "standin_worker.py")]
GRID = ("grid: standin\ndefaults: {dtype: bf16, batch: 1, seqlen_q: 128, seqlen_k: 128, heads_q: 4, heads_kv: 2, "
        "head_dim: 64}\nscenarios:\n- {name: ok_one}\n")


def test_eval_of_a_folder_variant_records_its_defines(kdir, tmp_path, monkeypatch, capsys):
    from kernelseek import evaluate as E
    from kernelseek.mainjob import describe
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "g.yaml").write_text(GRID)
    folder = kdir / "twofile"
    run, rows, meta = E.evaluate(str(folder), str(tmp_path / "g.yaml"), baseline="cudnn", runs_dir=str(tmp_path / "runs"),
                                 progress=False, worker_cmd=STANDIN, defines={"TWOFILE_TILE": 128})
    assert [r.status for r in rows] == ["passed"] and run.name.endswith("-twofile")
    assert meta["build_defines"] == {"TWOFILE_TILE": "128"} and meta["build"]["ok"]
    assert "-DTWOFILE_TILE=128" in meta["build"]["flags"]
    assert meta["kernel"] == folder.as_posix() and meta["kernel_sha256"] == ks.kernel_hash(folder)
    ptxas = json.loads((run / "build" / "ptxas.json").read_text())
    assert [k["kernel"] for k in ptxas] == ["_Z14twofile_kernelILi128EEvPf"]
    assert json.loads((run / "meta.json").read_text())["build_defines"] == {"TWOFILE_TILE": "128"}
    assert "build variant: TWOFILE_TILE=128" in describe(run).splitlines()[1]
    assert cli_main(["show", str(run)]) == 0
    assert "build variant: TWOFILE_TILE=128" in capsys.readouterr().out
    _, _, plain = E.evaluate(str(folder), str(tmp_path / "g.yaml"), baseline="cudnn", runs_dir=str(tmp_path / "runs"),
                             progress=False, worker_cmd=STANDIN)
    assert plain["build_defines"] == {} and plain["kernel_sha256"] == meta["kernel_sha256"]
    assert "build variant" not in describe(tmp_path / "runs" / sorted(p.name for p in (tmp_path / "runs").iterdir())[-1])


def test_a_define_changes_what_the_built_kernel_answers(tmp_path):
    """The GPU test's wrapper (tests/gpu/test_variants_gpu.py) without a GPU: naive_fwd.cu behind a
    switch, built plain and with -DNV_REFUSE=1; all-zero parameters get INVALID from the plain build
    (naive_fwd validates them on the host) and UNSUPPORTED from the variant."""
    from kernelseek import abi
    spec = (REPO / "tests" / "gpu" / "test_variants_gpu.py").read_text()
    wrap = spec.split('WRAP = """', 1)[1].split('"""', 1)[0]
    ks.copy_kernel(kb.REPO_KERNELS / "naive_fwd.cu", tmp_path)
    (tmp_path / "nv").mkdir()
    (tmp_path / "nv" / "nv.cu").write_text(wrap)
    plain, var = (kb.build(tmp_path / "nv", cache_dir=tmp_path / "cache", defines=d) for d in ({}, {"NV_REFUSE": 1}))
    assert plain.ok and var.ok, (plain.log + var.log)[-2000:]
    try:
        libs = abi.load(plain.so_path), abi.load(var.so_path)
    except OSError as e:
        pytest.skip(f"the CUDA runtime library cannot be loaded here: {e}")
    p = abi.KseekParams()
    p.abi_version = abi.ABI_VERSION
    assert [lib.fwd(p, 0) for lib in libs] == [2, 1]      # KSEEK_ERR_INVALID, KSEEK_ERR_UNSUPPORTED
