"""The agent loop end to end: the real anthropic client against a fake Messages API on 127.0.0.1,
with a stand-in evaluator replaying recorded results (tests/fixtures/runs/campaign: 0.42x, 0.85x,
then every row at or above parity)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, last_user_text, load_script, text, tool, turn  # noqa: E402
from harness import KEY, KERNEL, dollars, events, make, trace_text  # noqa: E402

from kernelseek import inbox  # noqa: E402
from kernelseek.agent import CampaignCrash, Loop, MissingKey, Replay  # noqa: E402
from kernelseek.agent.tools import restore  # noqa: E402


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def quiet(*a, **k):
    pass


def test_tool_use_premature_end_of_turn_and_goal(tmp_path):
    with FakeAPI(load_script("reach_goal"), key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url)
        out = Loop(root, log=quiet).run()
    assert out.met and out.reason == "goal met"
    assert out.evaluations == 3 and out.spend.steps == 7
    checks = [e["met"] for e in events(root, "goal_check")]
    assert checks == [False, True]              # the early claim was rejected, the real finish accepted
    # the shortfall went back to the model as the next user message
    assert "The goal is not met" in last_user_text(api.requests[3]) and "0.416x" in last_user_text(api.requests[3])
    # the system prompt states the goal and the harness command, nothing about the operator
    system = api.requests[0]["system"][0]["text"]
    assert api.requests[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "kernelseek eval kernel.cu --grid fixture --baseline fa3" in system and "geometric-mean" in system
    for word in ("question", "human", "person", "operator", "arm", "bank", "inbox"):
        assert word not in system.lower()
    assert {t["name"] for t in api.requests[0]["tools"]} == {"shell", "read", "write", "edit", "evaluate"}
    # every version evaluated is kept and can be restored
    assert len(list((root / "versions").glob("*.cu"))) == 2
    ws_kernel = root / "workspace" / "kernel.cu"
    assert "2.0f" in ws_kernel.read_text()
    restore(root, "0")
    assert ws_kernel.read_text() == KERNEL.read_text()
    evs = events(root, "evaluation")
    assert [round(e["geomean"], 3) for e in evs] == [0.416, 0.871, 1.155]
    assert evs[0]["kernel_sha256"] != evs[1]["kernel_sha256"]
    usage = events(root, "usage")
    assert usage[-1]["total_cost_usd"] == pytest.approx(dollars(api)) and len(api.stats) == 7
    assert KEY not in trace_text(root)


def test_bank_question_at_start_and_plateau(tmp_path):
    runs = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "campaign" / "evals"
    script = [turn(tool("evaluate")) for _ in range(4)] + [turn(text("Still thinking."), stop="end_turn")]
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, arm="bank", sources=[runs / "0", runs / "1"], plateau_evals=2,
                    budget={"steps": 5})
        out = Loop(root, log=quiet).run()
    assert not out.met and out.reason.startswith("budget: 5 steps")
    qs = events(root, "question")
    # rows jumping from 0.41x to 0.95x are suspicious; then four evaluations without a gain: a plateau
    assert [q["moment"] for q in qs] == ["start", "suspicious_gain", "plateau"]
    assert all(q["source"] == "bank" and q["bank_id"] for q in qs)
    assert len({q["bank_id"] for q in qs}) == 3
    # each question reached the model as a user message at the next turn, after the tool result
    assert qs[0]["text"] in last_user_text(api.requests[0])
    assert qs[1]["text"] in last_user_text(api.requests[2]) and "evaluation 1" in last_user_text(api.requests[2])
    assert qs[2]["text"] in last_user_text(api.requests[4]) and "evaluation 3" in last_user_text(api.requests[4])
    assert not any(q["text"] in last_user_text(api.requests[i]) for q in qs for i in (1, 3))
    assert inbox.pending(root) == []
    assert [e["line"] for e in events(root, "inbox_consumed")] == [0, 1, 2]


def test_inbox_question_seen_at_next_turn(tmp_path):
    q = "Where does the time go outside the kernel?"
    replay = None

    def evaluator(*a, **k):          # a person asks while the agent waits on an evaluation
        inbox.ask(root, q, source="cli")
        return replay(*a, **k)
    script = [turn(tool("evaluate")), turn(text("Looking at the host side."), stop="end_turn")]
    with FakeAPI(script + [turn(text("ok"))], key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, arm="human", budget={"steps": 2})
        replay = Replay(str(Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "campaign"))
        Loop(root, evaluator=evaluator, log=quiet).run()
    assert q not in last_user_text(api.requests[0])
    assert q in last_user_text(api.requests[1])
    body = api.requests[1]["messages"][-1]["content"]
    assert body[0]["type"] == "tool_result" and body[-1]["type"] == "text" and body[-1]["text"] == q
    qe = events(root, "question")
    assert qe[0]["text"] == q and qe[0]["source"] == "cli"
    assert inbox.pending(root) == []


def test_bare_arm_leaves_the_inbox_alone(tmp_path):
    with FakeAPI([turn(text("Nothing to do."), stop="end_turn")], key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, arm="bare", budget={"steps": 1})
        with pytest.raises(inbox.NoQuestioner, match="bare arm"):       # `ask` refuses it up front
            inbox.ask(root, "Is this a real limit?")
        with open(root / "inbox.jsonl", "a") as f:                     # a line written behind its back
            f.write('{"time": "2026-01-01T00:00:00Z", "source": "cli", "text": "Is this a real limit?"}\n')
        Loop(root, log=quiet).run()
    assert "Is this a real limit?" not in last_user_text(api.requests[0])
    assert len(inbox.pending(root)) == 1


class Crash(BaseException):
    """A process dying mid-tool-call (nothing in the loop may catch it)."""


def test_crash_mid_tool_call_and_resume(tmp_path):
    calls = {"n": 0}
    runs = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "campaign"

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise Crash()
        return Replay(str(runs))(*a, **k)
    steps = load_script("reach_goal")
    steps = steps[:6] + [turn(tool("evaluate"))] + steps[6:]     # one evaluation is lost to the crash
    with FakeAPI(steps, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url)
        with pytest.raises(Crash):
            Loop(root, evaluator=dying, log=quiet).run()
        assert len(api.requests) == 5 and not events(root, "stop")
        out = Loop(root, log=quiet).run()           # `kernelseek campaign resume` does this
    assert out.met
    assert [e["type"] for e in events(root) if e["type"] in ("start", "resume")] == ["start", "resume"]
    interrupted = [e for e in events(root, "tool_result") if e["output"].startswith("interrupted")]
    assert len(interrupted) == 1 and interrupted[0]["name"] == "evaluate"
    assert "interrupted" in last_user_text(api.requests[5])
    # the conversation was rebuilt whole: the resumed request carries every earlier turn
    assert len(api.requests[5]["messages"]) == 11
    assert out.spend.steps == 8 and out.evaluations == 3


def test_api_failure_then_resume(tmp_path):
    steps = load_script("reach_goal")
    script = steps[:2] + [{"status": 500, "error": "overloaded"}] + steps[2:]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url)
        with pytest.raises(CampaignCrash, match="resume"):
            Loop(root, log=quiet).run()
        assert events(root, "error")[0]["where"] == "api"
        out = Loop(root, log=quiet).run()
    assert out.met and out.spend.steps == 7


def test_dollar_budget_stops_the_run(tmp_path):
    script = [turn(tool("shell", command="echo step"), usage={"input_tokens": 1000, "output_tokens": 200})] * 10
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, budget={"dollars": 0.5, "steps": 100})
        out = Loop(root, log=quiet).run()
        again = Loop(root, log=quiet).run()        # resuming without more budget calls nothing
    assert len(api.requests) == 3                  # $0.20 a step: 0.60 >= 0.50 after three
    assert not out.met and out.reason == "budget: $0.60 of $0.50"
    assert events(root, "stop")[0]["reason"] == out.reason and again.reason == out.reason
    # with more budget it goes on
    with FakeAPI(script, key=KEY, by_turn=True) as api2:
        import json
        cfg = json.loads((root / "config.json").read_text())
        cfg["base_url"] = api2.base_url
        (root / "config.json").write_text(json.dumps(cfg))
        out2 = Loop(root, budget={"dollars": 0.9, "steps": 100}, log=quiet).run()
    assert len(api2.requests) == 2 and out2.spend.dollars == pytest.approx(1.0)


def test_missing_key_is_a_clear_error(tmp_path, monkeypatch):
    root = make(tmp_path, "http://127.0.0.1:9")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(MissingKey, match="ANTHROPIC_API_KEY is not set"):
        Loop(root, log=quiet)


def test_committed_runs_suspicious_gain_once_per_new_flag_then_plateau(tmp_path):
    """The committed H200 runs of fa3_hopper.cu (v3 to v5c): row 24 stays flagged by the harness in
    every one, row 23 is flagged in two consecutive runs. Each new flag is asked about once; the
    standing flag is not asked again, so the plateau gets its question."""
    data = Path(__file__).resolve().parents[2] / "data" / "runs"
    runs = [data / f"h200-bench26-20261130-{t}" for t in (
        "061458-fa3_hopper-v3", "061800-fa3_hopper-v3", "065809-fa3_hopper-v4section", "065921-fa3_hopper-v4default",
        "073243-fa3_hopper-v5", "073352-fa3_hopper-v5", "075315-fa3_hopper-v5b", "075423-fa3_hopper-v5b",
        "075831-fa3_hopper-v5c", "084207-fa3_hopper-v5c")]
    from kernelseek.triggers import Evaluation
    flagged = [set(Evaluation.from_run(r).suspicious) for r in runs]
    assert all("r24_decode_paged_b4_kv32k" in f for f in flagged)
    new = [i for i, f in enumerate(flagged) if f - (flagged[i - 1] if i else set())]
    assert new == [0, 4]
    script = [turn(tool("evaluate")) for _ in runs] + [turn(text("Still working."), stop="end_turn")] * 3
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, arm="bank", sources=runs, plateau_evals=3,
                    budget={"steps": len(runs) + 2, "dollars": None})
        Loop(root, log=quiet).run()
    qs = events(root, "question")
    moments = [q["moment"] for q in qs]
    assert moments.count("suspicious_gain") == 2 and "plateau" in moments
    # v5b (evaluation 6) beat every earlier geomean by more than the noise: a new plateau starts there
    assert [q["key"] for q in qs if q["moment"] == "plateau"] == ["plateau@0", "plateau@6"]
    sus = [q for q in qs if q["moment"] == "suspicious_gain"]
    assert sus[0]["key"].endswith("r24_decode_paged_b4_kv32k") and sus[1]["key"].endswith("r23_decode_paged_b256_kv2k")
    assert len({q["key"] for q in qs}) == len(qs)                # no event asked twice


@pytest.mark.parametrize("arm,code", [("bare", 2), ("bank", 2), ("equipped", 2), ("human", 0)])
def test_kernelseek_ask_refuses_a_campaign_with_no_questioner(tmp_path, arm, code):
    import subprocess
    root = make(tmp_path, "http://127.0.0.1:9", arm=arm)
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "kernelseek", "ask", str(root), "Is this ceiling real?"],
                       capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"})
    assert r.returncode == code, r.stdout + r.stderr
    if code:
        assert f"runs the {arm} arm" in r.stdout + r.stderr and "would never be delivered" in r.stdout + r.stderr
        assert inbox.read(root) == []                                 # nothing queued to be dropped
    else:
        assert "queued as inbox line 0" in r.stdout and inbox.pending(root)[0]["text"] == "Is this ceiling real?"
