"""A campaign's workspace seeded from a kernel with local headers or from a kernel folder, the
versions it keeps of such a kernel, and restoring one; the copies build with the real nvcc."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelseek import build as kb
from kernelseek import kernel_source as ks
from kernelseek.agent import Config, create
from kernelseek.agent.sandbox import Sandbox
from kernelseek.agent.tools import Toolbox, restore, save_version, version_path
from kernelseek.agent.replay import Replay
from kernelseek.traces import TraceWriter

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "kernel_folders"
RUNS = REPO / "tests" / "fixtures" / "runs" / "campaign"


def _config(kernel: Path) -> Config:
    return Config(kernel=str(kernel), grid="fixture", baseline="fa3", evaluator=f"replay:{RUNS}")


def test_a_file_kernel_brings_its_headers_and_the_copy_builds(tmp_path):
    p = create(_config(FIX / "lone_with_header.cu"), tmp_path / "c")
    ws = p.workspace
    assert sorted(f.name for f in ws.iterdir()) == ["kseek.h", "lone_with_header.cu", "shared_tile.cuh"]
    assert (ws / "shared_tile.cuh").read_bytes() == (FIX / "shared_tile.cuh").read_bytes()
    assert ks.kernel_hash(ws / "lone_with_header.cu") == ks.kernel_hash(FIX / "lone_with_header.cu")
    r = kb.build(ws / "lone_with_header.cu", cache_dir=tmp_path / "cache")
    assert r.ok, r.log[-2000:]


def test_a_folder_kernel_is_copied_as_a_folder_with_its_parent_headers(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(FIX, src)
    (src / "twofile" / "NOTES.txt").write_text("a note that travels with the folder\n")
    (src / "unrelated.cuh").write_text("// not included by twofile: stays behind\n")
    cfg = _config(src / "twofile")
    assert cfg.kernel_name == "twofile"
    p = create(cfg, tmp_path / "c")
    ws = p.workspace
    assert sorted(f.name for f in (ws / "twofile").iterdir()) == ["NOTES.txt", "scale.cuh", "twofile.cu"]
    assert (ws / "shared_tile.cuh").is_file() and not (ws / "unrelated.cuh").exists()
    assert ks.kernel_hash(ws / "twofile") == ks.kernel_hash(src / "twofile")
    r = kb.build(ws / "twofile", cache_dir=tmp_path / "cache")
    assert r.ok, r.log[-2000:]


def test_a_kernel_reaching_outside_its_directory_is_refused_before_anything_is_made(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "k.cu").write_text('#include "../outside.cuh"\n')
    (tmp_path / "outside.cuh").write_text("// outside\n")
    with pytest.raises(ks.KernelError, match=r"k/k.cu: includes .*outside.cuh, outside"):
        create(_config(tmp_path / "k" / "k.cu"), tmp_path / "c")
    with pytest.raises(ks.KernelError, match="no_entry/no_entry.cu"):
        create(_config(FIX / "no_entry"), tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_versions_of_a_folder_kernel_are_kept_whole_and_restored(tmp_path):
    p = create(_config(FIX / "twofile"), tmp_path / "c")
    kernel = p.workspace / "twofile"
    first = save_version(p, kernel)
    kept = version_path(p, first, "twofile")
    assert kept == p.versions / first / "twofile" and (p.versions / first / "shared_tile.cuh").is_file()
    assert ks.kernel_hash(kept) == first
    (kernel / "scale.cuh").write_text("#pragma once\n#define TWOFILE_SCALE 5.0f\n")
    second = save_version(p, kernel)
    assert second != first and save_version(p, kernel) == second
    assert restore(p.root, first[:10]) == kernel
    assert "2.0f" in (kernel / "scale.cuh").read_text() and ks.kernel_hash(kernel) == first


def test_an_evaluation_of_a_folder_kernel_keeps_it_and_judges_it(tmp_path):
    """Toolbox.evaluate on a folder workspace kernel (the stand-in evaluator replays recorded rows):
    the version is kept as a folder, the run's meta hash is the folder's, and the goal judges it fresh."""
    p = create(_config(FIX / "twofile"), tmp_path / "c")
    cfg = _config(FIX / "twofile")
    tb = Toolbox(cfg, p, Sandbox(p.workspace, mode="none"), Replay([RUNS]))
    text, err = tb._evaluate()
    assert not err, text
    rec = tb.last_eval
    assert rec.sha == ks.kernel_hash(p.workspace / "twofile") == rec.meta["kernel_sha256"]
    assert f"kept as versions/{rec.sha}/twofile" in text
    assert "goal: not met: geomean 0.416x" in text and "stale" not in text
    TraceWriter(p.trace).write("evaluation", **rec.event(p.root))   # the loop's ledger entry (Loop.run_tool)
    (p.workspace / "twofile" / "scale.cuh").write_text("#pragma once\n#define TWOFILE_SCALE 9.0f\n")
    assert tb.verdict().shortfall().startswith(f"stale: {p.workspace / 'twofile'} changed since it was evaluated")


@pytest.mark.parametrize("kernel, files", [
    ("naive_fwd.cu", ["kseek.h", "naive_core.cuh", "naive_fwd.cu"]),
    ("fa3_hopper", ["fa3_hopper", "kseek.h", "naive_core.cuh"])])
def test_the_repositorys_kernels_seed_a_workspace_with_what_they_include(tmp_path, kernel, files):
    """naive_fwd.cu brings naive_core.cuh (the fallback it shares with fa3_hopper/); the folder
    fa3_hopper/ comes as a folder, with the headers it includes from kernels/ beside it, and
    nothing else of kernels/ (no other kernel to copy from)."""
    src = kb.REPO_KERNELS / kernel
    if not src.exists():
        pytest.skip(f"{src} is not in this checkout")
    p = create(_config(src), tmp_path / "c")
    assert sorted(f.name for f in p.workspace.iterdir()) == files
    assert ks.kernel_hash(p.workspace / kernel) == ks.kernel_hash(src)
    assert {f.relative_to(kb.REPO_KERNELS) for f in ks.closure(ks.entry_file(src))} == \
        {f.relative_to(p.workspace) for f in ks.closure(ks.entry_file(p.workspace / kernel))}
