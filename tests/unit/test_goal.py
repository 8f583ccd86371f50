"""The goal verdict: every scenario judged, overrides by scenario and group, stale results never
meet a goal, and `kernelseek goal` exits 0 only when met."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek.goal import (Goal, GoalError, find_results, goal_from_dict, judge, judge_run,
                             judge_runs, load_goal, median_rows, staleness)
from kernelseek.results import Row, load as load_results

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures" / "runs"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def goal_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "kernelseek", "goal", *map(str, args)], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=60)


def test_default_goal_file_is_parity_everywhere():
    g = load_goal()
    assert (g.geomean, g.min_speedup, g.max_blocks) == (1.0, 1.0, 8)
    assert g.source.endswith("goals/default.yaml")


def test_goal_validation_names_the_field():
    with pytest.raises(GoalError, match="unknown field 'geomaen'"):
        goal_from_dict({"geomaen": 1.0}, "g.yaml")
    with pytest.raises(GoalError, match="'min_speedup' must be a number"):
        goal_from_dict({"min_speedup": "fast"})
    with pytest.raises(GoalError, match=r"by_group\.decode"):
        goal_from_dict({"by_group": {"decode": -1}})
    with pytest.raises(GoalError, match="max_blocks"):
        goal_from_dict({"max_blocks": 2.5})


def test_overrides_scenario_beats_group_first_group_wins():
    g = goal_from_dict({"min_speedup": 1.0, "by_group": {"dtype=fp8": 0.7, "decode": 0.8, "causal": 0.9},
                        "by_scenario": {"dense_causal": 1.2, 3: 0.5}})
    mk = lambda name, row, **f: Row(scenario=name, row=row, features=f)  # noqa: E731
    assert g.minimum(mk("dense_causal", 1, causal=True)) == (1.2, "scenario dense_causal")
    assert g.minimum(mk("x", 3, dtype="fp8")) == (0.5, "scenario x")             # by bench row number
    assert g.minimum(mk("y", 4, dtype="fp8", kind="decode")) == (0.7, "group dtype=fp8")
    assert g.minimum(mk("z", 5, dtype="bf16", kind="decode")) == (0.8, "group decode")
    assert g.minimum(mk("w", 6, causal=True, kind="prefill")) == (0.9, "group causal")   # a true flag
    assert g.minimum(mk("v", 7, causal=False, kind="prefill")) == (1.0, "default")


def test_met_unmet_stale_on_fixtures():
    v = judge_run(RUNS / "met")
    assert v.met and v.stale is None and len(v.rows) == 3 and v.shortfall() == "goal met"
    v = judge_run(RUNS / "unmet")
    assert not v.met and [r.scenario for r in v.short] == ["paged_decode", "fp8_gqa"]
    assert "0.620x < 1.00" in v.shortfall() and "failed" in v.shortfall()
    v = judge_run(RUNS / "stale")
    assert not v.met and "stale" in v.stale and all(r.ok for r in v.rows)   # rows fine, still not met


def test_every_scenario_listed_short():
    text = judge_run(RUNS / "unmet").format()
    lines = [ln for ln in text.splitlines() if ln.startswith("  ok") or ln.startswith("  FAIL")]
    assert len(lines) == 3 and all(len(ln) < 120 for ln in lines)
    assert "1 of 3 scenarios meet their minimum" in text


def test_geomean_alone_is_not_enough():
    rows, meta = load_results(RUNS / "met")
    g = Goal(geomean=1.0, min_speedup=1.1)              # geomean 1.155 but paged_decode 1.05 < 1.1
    v = judge(rows, meta, g, search=[RUNS])
    assert not v.met and [r.scenario for r in v.short] == ["paged_decode"]
    v = judge(rows, meta, Goal(geomean=1.2, min_speedup=1.0), search=[RUNS])
    assert not v.met and not v.short and "geomean 1.155x < target 1.20x" in v.shortfall()


def test_na_and_empty_rows_never_meet():
    rows, meta = load_results(RUNS / "met")
    rows[0].speedup, rows[0].baseline_status, rows[0].baseline_reason = None, "n/a", "no baseline for fp8"
    v = judge(rows, meta, Goal(min_speedup=0.0, geomean=0.0), search=[RUNS])
    assert not v.met and "n/a" in v.short[0].why
    assert not judge([], meta, Goal(), search=[RUNS]).met


def test_staleness_rules(tmp_path):
    _, meta = load_results(RUNS / "met")
    assert staleness(meta, search=[RUNS]) is None
    assert "cannot be tied" in staleness({"kernel": "kernel.cu"}, search=[RUNS])
    assert "not found" in staleness(meta, search=[tmp_path])
    k = tmp_path / "k.cu"
    k.write_text("// edited\n")
    assert "changed since" in staleness(meta, kernel=k)
    shutil.copy(RUNS / "kernel.cu", k)
    assert staleness(meta, kernel=k) is None


def test_find_results_campaign_uses_latest_in_its_ledger(tmp_path):
    assert find_results(RUNS / "campaign") == RUNS / "campaign" / "evals" / "2" / "results.json"
    camp = tmp_path / "camp"
    shutil.copytree(RUNS / "campaign", camp)
    (camp / "evals" / "10").mkdir()                            # an evaluation still running
    shutil.copytree(RUNS / "met", camp / "evals" / "9")        # appeared in the folder: no ledger entry
    assert find_results(camp) == camp / "evals" / "2" / "results.json"
    shutil.copytree(RUNS / "campaign" / "evals", tmp_path / "bare" / "evals")
    with pytest.raises(FileNotFoundError, match="no trace.jsonl, so no ledger"):
        find_results(tmp_path / "bare")                        # runs without a trace are not judged
    with pytest.raises(FileNotFoundError):
        find_results(tmp_path / "nothing")


def test_goal_cli_exit_codes(tmp_path):
    assert goal_cli(RUNS / "met").returncode == 0
    r = goal_cli(RUNS / "unmet")
    assert r.returncode == 1 and "NOT MET" in r.stdout and "FAIL" in r.stdout
    r = goal_cli(RUNS / "stale")
    assert r.returncode == 1 and "stale" in r.stdout
    r = goal_cli(RUNS / "unreadable")
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    assert goal_cli(tmp_path / "missing").returncode == 2
    assert goal_cli(RUNS / "campaign").returncode == 0


def test_goal_cli_goal_and_kernel_options(tmp_path):
    gf = tmp_path / "goal.yaml"
    gf.write_text("geomean: 0.8\nmin_speedup: 1.0\nby_group: {decode: 0.6}\n")
    r = goal_cli(RUNS / "unmet", "--goal", gf)
    assert r.returncode == 1                                    # fp8_gqa failed its check
    assert "0.620x >= 0.60 (group decode)" in r.stdout
    k = tmp_path / "kernel.cu"
    k.write_text("// a newer kernel\n")
    r = goal_cli(RUNS / "met", "--kernel", k)
    assert r.returncode == 1 and "changed since" in r.stdout
    gf.write_text("geomean: [1]\n")
    assert goal_cli(RUNS / "met", "--goal", gf).returncode == 2


def test_median_of_runs_judges_each_scenario_on_its_median():
    rows, meta = load_results(RUNS / "met")                 # speedups 1.12, 1.05, 1.31
    low = [Row(**{**r.__dict__, "speedup": r.speedup - 0.2}) for r in rows]   # 0.92, 0.85, 1.11
    med = median_rows([(rows, meta, "run1"), (low, meta, "run2")])
    assert [round(r.speedup, 3) for r in med] == [1.02, 0.95, 1.21]
    v = judge(med, meta, load_goal(ROOT / "goals" / "milestone_b.yaml"), search=[RUNS])
    assert v.met and v.target == 1.0                        # geomean 1.054, no row below 0.85
    v = judge(med, meta, load_goal(ROOT / "goals" / "milestone_stretch.yaml"), search=[RUNS])
    assert not v.met and not v.short and "geomean 1.054x < target 1.10x" in v.shortfall()
    v = judge(med, meta, Goal(geomean=1.0, min_speedup=0.96), search=[RUNS])
    assert not v.met and [r.scenario for r in v.short] == ["paged_decode"]   # 0.95 < 0.96
    # one failed run fails the scenario, naming the run
    bad = [Row(**{**r.__dict__}) for r in rows]
    bad[2].status, bad[2].reason = "failed", "max error 0.5 > bound 0.01"
    med = median_rows([(rows, meta, "run1"), (bad, meta, "run2")])
    assert med[2].status == "failed" and "not passed in run2" in med[2].reason
    assert not judge(med, meta, Goal(geomean=0.0, min_speedup=0.0), search=[RUNS]).met


def test_median_of_runs_refuses_mixed_kernels_or_scenarios():
    rows, meta = load_results(RUNS / "met")
    other, ometa = load_results(RUNS / "stale")
    with pytest.raises(ValueError, match="run2: kernel_sha256 .* differs from run1"):
        median_rows([(rows, meta, "run1"), (other, ometa, "run2")])
    with pytest.raises(ValueError, match="run2: its scenarios differ"):
        median_rows([(rows, meta, "run1"), (rows[:2], meta, "run2")])


def test_goal_cli_judges_the_median_of_several_runs():
    r = goal_cli(RUNS / "met", RUNS / "met", "--goal", ROOT / "goals" / "milestone_a.yaml")
    assert r.returncode == 0 and "median of 2 runs: met, met" in r.stdout
    r = goal_cli(RUNS / "met", RUNS / "unmet", RUNS / "met")   # fp8_gqa failed in one of three
    assert r.returncode == 1 and "not passed in" in r.stdout and "unmet" in r.stdout
    r = goal_cli(RUNS / "met", RUNS / "stale")
    assert r.returncode == 2 and "differs from" in r.stderr


def test_cli_stops_quietly_when_its_reader_closes_the_pipe():
    """`kernelseek goal ... | head -3` must not end in a BrokenPipeError traceback."""
    p = subprocess.Popen([sys.executable, "-m", "kernelseek", "goal", RUNS / "met", RUNS / "met"],
                         cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # no reader: the first print meets a closed pipe
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_broken_pipe_that_is_not_stdout_is_not_swallowed(monkeypatch):
    """Only a closed stdout ends quietly: a BrokenPipeError from elsewhere (a worker's pipe) propagates."""
    import kernelseek.commands.goal as goal_verb
    from kernelseek.cli import main

    def broken(args):
        raise BrokenPipeError("a worker's pipe")
    monkeypatch.setattr(goal_verb, "run", broken)
    with pytest.raises(BrokenPipeError, match="worker"):
        main(["goal", str(RUNS / "met")])
