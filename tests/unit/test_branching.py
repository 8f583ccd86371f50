"""Forks and rollbacks of a real campaign (the loop against the fake Messages API on 127.0.0.1, the
replay evaluator): `kernelseek campaign restore --fork | --rollback` puts the version back, appends
a branch event, deletes nothing, and analytics counts what it recorded."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, tool, turn  # noqa: E402
from harness import KEY, events, make  # noqa: E402

from kernelseek import analytics  # noqa: E402
from kernelseek.cli import main as cli_main  # noqa: E402

V = ["// version %d\n__global__ void kseek_fixture_kernel_%d() {}\n" % (i, i) for i in range(3)]


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def campaign(tmp_path) -> Path:
    """Six model steps: write v0, evaluate (eval 0, made in step 2), write v1, evaluate (eval 1, step 4),
    write v2, evaluate (eval 2, step 6)."""
    script = []
    for v in V:
        script += [turn(tool("write", path="kernel.cu", content=v)), turn(tool("evaluate"))]
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, budget={"steps": 6})
        from kernelseek.agent import Loop
        Loop(root, log=lambda *a: None).run()
    assert [e["n"] for e in events(root, "evaluation")] == [0, 1, 2]
    return root


def test_fork_and_rollback_are_recorded_and_counted(tmp_path, capsys):
    root = campaign(tmp_path)
    kernel = root / "workspace" / "kernel.cu"
    before = (root / "trace.jsonl").read_text()
    versions = sorted(p.name for p in (root / "versions").iterdir())
    best = analytics.time_to_best(events(root))["eval"]

    assert cli_main(["campaign", "restore", str(root), "0", "--fork", "--by", "agent", "--reason", "try again"]) == 0
    assert "fork b1 from evaluation 0 (step 2 of 6; 0 steps discarded)" in capsys.readouterr().out
    assert kernel.read_text() == V[0]
    assert cli_main(["campaign", "restore", str(root), "1", "--rollback"]) == 0
    assert kernel.read_text() == V[1]
    assert cli_main(["campaign", "restore", str(root), str(best), "--fork"]) == 0

    after = (root / "trace.jsonl").read_text()
    assert after.startswith(before)                                  # append-only: the old trace is intact
    assert sorted(p.name for p in (root / "versions").iterdir()) == versions
    br = events(root, "branch")
    assert [(e["action"], e["from_eval"], e["by"], e["branch"]) for e in br] == [
        ("fork", 0, "agent", "b1"), ("rollback", 1, "human", "b2"), ("fork", best, "human", "b3")]
    assert br[0]["reason"] == "try again" and br[0]["restored"] == "workspace/kernel.cu"
    # eval 1 came of step 4 (its `evaluate` call); the line since the fork (at step 6) had no step of its own
    assert (br[1]["from_step"], br[1]["at_step"], br[1]["discarded_steps"]) == (4, 6, 0)
    counts = analytics.branches(events(root))
    assert (counts["forks"], counts["rollbacks"], counts["human_rollbacks"], counts["forks_from_best"]) == (2, 1, 1, 1)


def test_rollback_discards_the_steps_since_that_evaluation(tmp_path):
    root = campaign(tmp_path)
    assert cli_main(["campaign", "restore", str(root), "0", "--rollback"]) == 0
    (e,) = events(root, "branch")
    assert (e["from_step"], e["at_step"], e["discarded_steps"]) == (2, 6, 4)   # eval 0 came of step 2 of 6
    assert analytics.branches(events(root))["steps_discarded"] == 4


def test_bad_references_and_a_running_loop_are_refused(tmp_path, capsys):
    root = campaign(tmp_path)
    assert cli_main(["campaign", "restore", str(root), "9", "--fork"]) == 2
    assert "9: no evaluation in the trace" in capsys.readouterr().err
    from kernelseek.agent.lock import CampaignLock
    lock = CampaignLock(root).acquire()
    try:
        assert cli_main(["campaign", "restore", str(root), "0", "--rollback"]) == 2
        assert "already running" in capsys.readouterr().err
    finally:
        lock.release()
    assert events(root, "branch") == []
    assert cli_main(["campaign", "restore", str(root), "0", "--fork", "--rollback"]) == 2   # one or the other
