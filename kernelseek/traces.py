"""Campaign traces: one JSONL file per campaign, append-only, one event per line, flushed per event.

Every event carries `id` ("ev-<seq>"), `seq`, `type`, `t` (epoch seconds) and `utc`. Types:
    start           config, git_rev, gpu, sandbox (the protection in force), api, arm, model
    resume          a later session continuing the campaign (same fields as start, minus config)
    message         role user|assistant; author harness|human|bank|equipped|agent; content (API blocks);
                    an assistant reply never sent back has `dropped` (empty | refusal); one that
                    continues a pause_turn has `continues`
    tool_result     tool_use_id, name, output (what the model saw, bounded), is_error, seconds;
                    chars and full_output (workspace file with the whole text) when it was cut
    evaluation      n, dir, kernel_sha256, summary, geomean, filtered, check_only
    question        moment, bank_id, group, text, source (fired by a questioner or asked by a person)
    inbox_consumed  line (of inbox.jsonl) delivered to the agent
    goal_check      met, shortfall, eval
    usage           step, input/output/cache tokens, cost_usd, total_cost_usd, stop_reason,
                    request_bytes, retries (how many before this reply)
    retry           step, attempt, of, status, reason, wait_s (one per API retry)
    context         action elide|summarize, upto_seq, summary, tokens_before/after, reason
    lock_takeover   previous holder (pid, host, started), whether it was alive, strays killed
    stop            reason, met
    error           where (api | tool | loop), kind, message
    branch          action fork|rollback, from_eval, by, discarded_steps, ... (kernelseek.branching)
Tool calls are the `tool_use` blocks of assistant messages. Imported traces (Claude Code) use the
same schema with `source_format` on their start event. No secret reaches a trace: every string is
passed through a redact.Redactor (values of credential-like variables and their encodings,
API-key patterns).

    kernelseek trace import-claude-code SESSION.jsonl [--out data/traces/NAME.jsonl]
    kernelseek trace stats TRACE.jsonl...
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Iterable

from . import store
from .redact import SECRET_NAME, SECRET_PATTERNS, Redactor  # noqa: F401  (re-exported)

TRACE = store.TRACE
def utc(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


class TraceWriter:
    """Appends events to a trace file; each event is redacted, written whole, flushed and synced."""

    def __init__(self, path, redactor: Redactor | None = None, fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.redact = redactor or Redactor.from_env()
        self.fsync = fsync
        self.seq = 0
        if self.path.exists():
            raw = self.path.read_bytes()
            if raw and not raw.endswith(b"\n"):
                with open(self.path, "ab") as f:   # a line torn by a crash: close it (read() skips it)
                    f.write(b"\n")
            self.seq = max([e.get("seq", -1) for e in read(self.path)] + [-1]) + 1

    def write(self, type: str, **fields) -> dict:
        now = time.time()
        ev = {"id": f"ev-{self.seq}", "seq": self.seq, "type": type, "t": round(now, 3), "utc": utc(now)}
        ev.update(self.redact(fields))
        data = (json.dumps(ev, default=str) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self.seq += 1
        return ev


def read(path) -> list[dict]:
    """Every well-formed event of a trace file (a torn or foreign line is skipped)."""
    p = store.trace_file(path)
    out = []
    if not p.exists():
        return out
    with open(p, encoding="utf-8", errors="replace") as f:
        for raw in f:
            try:
                ev = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(ev, dict) and "type" in ev:
                out.append(ev)
    return out


def write_all(path, events: Iterable[dict]) -> Path:
    """Write a whole trace (an import or a curated copy); refuses to overwrite an existing file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    red = Redactor.from_env()
    with open(p, "x", encoding="utf-8") as f:
        for ev in events:
            f.write(json.dumps(red(ev), default=str) + "\n")
    return p


def passed_full(ev: dict) -> bool:
    """An evaluation event of a full, timed run whose every row passed: the only versions whose
    geomean counts as progress (a version failing the check has no speed worth reporting)."""
    s = ev.get("summary") or {}
    return (ev.get("type") == "evaluation" and isinstance(ev.get("geomean"), (int, float))
            and not ev.get("filtered") and not ev.get("check_only") and bool(s.get("all_correct")))


def text_of(content) -> str:
    """The plain text of a message's content (a string or a list of API blocks)."""
    if isinstance(content, str):
        return content
    parts = []
    for b in content or []:
        if isinstance(b, dict) and b.get("type") == "text":
            parts.append(b.get("text", ""))
    return "\n".join(parts)


def tool_calls(events: list[dict]) -> list[dict]:
    """Every tool call: {id, name, input, sidechain, t} from the tool_use blocks of assistant messages."""
    out = []
    for ev in events:
        if ev.get("type") == "message" and ev.get("role") == "assistant" and isinstance(ev.get("content"), list):
            for b in ev["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    out.append({"id": b.get("id"), "name": b.get("name", ""), "input": b.get("input") or {},
                                "sidechain": bool(ev.get("sidechain")), "t": ev.get("t")})
    return out


# ---- Claude Code transcripts -------------------------------------------------------------------
def _epoch(ts) -> float | None:
    if not isinstance(ts, str):
        return None
    import calendar
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?", ts)
    if not m:
        return None
    return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + float(m.group(2) or 0)


