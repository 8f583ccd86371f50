"""The ledger: a campaign's readers judge only the evaluations its loop recorded in the trace, with the
sha256 of each results.json, as store.Campaign lists them. A results file that appeared in the folder
is ignored; one changed after the loop wrote it is refused. tests/fixtures/runs/campaign carries a
ledger for evals/0..2."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import hooks, ledger, store, triage
from kernelseek.agent.arms import full_evals
from kernelseek.agent.config import Config, Paths
from kernelseek.goal import find_results
from kernelseek.triggers import History

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = FIX / "runs"
REPO = FIX.parent.parent


@pytest.fixture
def camp(tmp_path) -> Path:
    c = tmp_path / "camp"
    shutil.copytree(RUNS / "campaign", c)
    return c


def drop_entry(c: Path, n: int) -> None:
    lines = [ln for ln in (c / "trace.jsonl").read_text().splitlines() if json.loads(ln).get("n") != n]
    (c / "trace.jsonl").write_text("\n".join(lines) + "\n")


def check(c: Path) -> ledger.Check:
    return store.Campaign(c).ledger()


def stop(c: Path, tmp_path: Path):
    return hooks.stop({"cwd": str(tmp_path), "session_id": "s"}, env={"KERNELSEEK_CAMPAIGN": str(c)})


def test_the_fixture_ledger_verifies():
    c = check(RUNS / "campaign")
    assert [d.name for d in c.verified] == ["0", "1", "2"] and c.problems == [] and c.forged == []


def test_a_results_file_that_appeared_is_not_judged(camp, tmp_path):
    drop_entry(camp, 2)                       # evals/2 (the one meeting the goal) now has no ledger entry
    assert find_results(camp) == camp / "evals" / "1" / "results.json"
    probs = check(camp).problems
    assert probs == ["evals/2/results.json: no ledger entry in trace.jsonl (the loop did not run this "
                     "evaluation), so it is not judged"]
    out, _ = stop(camp, tmp_path)             # the Stop hook judges evals/1 (0.87x) and blocks
    assert out["decision"] == "block" and "evals/1" in out["reason"] and "0.87" in out["reason"]
    assert [round(e.geomean, 2) for e in History.from_campaign(camp).evaluations] == [0.42, 0.87]
    assert [d.name for d in triage.campaign_evals(camp)] == ["0", "1"]
    assert [d.name for d in full_evals(Paths(camp), Config(kernel="kernel.cu"))] == ["0", "1"]


def test_a_results_file_changed_after_the_loop_wrote_it_is_refused(camp, tmp_path):
    res = camp / "evals" / "1" / "results.json"
    doc = json.loads(res.read_text())
    for r in doc["rows"]:
        r["speedup"] = 5.0                    # forge a better evaluation in place
    res.write_text(json.dumps(doc))
    with pytest.raises(ledger.ForgedResults, match=r"evals/1/results.json: its sha256 \w+ does not match"):
        find_results(camp)
    out, _ = stop(camp, tmp_path)
    assert out["decision"] == "block" and "does not match" in out["reason"]
    assert [round(e.geomean, 2) for e in History.from_campaign(camp).evaluations] == [0.42, 1.15]
    r = subprocess.run([sys.executable, "-m", "kernelseek", "goal", str(camp)], capture_output=True, text=True,
                       cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "changed after the loop wrote it" in r.stderr


def test_ledger_entries_that_point_outside_or_at_nothing(camp):
    with open(camp / "trace.jsonl", "a") as f:
        f.write(json.dumps({"type": "evaluation", "n": 7, "dir": "../../etc", "results_sha256": "0" * 64}) + "\n")
        f.write(json.dumps({"type": "evaluation", "n": 8, "dir": "evals/8", "results_sha256": "0" * 64}) + "\n")
    c = check(camp)
    assert [d.name for d in c.verified] == ["0", "1", "2"]
    assert any("outside the campaign" in p for p in c.problems)
    assert any("evals/8/results.json: recorded in the ledger" in p and "missing" in p for p in c.problems)
    assert "3 verified evaluation(s)" in ledger.dump(c) and "NOT JUDGED" in ledger.dump(c)


def test_a_folder_without_a_trace_has_no_ledger(tmp_path):
    shutil.copytree(RUNS / "campaign" / "evals", tmp_path / "evals")
    assert store.Campaign(tmp_path).eval_dirs() == []
    with pytest.raises(FileNotFoundError, match="no trace.jsonl, so no ledger"):
        find_results(tmp_path)
    assert History.from_campaign(tmp_path).evaluations == [] and triage.campaign_evals(tmp_path) == []


def test_the_next_evaluation_number_never_reuses_a_folder(camp):
    (camp / "evals" / "7").mkdir()                            # appeared (or a crashed evaluation)
    assert store.Campaign(camp).next_eval_number() == 8
