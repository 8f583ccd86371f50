"""tools/ab_table.py: run directories with and without a --define grouped into A/B experiments, per
row the variant's time over the default's; real run directories written by kernelseek.results."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import results as R
from kernelseek.results import Row

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import ab_table  # noqa: E402


def _run(root, name, grid, filt, defines, times, status="passed", path="decode"):
    rows = [Row(scenario=s, status=status if s == "b" else "passed", time_ms=t, graph_ms=t * 0.9,
                features={"path": path}) for s, t in times.items()]
    R.save(root / name, rows, {"grid": grid, "scenarios_filter": filt, "build_defines": defines,
                               "kernel": "kernels/fa3_hopper"})


def test_pairs_each_define_with_the_default_runs_of_its_grid_and_rows(tmp_path, capsys):
    d = {"KSEEK_FA3_X": "1"}
    _run(tmp_path, "1", "production", "5-7", {}, {"a": 1.0, "b": 2.0}, path="naive")
    _run(tmp_path, "2", "production", "5-7", d, {"a": 0.5, "b": 1.0})
    _run(tmp_path, "3", "production", "5-7", d, {"a": 0.7, "b": 1.2}, status="failed")
    _run(tmp_path, "4", "production", "5-7", {}, {"a": 1.2, "b": 2.0}, path="naive")
    _run(tmp_path, "5", "bench26", "10-12", {}, {"a": 3.0})        # another experiment's default: not paired
    exps = ab_table.experiments(ab_table._runs(tmp_path))
    assert list(exps) == [("production", "5-7", "KSEEK_FA3_X=1")]
    rows, s = ab_table.table(exps[("production", "5-7", "KSEEK_FA3_X=1")])
    a, b = rows
    assert a["off_ms"] == pytest.approx(1.1) and a["on_ms"] == pytest.approx(0.6)    # medians of both runs
    assert a["ratio"] == pytest.approx(0.6 / 1.1) and a["graph_ratio"] == pytest.approx(0.6 / 1.1)
    assert b["on_correct"] == "1/2" and b["on_ms"] == pytest.approx(1.0)              # the failed run left out
    assert a["off_path"] == "naive" and a["on_path"] == "decode"
    assert s["runs_off"] == 2 and s["runs_on"] == 2 and s["all_correct_on"] is False
    assert s["geomean_ratio"] == pytest.approx(((0.6 / 1.1) * (1.0 / 2.0)) ** 0.5)
    assert ab_table.main([str(tmp_path), "--json", str(tmp_path / "ab.json")]) == 0
    out = capsys.readouterr().out
    assert "== KSEEK_FA3_X=1 on production rows 5-7: 2 runs off, 2 on" in out and "naive -> decode" in out
    assert (tmp_path / "ab.json").stat().st_size > 100


def test_nothing_to_compare_and_a_missing_root_are_errors(tmp_path):
    _run(tmp_path, "1", "production", "5-7", {}, {"a": 1.0})
    r = subprocess.run([sys.executable, str(REPO / "tools" / "ab_table.py"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no run built with a --define" in r.stderr
    r = subprocess.run([sys.executable, str(REPO / "tools" / "ab_table.py"), str(tmp_path / "nope")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "nope: not a directory" in r.stderr
