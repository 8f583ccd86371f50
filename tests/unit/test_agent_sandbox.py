"""The shell runs what a model wrote: it may write only in the workspace and never sees the key.
bubblewrap is required (these tests fail without it); unconfined only when asked for by name."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, text, tool, turn  # noqa: E402
from harness import KEY, KERNEL, events, make, trace_text  # noqa: E402

from kernelseek.agent import Loop  # noqa: E402
from kernelseek.agent.sandbox import Sandbox, SandboxError, cap, clean_env  # noqa: E402

REPO_FILE = Path(__file__).resolve().parents[2] / "escaped-from-sandbox.txt"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fakefakefakefakefake123")


def test_write_outside_the_workspace_is_refused_and_the_key_hidden(tmp_path):
    outside = tmp_path / "escape.txt"
    script = [turn(tool("write", path=str(outside), content="x"), tool("write", path="../../escape2.txt", content="x"),
                   tool("edit", path="/etc/hostname", old="a", new="b"), tool("read", path="/etc/passwd")),
              turn(tool("shell", command=f"echo pwned > {outside}; echo pwned > {REPO_FILE}; echo rc=$?; env; "
                                         "echo KEY=$ANTHROPIC_API_KEY; "
                                         "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ANTHROPIC")),
              turn(tool("shell", command=f"echo {KEY}")),          # a secret the model got from elsewhere
              turn(text("done"), stop="end_turn")]
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, budget={"steps": 4})
        Loop(root, log=lambda *a: None).run()
    results = events(root, "tool_result")
    assert [r["is_error"] for r in results[:4]] == [True, True, True, True]
    assert all(r["output"].startswith("refused:") and "outside the workspace" in r["output"] for r in results[:4])
    assert not (tmp_path / "escape2.txt").exists()
    shell = results[4]["output"]
    assert KEY not in shell and "KEY=\n" in shell and "GITHUB_TOKEN" not in shell
    start = events(root, "start")[0]
    assert start["sandbox"].startswith("bubblewrap") and start["confined"] is True
    assert not outside.exists()                               # the shell's /tmp is private
    assert "rc=1" in shell and not REPO_FILE.exists()         # the checkout is not there at all
    assert "No such file or directory" in shell
    assert shell.rstrip().splitlines()[-1] == "0"             # no process environment holds the key
    # nothing secret reaches the trace, even when the model itself echoes a key
    assert KEY not in trace_text(root) and "[redacted:ANTHROPIC_API_KEY]" in trace_text(root)
    assert "ghp_fakefakefakefakefake123" not in trace_text(root)
    # the conversation is rebuilt from the trace, so the key is not sent back to the API either
    assert "[redacted:ANTHROPIC_API_KEY]" in str(api.requests[3]["messages"][-1])
    assert not any(KEY in str(r["messages"]) for r in api.requests)


def test_bubblewrap_confines_the_shell(tmp_path):
    ws = tmp_path / "ws"
    sb = Sandbox(ws, timeout_s=10)
    r = sb.run("echo ok > inside.txt && cat inside.txt; touch /usr/x 2>&1; echo rc=$?; "
               "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\" 2>&1 | tail -1")
    assert (ws / "inside.txt").read_text() == "ok\n"
    assert "rc=1" in r.output and "Network is unreachable" in r.output
    argv = sb.argv("true")
    for flag in ("--unshare-net", "--unshare-pid", "--clearenv", "--remount-ro"):
        assert flag in argv
    assert ["--ro-bind", "/", "/"] not in [argv[i:i + 3] for i in range(len(argv))]   # never the whole root


def test_bubblewrap_is_required_and_unconfined_only_by_name(tmp_path, monkeypatch, capsys):
    """No bubblewrap: every confined path refuses to start with the fix in its message; no fallback."""
    import argparse

    from kernelseek.commands import campaign
    from kernelseek.confine import ConfinementUnavailable, require
    from kernelseek.evaluate import evaluate
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("KSEEK_BWRAP", str(tmp_path / "no-such-bwrap"))
    with pytest.raises(SandboxError, match="bubblewrap is not installed.*--unconfined"):
        Sandbox(tmp_path / "ws")
    with pytest.raises(ConfinementUnavailable, match="a confined evaluation"):
        evaluate(str(Path(__file__)), "smoke", confine=True, runs_dir=str(tmp_path / "runs"))
    from kernelseek.cli import main
    assert main(["campaign", "run", "--kernel", str(KERNEL), "--campaigns-dir", str(tmp_path / "camps")]) == 2
    err = capsys.readouterr().err
    assert "needs bubblewrap" in err and "--unconfined" in err
    assert not (tmp_path / "camps").exists()                  # refused before any campaign existed
    ap = argparse.ArgumentParser()
    campaign.register(ap.add_subparsers())
    a = ap.parse_args(["campaign", "run", "--kernel", str(KERNEL)])
    assert campaign._config(ap.parse_args(["campaign", "run", "--kernel", "k.cu", "--unconfined"])).sandbox == "none"
    assert campaign._config(a).sandbox == "bwrap"
    with pytest.raises(ConfinementUnavailable):
        require("x")
    assert Sandbox(tmp_path / "ws", mode="none").protection.startswith("none: UNCONFINED")


def test_unconfined_by_name_is_recorded_in_trace_and_summary(tmp_path):
    from kernelseek import analytics, campaign, traces
    with FakeAPI([turn(text("ok"), stop="end_turn")], key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, budget={"steps": 1}, sandbox="none")
        Loop(root, log=lambda *a: None).run()
    start = events(root, "start")[0]
    assert start["confined"] is False and start["sandbox"].startswith("none: UNCONFINED, chosen explicitly")
    assert campaign.outcome(root)["confined"] is False
    assert analytics.summary(traces.read(root / "trace.jsonl"))["confined"] is False


def test_shell_timeout_and_output_cap(tmp_path):
    sb = Sandbox(tmp_path / "ws", timeout_s=1, output_cap=200)
    r = sb.run("sleep 5; echo never")
    assert r.timed_out and "never" not in r.output and r.seconds < 4
    r = sb.run("python3 -c \"print('a' * 1000 + 'END')\"")
    assert r.truncated and r.output.endswith("END\n") and "characters cut" in r.output
    assert cap("x" * 10, 100) == ("x" * 10, False)


def test_paths_and_environment(tmp_path):
    sb = Sandbox(tmp_path / "ws", mode="none")
    assert sb.protection.startswith("none:")
    assert sb.path("a/b.cu") == (tmp_path / "ws" / "a" / "b.cu").resolve()
    with pytest.raises(SandboxError):
        sb.path("../x")
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "link").symlink_to(tmp_path)
    with pytest.raises(SandboxError):
        sb.path("link/escape.txt")                      # a symlink out of the workspace
    env = clean_env({"PATH": "/bin", "ANTHROPIC_API_KEY": "k" * 20, "AWS_SECRET_ACCESS_KEY": "s" * 20,
                     "CUDA_VISIBLE_DEVICES": "1", "HF_TOKEN": "t" * 20})
    assert env["PATH"].split(":")[-1] == "/bin" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "shims" not in env["PATH"] and env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert not any("KEY" in k or "TOKEN" in k for k in env)
