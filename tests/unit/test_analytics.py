"""Analytics on a hand-built trace whose every number is known (tests/fixtures/traces/make_fixture.py)."""
from pathlib import Path

import pytest

from kernelseek import analytics as A
from kernelseek import traces

EV = traces.read(Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "known_counts.jsonl")


def test_messages_by_kind():
    df = A.messages_by_kind(EV).set_index("kind")
    assert df["messages"].to_dict() == {"directive": 1, "question": 2, "approval": 1, "correction": 2, "goal": 1,
                                        "total": 7}
    assert df.loc["total", "interrogative"] == 3 and df.loc["correction", "interrogative"] == 1


def test_questions_and_tools():
    q = A.questions_by_category(EV).set_index("category")["questions"].to_dict()
    assert q == {"gap triage": 1, "challenge a limit": 1, "measurement check": 1}
    t = A.tool_use_by_kind(EV).set_index("kind")
    assert t["calls"].to_dict() == {"build": 2, "benchmark": 1, "profiler": 1, "sass/ptx": 1, "docs": 0,
                                    "subagent": 1, "read": 2, "edit": 3, "other": 0, "total": 11}
    assert (t.loc["total", "parent"], t.loc["total", "subagents"]) == (10, 1)
    assert A.calls_per_message(EV) == pytest.approx(11 / 7)


def test_reread_and_recurrence_shares():
    assert A.reread_share(EV) == {"own_source_chars": 8200, "tool_result_chars": 10000, "share": 0.82}
    assert A.recurrence_share(EV) == {"added_lines": 6, "recurring_lines": 1, "share": pytest.approx(1 / 6)}


def test_time_to_best_and_plateaus():
    assert A.time_to_best(EV) == {"best_geomean": 0.9, "eval": 4, "step": 9, "hours": pytest.approx(5.0)}
    p = A.plateaus(EV)
    assert p[["from_eval", "evaluations", "steps", "ended"]].values.tolist() == [[1, 2, 4, True], [4, 1, 1, False]]
    assert p["hours"].tolist() == pytest.approx([3.0, 2.0])
    assert A.plateaus(EV, noise=0.6)["evaluations"].tolist() == [3, 1]   # only 0.90 beats 0.40 by 60%


@pytest.mark.parametrize("text,kind,asks", [
    ("What configs are bringing down the geomean?", "question", True),
    ("Why do you think the goal was achieved? We are still well below parity.", "correction", True),
    ("Use a persistent kernel for decode.", "directive", False),
    ("OK, go ahead.", "approval", False),
    ("The target is 1.1x on every row.", "goal", False),
    ("Don't touch the reference.", "correction", False),
    ("Is this ceiling a property of the hardware, or of our design?", "question", True),
])
def test_message_classifier(text, kind, asks):
    assert A.classify_message(text) == kind and A.interrogative(text) == asks


def test_question_categories_and_tool_kinds():
    assert A.classify_question("Do our scenarios cover the shapes and features the operator is called with?") == \
        "scenario coverage"
    assert A.classify_question("Where does the time go outside the kernel?") == "bound differencing"
    assert A.tool_kind("Bash", {"command": "ncu --section SpeedOfLight python -m kernelseek eval k.cu"}) == "profiler"
    assert A.tool_kind("shell", {"command": "kernelseek eval k.cu --grid bench26"}) == "benchmark"
    assert A.tool_kind("Bash", {"command": "nvdisasm -c k.cubin | grep HGMMA"}) == "sass/ptx"
    assert A.tool_kind("WebFetch", {"url": "https://docs.nvidia.com/cuda/parallel-thread-execution/"}) == "docs"
    assert A.tool_kind("Task", {}) == "subagent"


def test_report_text():
    r = A.report([EV], names=["known"])
    assert "== known" in r and "0.82" in r


def test_only_versions_that_passed_count(tmp_path):
    """The fixture has a version at 1.30x that failed the check on one row: it is the fastest
    evaluation in the trace, and no headline may count it."""
    failing = [e for e in EV if e["type"] == "evaluation" and not e["summary"]["all_correct"]]
    assert [e["geomean"] for e in failing] == [1.30]
    assert A.summary(EV)["best_geomean"] == 0.9
    from kernelseek import campaign
    (tmp_path / "trace.jsonl").write_text((Path(__file__).resolve().parents[1] / "fixtures" / "traces" /
                                           "known_counts.jsonl").read_text())
    assert campaign.outcome(tmp_path)["best_geomean"] == 0.9
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "kernelseek", "trace", "stats", str(tmp_path / "trace.jsonl")],
                       capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[:2]
    cols, vals = head[0].split(), head[1].split()
    assert vals[cols.index("best_geomean")] == "0.9"
