"""The README's main job on a machine without a GPU: replay of the committed H200 results."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import results as R
from kernelseek import store
from kernelseek.mainjob import committed_runs, replay_choice

REPO = Path(__file__).resolve().parents[2]


def test_committed_h200_runs_are_real_and_complete():
    runs = committed_runs(grid="bench26")
    assert len(runs) >= 2, "two bench26 runs (repeatability) are committed"
    for run in runs:
        rows, meta = R.load(run)
        assert meta["env"]["gpu"] == "NVIDIA H200"
        assert meta["env"]["driver"] and meta["git_rev"] and meta["kernel_sha256"]
        assert [r.row for r in rows] == list(range(1, 27))
        assert all(r.status == "passed" for r in rows)
        libs = meta["env"]["baselines"]
        # every row has a bar when a baseline that reads paged KV (FA4, FA3, FlashInfer) was staged
        pager = any(not str(libs.get(n, "unavailable")).startswith("unavailable") for n in ("fa4", "fa3", "flashinfer"))
        paged = [r for r in rows if r.features["paged"]]
        assert [r.row for r in paged] == [20, 21, 22, 23, 24]
        assert all(r.baseline and r.baseline_ms > 0 for r in rows if pager or not r.features["paged"])
        assert pager or all(r.baseline_status == "n/a" and "paged" in r.baseline_reason for r in paged)
        assert all(r.stand_in.get("time_ms", 0) > 0 for r in paged)      # labeled dense stand-in beside them


def test_partial_runs_are_labeled_and_left_out_of_the_replay():
    """A/B runs of a few rows (`--scenarios`) name their filter, hold exactly those rows, and are
    never taken for the whole-grid replay."""
    from kernelseek.scenarios import load_grid, select
    full = set(committed_runs(grid="bench26"))
    partial = [r for r in committed_runs(grid="bench26", partial=True) if r not in full]
    assert partial, "the committed A/B runs of a few bench26 rows"
    grid = load_grid("bench26")
    for run in partial:
        rows, meta = R.load(run)
        want = [s.row for s in select(grid, meta["scenarios_filter"])]
        assert [r.row for r in rows] == want and len(want) < 26
        assert all(r.status == "passed" for r in rows)


@pytest.mark.skipif(os.environ.get("KSEEK_FORCE_GPU_TESTS") == "1", reason="GPU present")
def test_main_job_replays_without_gpu(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, "-m", "kernelseek", "main", "--out", str(tmp_path)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "checking and timing need a GPU" in out
    last = replay_choice(committed_runs(grid="bench26"))
    rows, _ = R.load(last)
    s = R.summarize(rows)
    assert f"run {last.name}:" in out
    assert f"correct {s['passed']}/{s['scenarios']}" in out
    assert f"{s['geomean_speedup']:.3f}x" in out
    assert "r12_prefill_d128_s16k" in out
    assert "gap triage" in out and "bound differencing" in out
    assert (tmp_path / "speedup.png").stat().st_size > 10_000
    assert "versions of kernels/fa3_hopper" in out           # the kernel's history, v2 .. now
    assert (tmp_path / "history.png").stat().st_size > 10_000


def test_summary_geomean_worst_and_parity():
    rows = [R.Row(scenario=n, status="passed", speedup=s) for n, s in (("a", 2.0), ("b", 0.5), ("c", 1.0))]
    rows.append(R.Row(scenario="d", status="failed", reason="max error"))
    rows.append(R.Row(scenario="e", status="passed", speedup=None))
    s = R.summarize(rows)
    assert s["geomean_speedup"] == pytest.approx(1.0)
    assert s["worst"]["scenario"] == "b" and s["at_parity"] == 2
    assert s["failed"] == 1 and s["na"] == 1 and not s["all_correct"]
    text = R.format_table(rows)
    assert "max error" in text and "n/a" in text
    assert "columns: err/bound =" in text and "FLAGGED (not met until reviewed) =" not in text
    rows[0].suspicious, rows[0].suspicious_reason, rows[0].row = True, "speedup 2.00x above 1.6x", 3
    text = R.format_table(rows)
    line = next(x for x in text.splitlines() if x.split()[:2] == ["3", "a"])
    assert line.endswith("FLAGGED (not met until reviewed)")
    note = " ".join(text.split("FLAGGED (not met until reviewed) =")[1].split())
    assert "kernelseek review" in note and "row 3: speedup 2.00x above 1.6x" in note


def test_results_roundtrip_and_bad_file(tmp_path):
    run = R.new_run_dir(tmp_path, "x")
    assert R.new_run_dir(tmp_path, "x") != run          # never reuses a directory
    R.save(run, [R.Row(scenario="a", status="passed", speedup=1.5)], {"grid": "g"})
    rows, meta = R.load(run)
    assert rows[0].speedup == 1.5 and meta["grid"] == "g"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nope": 1}))
    with pytest.raises(ValueError, match="bad.json.*rows"):
        R.load(bad)


def test_replay_prefers_the_last_run_of_the_kernel_as_checked_out(tmp_path):
    """Two copies of a committed run: the newer one recorded another kernel hash (a kernel version
    that was measured and then reverted), so the replay takes the older one; with no match, the newest."""
    import hashlib
    import shutil
    src = committed_runs(grid="bench26")[-1]
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text("// the kernel as checked out\n")
    sha = hashlib.sha256((tmp_path / "kernels" / "k.cu").read_bytes()).hexdigest()
    runs = []
    for name, ksha in (("old", sha), ("new", "0" * 64)):
        d = tmp_path / "runs" / name
        shutil.copytree(src, d)
        res = store.read_results(d)          # (a committed run: results.json.gz)
        res["meta"].update(kernel="kernels/k.cu", kernel_sha256=ksha)
        (d / "results.json").write_text(json.dumps(res))
        runs.append(d)
    assert replay_choice(runs, repo=tmp_path) == runs[0]
    (tmp_path / "kernels" / "k.cu").write_text("// changed since\n")
    assert replay_choice(runs, repo=tmp_path) == runs[1]
    assert replay_choice([], repo=tmp_path) is None
    # an older run of ANOTHER kernel whose file is unchanged is never taken for the newest kernel's
    other = tmp_path / "runs" / "other"
    shutil.copytree(src, other)
    (tmp_path / "kernels" / "o.cu").write_text("// another kernel, unchanged\n")
    res = store.read_results(other)
    res["meta"].update(kernel="kernels/o.cu",
                       kernel_sha256=hashlib.sha256((tmp_path / "kernels" / "o.cu").read_bytes()).hexdigest())
    (other / "results.json").write_text(json.dumps(res))
    assert replay_choice([other] + runs, repo=tmp_path) == runs[1]


def test_replay_finds_the_folder_a_file_became_and_passes_over_variants(tmp_path):
    """Runs recorded kernels/k.cu; the checkout has the folder kernels/k/ (the split): the replay
    hashes the folder as evaluate does and takes the run of that hash, but never a define variant
    while a plain run of the kernel exists."""
    import shutil
    from kernelseek.kernel_source import kernel_hash
    src = committed_runs(grid="bench26")[-1]
    folder = tmp_path / "kernels" / "k"
    folder.mkdir(parents=True)
    (folder / "k.cu").write_text('#include "part.cuh"\n')
    (folder / "part.cuh").write_text("// a part\n")
    sha = kernel_hash(folder)
    runs = []
    for name, kernel, ksha, defines in (("plain", "kernels/k.cu", sha, {}), ("newer", "kernels/k", "0" * 64, {}),
                                        ("variant", "kernels/k", sha, {"K_TILE": "64"})):
        d = tmp_path / "runs" / name
        shutil.copytree(src, d)
        res = store.read_results(d)          # (a committed run: results.json.gz)
        res["meta"].update(kernel=kernel, kernel_sha256=ksha, build_defines=defines)
        (d / "results.json").write_text(json.dumps(res))
        runs.append(d)
    assert replay_choice(runs, repo=tmp_path) == runs[0]
    (folder / "part.cuh").write_text("// changed since\n")
    assert replay_choice(runs, repo=tmp_path) == runs[1]       # the newest plain run of the kernel


def test_replay_reports_repeatability_of_the_kernels_consecutive_runs(tmp_path, capsys):
    """Three consecutive committed v10 runs (one git revision) and one earlier v10 run (another
    revision): the replay shows the repeatability of the three, pair by pair, and draws it."""
    import shutil
    from kernelseek.mainjob import repeat_group, replay
    src = REPO / "data" / "runs"
    names = [f"h200-bench26-20261130-{t}-fa3_hopper-v10" for t in ("101205", "103933", "104252", "104338")]
    root = tmp_path / "runs"
    for n in names:
        shutil.copytree(src / n, root / n)
    runs = committed_runs(root, grid="bench26")
    assert [p.name for p in repeat_group(runs, root / names[-1])] == names[1:]
    assert [p.name for p in repeat_group(runs, root / names[0])] == names[:1]
    assert replay(tmp_path / "out", root=root) == 0
    out = capsys.readouterr().out
    assert "repeatability: 3 consecutive runs of this kernel" in out
    assert f"{names[1]} -> {names[2]}: 5 of 26 rows over 3%" in out
    assert f"{names[2]} -> {names[3]}: 2 of 26 rows over 3%" in out
    assert (tmp_path / "out" / "repeat.png").stat().st_size > 10_000