def _result_text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


_META_USER = re.compile(r"^\s*(<command-|<local-command-|Caveat: |Stop hook feedback|\[Request interrupted)")


class _Tree:
    """The uuid/parentUuid tree of a transcript's main chain. A person's message whose parent already
    has a child is a rewind (the conversation taken back and continued from there): the line it
    leaves is given up, and `rewind` says how many model replies (distinct message ids) that line
    held after the branch point. Tool results and replies sharing a parent are not rewinds."""

    def __init__(self, lines: list[dict]):
        self.by_uuid = {r.get("uuid"): r for r in lines if r.get("uuid")}
        self.kids: dict = {}
        for r in lines:
            if r.get("type") in ("user", "assistant") and not r.get("isSidechain") and r.get("uuid"):
                self.kids.setdefault(r.get("parentUuid"), []).append(r)

    def _replies(self, r: dict) -> set:
        out, todo = set(), [r]
        while todo:
            x = todo.pop()
            if x.get("type") == "assistant":
                out.add((x.get("message") or {}).get("id") or x.get("uuid"))
            todo += self.kids.get(x.get("uuid"), [])
        return out

    def rewind(self, r: dict) -> int:
        if r.get("type") != "user" or r.get("isSidechain") or r.get("parentUuid") is None:
            return 0
        c = (r.get("message") or {}).get("content")
        if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
            return 0
        sibs = self.kids.get(r.get("parentUuid"), [])
        i = next((k for k, x in enumerate(sibs) if x is r), 0)
        if i == 0:
            return 0
        return len(self._replies(sibs[i - 1]))


def import_session(path, label: str = "") -> list[dict]:
    """A Claude Code session transcript (one JSON object per line: type user|assistant|summary|system,
    message {role, content}, uuid, parentUuid, timestamp, isSidechain, sessionId, cwd) as trace events.
    A rewound conversation (a person's message sent again from an earlier point) becomes a `branch`
    rollback event; a /compact boundary a `context` summarize event; the compaction's summary and
    injected notes are the harness's, not a person's."""
    p = Path(path)
    lines = []
    for n, raw in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            lines.append(rec)
    if not any(r.get("type") in ("user", "assistant") for r in lines):
        raise ValueError(f"{p}: no user or assistant lines: not a Claude Code session transcript")
    first = next(r for r in lines if r.get("type") in ("user", "assistant"))
    model = next((r["message"].get("model") for r in lines if r.get("type") == "assistant"
                  and isinstance(r.get("message"), dict) and r["message"].get("model")), None)
    events: list[dict] = []

    def add(type_, t, **f):
        events.append({"id": f"ev-{len(events)}", "seq": len(events), "type": type_, "t": t,
                       "utc": utc(t) if t is not None else None, **f})
    t0 = _epoch(first.get("timestamp"))
    add("start", t0, source_format="claude_code", imported_from=p.name, session_id=first.get("sessionId"),
        cwd=first.get("cwd"), model=model, version=first.get("version"), label=label,
        arm="human", config={})
    names: dict[str, str] = {}
    seen_usage: set = set()
    tree = _Tree(lines)
    for r in lines:
        kind, msg = r.get("type"), r.get("message")
        t, side = _epoch(r.get("timestamp")), bool(r.get("isSidechain"))
        if kind == "system" and r.get("subtype") == "compact_boundary" and events:
            add("context", t, action="summarize", upto_seq=events[-1]["seq"], summary="", reason="claude code /compact")
            continue
        if kind not in ("user", "assistant") or not isinstance(msg, dict):
            continue
        content = msg.get("content")
        rewind = tree.rewind(r)
        if rewind:
            add("branch", t, action="rollback", by="human", from_uuid=r.get("parentUuid"),
                discarded_steps=rewind, reason="the conversation was taken back to an earlier message")
        if kind == "assistant":
            blocks = []
            for b in content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]:
                if b.get("type") == "text":
                    blocks.append({"type": "text", "text": b.get("text", "")})
                elif b.get("type") == "tool_use":
                    names[b.get("id")] = b.get("name", "")
                    blocks.append({"type": "tool_use", "id": b.get("id"), "name": b.get("name", ""),
                                   "input": b.get("input") or {}})
            u, mid = msg.get("usage"), msg.get("id") or r.get("uuid")
            if isinstance(u, dict) and mid not in seen_usage:      # before the reply, as the loop writes it
                seen_usage.add(mid)
                add("usage", t, sidechain=side, model=msg.get("model"), **{k: u.get(k, 0) or 0 for k in (
                    "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")})
            if blocks:
                add("message", t, role="assistant", author="agent", content=blocks, sidechain=side)
            continue
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    add("tool_result", t, tool_use_id=b.get("tool_use_id"), name=names.get(b.get("tool_use_id"), ""),
                        output=_result_text(b.get("content")), is_error=bool(b.get("is_error")), sidechain=side)
            continue
        text = _result_text(content)
        if not text.strip():
            continue
        meta = r.get("isMeta") or r.get("isCompactSummary") or _META_USER.match(text)
        author = "agent" if side else ("harness" if meta else "human")
        add("message", t, role="user", author=author, content=[{"type": "text", "text": text}], sidechain=side)
    return events
