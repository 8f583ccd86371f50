"""One loop per campaign; killing a campaign kills its tools; no tool call outlives the wall-time
budget. Loops run as real subprocesses against the scripted API on 127.0.0.1, and are signalled
or killed the way a person (or a batch system) would."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"
sys.path.insert(0, str(HERE))
from fakeapi import FakeAPI, text, tool, turn  # noqa: E402
from harness import KEY, RUNS, events, make  # noqa: E402

from kernelseek.agent import Loop, Replay  # noqa: E402
from kernelseek.agent.lock import CampaignLocked  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def quiet(*a, **k):
    pass


def env():
    return {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "ANTHROPIC_API_KEY": KEY, "HOME": "/tmp"}


def start(root) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE / "run_loop.py"), str(root)], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(pred, timeout=30.0):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if pred():
            return True
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_second_loop_refused_sigterm_kills_the_tools_then_resume(tmp_path):
    slow = ("echo $$ > shell.pid; (sleep 60; echo late > late.txt) & echo $! > bg.pid; sleep 60")
    script = [turn(tool("shell", command=slow, timeout_s=100)), turn(text("Back again."), stop="end_turn")]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, sandbox="none", budget={"steps": 2})
        ws = root / "workspace"
        proc = start(root)
        try:
            wait_for(lambda: (ws / "bg.pid").exists() and (ws / "bg.pid").read_text().strip())
            # a second loop on the running campaign: refused, naming the holder
            with pytest.raises(CampaignLocked, match=f"already running \\(pid {proc.pid} "):
                Loop(root, log=quiet)
            r = subprocess.run([sys.executable, "-m", "kernelseek", "campaign", "resume", str(root)], env=env(),
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 2 and f"pid {proc.pid}" in r.stderr and "kill" in r.stderr
            pids = [int((ws / f).read_text()) for f in ("shell.pid", "bg.pid")]
            assert all(alive(p) for p in pids)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 128 + signal.SIGTERM
        finally:
            proc.kill()
        wait_for(lambda: not any(alive(p) for p in pids), 5)       # the tool's whole process group is gone
        stop = events(root, "stop")[-1]
        assert stop["reason"] == "killed by SIGTERM" and stop["processes_killed"] >= 1
        assert (root / "lock").read_text() == ""                       # released
        out = Loop(root, log=quiet).run()                              # resume continues the campaign
    res = events(root, "tool_result")
    assert len(res) == 1 and res[0]["output"].startswith("interrupted")
    assert out.spend.steps == 2 and not (ws / "late.txt").exists()
    seqs = [e["seq"] for e in events(root)]
    assert seqs == list(range(len(seqs)))                              # one writer at a time


def test_sigkilled_loop_lock_is_taken_over_and_its_strays_killed(tmp_path):
    loop_cmd = "while :; do date +%s%N >> ticks; sleep 0.05; done"
    script = [turn(tool("shell", command=loop_cmd, timeout_s=100)), turn(text("Resumed."), stop="end_turn")]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, sandbox="none", budget={"steps": 2})
        ticks = root / "workspace" / "ticks"
        proc = start(root)
        try:
            wait_for(lambda: ticks.exists())
            proc.kill()                                                # SIGKILL: no handler runs
            proc.wait(timeout=10)
        finally:
            proc.kill()
        n = ticks.stat().st_size
        time.sleep(0.4)
        assert ticks.stat().st_size > n                                # the orphaned tool keeps writing
        loop = Loop(root, log=quiet)                                   # takes the stale lock over
        take = events(root, "lock_takeover")
        assert len(take) == 1 and take[0]["previous"]["pid"] == proc.pid
        assert take[0]["previous_alive"] is False and take[0]["strays_killed"] >= 1
        time.sleep(0.2)
        n = ticks.stat().st_size
        time.sleep(0.4)
        assert ticks.stat().st_size == n                                # and now it has stopped
        out = loop.run()
    assert out.spend.steps == 2


def test_a_shell_call_cannot_outlive_the_wall_budget(tmp_path):
    script = [turn(tool("shell", command="sleep 30", timeout_s=600)), turn(text("unreachable"))]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, budget={"wall_s": 3, "steps": 5})
        t0 = time.monotonic()
        out = Loop(root, log=quiet).run()
        took = time.monotonic() - t0
    assert took < 10 and out.reason.startswith("budget:") and "wall time" in out.reason
    res = events(root, "tool_result")[0]
    assert res["is_error"] and "timed out" in res["output"] and res["seconds"] < 6
    assert len(api.requests) == 1


def test_an_evaluation_cannot_outlive_the_wall_budget(tmp_path):
    started = []

    def hanging(*a, **k):                  # an evaluation whose worker hangs
        p = subprocess.Popen(["sleep", "60"], start_new_session=True)
        started.append(p.pid)
        p.wait()
        return Replay(str(RUNS / "campaign"))(*a, **k)
    script = [turn(tool("evaluate")), turn(text("unreachable"))]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, budget={"wall_s": 2, "steps": 5})
        t0 = time.monotonic()
        out = Loop(root, evaluator=hanging, log=quiet).run()
        took = time.monotonic() - t0
    assert took < 10 and "wall time" in out.reason
    res = events(root, "tool_result")[0]
    assert res["is_error"] and "wall-time budget ran out during this evaluate call" in res["output"]
    assert not alive(started[0]) and not events(root, "evaluation")


def test_processes_a_tool_left_in_the_background_end_with_the_campaign(tmp_path):
    script = [turn(tool("shell", command="nohup sleep 60 > /dev/null 2>&1 & echo $! > bg.pid")),
              turn(text("Done for now."), stop="end_turn")]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, sandbox="none", budget={"steps": 2})
        Loop(root, log=quiet).run()
    pid = int((root / "workspace" / "bg.pid").read_text())
    wait_for(lambda: not alive(pid), 5)
    assert "killed 1 process(es) the tools left running" in events(root, "note")[-1]["text"]
