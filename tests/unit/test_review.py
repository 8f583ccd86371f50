"""A flagged row is never met silently: the goal, the summary and the Stop hook count it as not met
until a review covers it (kernelseek/review.py), and the flag's question is asked once per change.

Runs are the committed fixtures (tests/fixtures/runs/met: three passed rows at 1.05-1.31x) with one
row flagged by rewriting its results.json; reviews are written by the real `kernelseek review`."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import goal as G
from kernelseek import results as R
from kernelseek import review as RV
from kernelseek.agent.arms import Bank
from kernelseek.triggers import Evaluation, History, suspicious_gain

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures" / "runs"


def flagged_project(tmp_path, speedup=3.18, scenario="fp8_gqa") -> Path:
    """<proj>/kernel.cu and <proj>/run (the 'met' fixture) with `scenario` flagged at `speedup`."""
    p = tmp_path / "proj"
    p.mkdir()
    shutil.copy(RUNS / "kernel.cu", p / "kernel.cu")
    shutil.copytree(RUNS / "met", p / "run")
    set_flag(p / "run", scenario, speedup)
    return p


def set_flag(run: Path, scenario: str, speedup: float) -> None:
    doc = json.loads((run / "results.json").read_text())
    for r in doc["rows"]:
        if r["scenario"] == scenario:
            r.update(speedup=speedup, suspicious=True, suspicious_reason=f"speedup {speedup:.2f}x above 1.6x")
    (run / "results.json").write_text(json.dumps(doc))


def cli(*args, cwd):
    r = subprocess.run([sys.executable, "-m", "kernelseek", *args], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    return r.returncode, r.stdout + r.stderr


def test_a_flagged_row_is_not_met_until_reviewed_and_the_review_is_named(tmp_path):
    p = flagged_project(tmp_path)
    v = G.judge_run(p / "run", G.Goal(), kernel=p / "kernel.cu")
    assert not v.met
    bad = {r.scenario: r for r in v.rows if not r.ok}
    assert list(bad) == ["fp8_gqa"]
    line = bad["fp8_gqa"].line()
    assert line.startswith("  FAIL") and "3.180x >= 1.00" in line and "FLAGGED, not met until reviewed" in line
    assert "1 of 3 scenarios short" in v.shortfall()

    code, out = cli("review", "run", "--scenario", "fp8_gqa", "--note", "FA3 has no fp8 GQA path: checked", cwd=p)
    assert code == 0 and "covers up to 3.498x" in out
    assert (p / "reviews.jsonl").is_file()                      # beside the runs, outside the run
    v = G.judge_run(p / "run", G.Goal(), kernel=p / "kernel.cu")
    assert v.met
    line = next(r for r in v.rows if r.scenario == "fp8_gqa").line()
    assert line.startswith("  ok") and "flag reviewed" in line and "FA3 has no fp8 GQA path" in line


def test_a_review_stops_covering_when_the_row_or_the_kernel_changes(tmp_path):
    p = flagged_project(tmp_path)
    RV.add_review(p / "run", "fp8_gqa", "checked the SASS")
    set_flag(p / "run", "fp8_gqa", 3.18 * 1.09)                # within the band: still covered
    assert G.judge_run(p / "run", G.Goal(), kernel=p / "kernel.cu").met
    set_flag(p / "run", "fp8_gqa", 3.18 * 1.2)                 # a larger jump: a new question
    assert not G.judge_run(p / "run", G.Goal(), kernel=p / "kernel.cu").met
    set_flag(p / "run", "fp8_gqa", 2.0)                        # smaller: less surprising, covered
    assert G.judge_run(p / "run", G.Goal(), kernel=p / "kernel.cu").met
    rev = RV.load_reviews(p / "reviews.jsonl")[0]
    assert not rev.covers("another-kernel-sha", "fp8_gqa", 2.0)
    assert not rev.covers(rev.kernel_sha256, "dense_causal", 1.0)


def test_review_refuses_an_unflagged_row_an_empty_note_and_a_bad_file(tmp_path):
    p = flagged_project(tmp_path)
    with pytest.raises(ValueError, match="not flagged"):
        RV.add_review(p / "run", "dense_causal", "x")
    with pytest.raises(ValueError, match="needs a note"):
        RV.add_review(p / "run", "fp8_gqa", "  ")
    with pytest.raises(ValueError, match="no scenario 'nope'"):
        RV.add_review(p / "run", "nope", "x")
    (p / "reviews.jsonl").write_text('{"scenario": "fp8_gqa"}\n')
    with pytest.raises(ValueError, match="reviews.jsonl:1: not a review"):
        RV.load_reviews(p / "reviews.jsonl")
    code, out = cli("review", "run", "--list", cwd=p)
    assert code == 2 and "not a review" in out


def test_summaries_do_not_count_a_flagged_row_at_parity(tmp_path):
    p = flagged_project(tmp_path)
    rows, _ = R.load(p / "run")
    s = R.summarize(rows)
    assert s["timed"] == 3 and s["at_parity"] == 2 and s["suspicious"] == 1
    table = R.format_table(rows)
    assert "FLAGGED (not met until reviewed)" in table and "flagged 1 (not met until reviewed)" in table


def test_a_row_flagged_in_either_of_two_runs_is_flagged_in_their_median(tmp_path):
    p = flagged_project(tmp_path)
    shutil.copytree(RUNS / "met", p / "run2")
    v = G.judge_runs([p / "run2", p / "run"], G.Goal(), kernel=p / "kernel.cu")
    assert not v.met and [r.scenario for r in v.rows if not r.ok] == ["fp8_gqa"]


def test_the_flag_question_fires_once_per_change(tmp_path):
    p = flagged_project(tmp_path)
    ev = Evaluation.from_run(p / "run")
    assert ev.suspicious == ["fp8_gqa"] and ev.kernel
    m1 = suspicious_gain(History([ev]))
    sig = m1.evidence["signature"]
    assert sig and "fp8_gqa" in sig
    bank = Bank.__new__(Bank)
    assert bank.key(m1, History([ev])) == f"suspicious_gain:{sig}"
    # a second evaluation, same kernel and speedup: the same key, so the arm does not ask again
    ev2 = Evaluation.from_run(p / "run")
    assert bank.key(suspicious_gain(History([ev, ev2])), History([ev, ev2])) == bank.key(m1, History([ev]))
    set_flag(p / "run", "fp8_gqa", 5.0)                        # the speedup moved: a new question
    ev3 = Evaluation.from_run(p / "run")
    assert suspicious_gain(History([ev3])).evidence["signature"] != sig
    RV.add_review(p / "run", "fp8_gqa", "checked")             # reviewed: nothing left to ask
    assert Evaluation.from_run(p / "run").suspicious == []


def test_the_stop_hook_blocks_on_a_flag_and_asks_its_question_once(tmp_path):
    p = flagged_project(tmp_path)
    (p / ".kernelseek").mkdir()
    (p / ".kernelseek" / "campaign").write_text("run\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSEEK_")}
    env["PYTHONPATH"] = str(ROOT)

    def stop():
        pay = {"session_id": "s", "cwd": str(p), "stop_hook_active": False, "last_assistant_message": "done"}
        r = subprocess.run([sys.executable, "-m", "kernelseek", "hook", "stop"], input=json.dumps(pay), cwd=p,
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout) if r.stdout.strip() else None

    out = stop()
    assert out["decision"] == "block" and "FLAGGED, not met until reviewed" in out["reason"]
    st = json.loads((p / ".kernelseek" / "stop_hook.json").read_text())
    sig = st["flag_signature"]
    from kernelseek import bank
    first = {e.id: e for e in bank.load()}[st["asked"][-1]]
    assert "suspicious_gain" in first.moments
    out = stop()                                               # nothing changed: blocked, other question
    st = json.loads((p / ".kernelseek" / "stop_hook.json").read_text())
    assert out["decision"] == "block" and st["flag_signature"] == sig
    second = {e.id: e for e in bank.load()}[st["asked"][-1]]
    assert "suspicious_gain" not in second.moments or second.id != first.id
    assert "limit_claim" in second.moments
    RV.add_review(p / "run", "fp8_gqa", "checked")
    assert stop() is None                                      # reviewed: the goal is met
