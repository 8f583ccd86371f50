"""Prompt size per model step, and the share of it the harness pushed in unasked (pre-fetched).

The paper: "The median prompt was 22.6K characters, 37% of it retrieved or pre-fetched material"
(the equipped agent). From a trace, the prompt of a model step is the conversation the request
carried when the step was made (the events before its `usage` event), counted in characters:
    a person's, the harness's or a briefing's text; the assistant's text and tool inputs (as JSON;
    thinking is not sent back); tool results as the model saw them (`output`, already bounded).
Context events are applied as the loop applies them (kernelseek.agent.context): `summarize` keeps
the task, the digest and what follows `upto_seq`; `elide` turns tool results up to `upto_seq` into
their stubs and cuts long tool inputs. The system prompt and tool definitions are not in a trace
and are not counted.
Pre-fetched characters: a message's own `prefetched_chars` when it records one (an arm that knows
which part of its briefing was retrieved), else the whole text of a message by an author who
pushes material without being asked (PUSHED: the equipped arm's briefings). A person's question,
the task and the harness's notes are not pre-fetched material.
Sub-agent (sidechain) steps have their own conversations and are left out.
"""
from __future__ import annotations

import json
import statistics

import pandas as pd

from .traces import text_of

PUSHED = ("equipped",)


def _assistant_chars(blocks, elided: bool = False) -> int:
    from .agent.conversation import outgoing
    n = 0
    for b in outgoing(blocks if isinstance(blocks, list) else [], elided):
        if b.get("type") == "text":
            n += len(b.get("text", ""))
        elif b.get("type") == "tool_use":
            n += len(json.dumps(b.get("input") or {}))
    return n


def _item(ev: dict) -> dict | None:
    """One conversation item: {seq, kind, chars, pref, elided_chars}; None for what is not sent."""
    from .agent.conversation import stub_output
    if ev.get("sidechain"):
        return None
    if ev.get("type") == "tool_result":
        out = ev.get("output") or "(no output)"
        return {"seq": ev["seq"], "kind": "result", "chars": len(out), "pref": 0,
                "elided_chars": len(stub_output(ev))}
    if ev.get("type") != "message" or ev.get("role") not in ("user", "assistant"):
        return None
    if ev["role"] == "assistant":
        if ev.get("dropped"):
            return None
        c = _assistant_chars(ev.get("content"))
        return {"seq": ev["seq"], "kind": "assistant", "chars": c, "pref": 0,
                "elided_chars": _assistant_chars(ev.get("content"), True)}
    text = text_of(ev.get("content"))
    if not text.strip():
        return None
    c = len(text)
    pref = ev.get("prefetched_chars")
    pref = min(int(pref), c) if isinstance(pref, (int, float)) else (c if ev.get("author") in PUSHED else 0)
    return {"seq": ev["seq"], "kind": "user", "chars": c, "pref": pref, "elided_chars": c}


def _compact(items: list[dict], ev: dict) -> list[dict]:
    upto = ev.get("upto_seq", -1)
    if ev.get("action") == "summarize":
        first = next((i for i in items if i["kind"] == "user"), None)
        digest = {"seq": upto, "kind": "user", "chars": len(ev.get("summary") or ""), "pref": 0,
                  "elided_chars": len(ev.get("summary") or "")}
        return ([first] if first and first["seq"] <= upto else []) + [digest] + [i for i in items if i["seq"] > upto]
    if ev.get("action") == "elide":
        return [dict(i, chars=i["elided_chars"]) if i["seq"] <= upto else i for i in items]
    return items


def prompt_sizes(events: list[dict]) -> pd.DataFrame:
    """One row per parent model step: step, prompt_chars, prefetched_chars, prefetched_share."""
    items: list[dict] = []
    rows = []
    for ev in events:
        if ev.get("type") == "usage" and not ev.get("sidechain"):
            total = sum(i["chars"] for i in items)
            pref = sum(i["pref"] for i in items)
            rows.append({"step": len(rows) + 1, "prompt_chars": total, "prefetched_chars": pref,
                         "prefetched_share": pref / total if total else None})
        elif ev.get("type") == "context":
            items = _compact(items, ev)
        else:
            it = _item(ev)
            if it is not None:
                items.append(it)
    return pd.DataFrame(rows, columns=["step", "prompt_chars", "prefetched_chars", "prefetched_share"])


def prompt_summary(events: list[dict]) -> dict:
    """median_prompt_chars, prefetched_share (pre-fetched over all prompt characters, every step
    pooled), median_prefetched_share (of the steps), steps."""
    df = prompt_sizes(events)
    if df.empty:
        return {"median_prompt_chars": None, "prefetched_share": None, "median_prefetched_share": None, "steps": 0}
    tot = int(df["prompt_chars"].sum())
    shares = [s for s in df["prefetched_share"] if s is not None and s == s]
    return {"median_prompt_chars": float(statistics.median(df["prompt_chars"])),
            "prefetched_share": int(df["prefetched_chars"].sum()) / tot if tot else None,
            "median_prefetched_share": float(statistics.median(shares)) if shares else None,
            "steps": len(df)}
