"""Traces: append-only, flushed per event, redacted; the inbox contract; the Claude Code importer."""
import json
from pathlib import Path

import pytest

from kernelseek import analytics, inbox, traces

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_writer_appends_redacts_and_survives_a_torn_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890abcdef")
    p = tmp_path / "trace.jsonl"
    w = traces.TraceWriter(p, fsync=False)
    w.write("start", config={"kernel": "k.cu"}, note="token tok-1234567890abcdef and sk-ant-api03-abcdefgh12345")
    w.write("message", role="assistant", content=[{"type": "text", "text": "hi"}])
    assert p.read_text().count("\n") == 2                       # flushed as written
    assert "tok-1234567890abcdef" not in p.read_text() and "sk-ant-api03" not in p.read_text()
    assert "[redacted:MY_SERVICE_TOKEN]" in p.read_text()
    with open(p, "a") as f:
        f.write('{"id": "ev-2", "type": "mess')                # a crash mid-line
    w2 = traces.TraceWriter(p, fsync=False)
    ev = w2.write("resume")
    evs = traces.read(p)
    assert [e["type"] for e in evs] == ["start", "message", "resume"]
    assert ev["id"] == "ev-2" and ev["seq"] == 2
    assert traces.tool_calls([{"type": "message", "role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "read", "input": {"path": "a"}}]}])[0]["name"] == "read"


def test_inbox_ask_pending_and_consumption(tmp_path):
    with pytest.raises(FileNotFoundError):
        inbox.ask(tmp_path / "nope", "q?")
    with pytest.raises(ValueError):
        inbox.ask(tmp_path, "   ")
    a = inbox.ask(tmp_path, "Is this ceiling real?", source="console", bank_id="CL-01", moment="limit_claim")
    b = inbox.ask(tmp_path, "Where does the time go?")
    assert (a["line"], b["line"]) == (0, 1)
    lines = [json.loads(x) for x in (tmp_path / "inbox.jsonl").read_text().splitlines()]
    assert lines[0]["source"] == "console" and lines[0]["bank_id"] == "CL-01" and lines[0]["time"].endswith("Z")
    assert "bank_id" not in lines[1] and lines[1]["source"] == "cli"
    traces.TraceWriter(tmp_path / "trace.jsonl", fsync=False).write("inbox_consumed", line=0)
    assert [r["text"] for r in inbox.pending(tmp_path)] == ["Where does the time go?"]
    assert len(inbox.read(tmp_path)) == 2                    # the inbox itself is never rewritten


def test_ask_verb(tmp_path, capsys):
    from kernelseek.cli import main
    assert main(["ask", str(tmp_path), "Which rows bring the geomean down?"]) == 0
    assert "inbox line 0" in capsys.readouterr().out
    assert inbox.pending(tmp_path)[0]["text"] == "Which rows bring the geomean down?"


def test_import_claude_code_session(tmp_path):
    ev = traces.import_session(FIX / "claude_code" / "session.jsonl", label="hand-built fixture")
    start = ev[0]
    assert start["type"] == "start" and start["source_format"] == "claude_code"
    assert start["model"] == "claude-opus-4-1-20250805" and start["label"] == "hand-built fixture"
    people = analytics.person_messages(ev)
    assert [analytics.classify_message(traces.text_of(m["content"])) for m in people] == \
        ["directive", "question", "approval"]
    assert sum(e["type"] == "usage" for e in ev) == 6        # one per assistant message id
    calls = traces.tool_calls(ev)
    assert [c["name"] for c in calls] == ["Bash", "Read", "Task", "Bash", "Edit"]
    assert [c["sidechain"] for c in calls] == [False, False, False, True, True]
    assert {e["name"] for e in ev if e["type"] == "tool_result"} == {"Bash", "Read", "Task", "Edit"}
    assert any(e.get("author") == "harness" for e in ev)     # the isMeta note is not a person's message
    out = traces.write_all(tmp_path / "t.jsonl", ev)
    assert len(traces.read(out)) == len(ev)
    with pytest.raises(FileExistsError):
        traces.write_all(out, ev)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="not a Claude Code session"):
        traces.import_session(bad)
