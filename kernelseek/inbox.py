"""A campaign's inbox: questions from a person (or the questioner) waiting for the agent.

    campaigns/<id>/inbox.jsonl   one JSON object per line, append-only, never rewritten:
        {"time": ISO8601 UTC, "source": "console" | "cli" | ..., "text": ...,
         "bank_id": optional, "moment": optional}

The agent marks a line consumed by appending {"type": "inbox_consumed", "line": n} to the
campaign's trace.jsonl (n counts lines of inbox.jsonl from 0). `pending` is every line without such
an event. `kernelseek ask RUN "question"` calls `ask`.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .store import Campaign

def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def ask(campaign_dir, text: str, source: str = "cli", bank_id: str | None = None,
        moment: str | None = None) -> dict:
    """Append one question to the campaign's inbox; returns the record written (with its line)."""
    text = (text or "").strip()
    if not text:
        raise ValueError("an inbox question needs some text")
    d = Path(campaign_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"no campaign directory {d}")
    rec = {"time": _utc_now(), "source": source, "text": text}
    if bank_id is not None:
        rec["bank_id"] = bank_id
    if moment is not None:
        rec["moment"] = moment
    data = (json.dumps(rec) + "\n").encode()
    # one write() on an O_APPEND descriptor: concurrent writers never interleave within a line
    inbox = Campaign(d).inbox
    fd = os.open(inbox, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        line = _count_lines(inbox) - 1
    finally:
        os.close(fd)
    return dict(rec, line=line)


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def read(campaign_dir) -> list[dict]:
    """Every inbox line, each with its `line` number; a torn or blank line is skipped."""
    p = Campaign(campaign_dir).inbox
    if not p.exists():
        return []
    out = []
    with open(p, encoding="utf-8") as f:
        for n, raw in enumerate(f):
            if not raw.endswith("\n"):
                break          # a line still being written
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and rec.get("text"):
                out.append(dict(rec, line=n))
    return out


def consumed(campaign_dir) -> set[int]:
    """Inbox line numbers the trace marks consumed."""
    p = Campaign(campaign_dir).trace
    done: set[int] = set()
    if not p.exists():
        return done
    with open(p, encoding="utf-8") as f:
        for raw in f:
            if '"inbox_consumed"' not in raw:
                continue
            try:
                ev = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if ev.get("type") == "inbox_consumed" and isinstance(ev.get("line"), int):
                done.add(ev["line"])
    return done


def pending(campaign_dir) -> list[dict]:
    """Questions not yet seen by the agent, oldest first."""
    done = consumed(campaign_dir)
    return [r for r in read(campaign_dir) if r["line"] not in done]
