"""The shell runs what a model wrote: it may write only in the workspace and never sees the key."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, text, tool, turn  # noqa: E402
from harness import KEY, events, make, trace_text  # noqa: E402

from kernelseek.agent import Loop  # noqa: E402
from kernelseek.agent.sandbox import Sandbox, SandboxError, bwrap_usable, cap, clean_env  # noqa: E402

BWRAP = bwrap_usable()
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
    if BWRAP is None:
        assert start["sandbox"].startswith("bubblewrap")
        assert not outside.exists()                           # the shell's /tmp is private
        # the checkout is read-only in the sandbox, or not there at all when it lives under the
        # (private) /tmp, as in a CI clone: either way the write fails and nothing lands
        assert "rc=1" in shell and not REPO_FILE.exists()
        assert "Read-only file system" in shell or "No such file or directory" in shell
        assert shell.rstrip().splitlines()[-1] == "0"         # no process environment holds the key
    else:                                                     # unconfined: the writes went through
        assert start["sandbox"].startswith("none:")
        REPO_FILE.unlink(missing_ok=True)
    # nothing secret reaches the trace, even when the model itself echoes a key
    assert KEY not in trace_text(root) and "[redacted:ANTHROPIC_API_KEY]" in trace_text(root)
    assert "ghp_fakefakefakefakefake123" not in trace_text(root)
    # the conversation is rebuilt from the trace, so the key is not sent back to the API either
    assert "[redacted:ANTHROPIC_API_KEY]" in str(api.requests[3]["messages"][-1])
    assert not any(KEY in str(r["messages"]) for r in api.requests)


@pytest.mark.skipif(BWRAP is not None, reason=f"bubblewrap not usable here: {BWRAP}")
def test_bubblewrap_confines_the_shell(tmp_path):
    ws = tmp_path / "ws"
    sb = Sandbox(ws, timeout_s=10)
    r = sb.run("echo ok > inside.txt && cat inside.txt; touch /usr/x 2>&1; echo rc=$?; "
               "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\" 2>&1 | tail -1")
    assert (ws / "inside.txt").read_text() == "ok\n"
    assert "rc=1" in r.output and "Network is unreachable" in r.output
    assert "--unshare-net" in sb.argv("true") and "--clearenv" in sb.argv("true")


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
    assert env["PATH"] == "/bin" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert not any("KEY" in k or "TOKEN" in k for k in env)
