"""The API conversation, rebuilt from the trace: what is sent, byte for byte, at every step.

    messages, pending, stable = rebuild(events)      # messages so far, the next user blocks
    system, messages = with_cache(system_text, messages, stable)

Rules the Messages API enforces, kept here (platform.claude.com/docs/en/api/messages):
  - roles alternate from a user message; every message has non-empty content except an optional
    final assistant message, and no text block is empty or whitespace only;
  - every tool_use is answered by a tool_result at the start of the next user message.
So an assistant reply the loop `dropped` (empty content, or stop_reason refusal) is recorded in
the trace but never sent back: the user turns around it merge (handling-stop-reasons: sending an
empty reply back unchanged does not help), and whitespace-only text blocks are left out. A reply
that `continues` a pause_turn is appended to the assistant message it continues (pause_turn:
"send the assistant content back to continue").

Context events (kernelseek.agent.context) are applied here: `elide` shortens tool results and
long tool inputs up to an event seq, `summarize` replaces everything up to a seq (but the task)
with a digest. Because the same events always give the same bytes, the prefix stays identical
between compactions and prompt caching can hit.

Prompt caching (platform.claude.com/docs/en/build-with-claude/prompt-caching): the cache key is
the exact prefix, tools then system then messages, up to a block with cache_control; at most 4
breakpoints; a breakpoint finds an earlier entry up to 20 blocks back. `with_cache` sets 4: the
system prompt (tools and system), the last message of the compacted stretch (or the task), the
previous request's last user message (where the last write happened) and the new last message.
"""
from __future__ import annotations

from .. import traces

EPHEMERAL = {"type": "ephemeral"}
ELIDE_INPUT_CHARS = 400          # tool inputs longer than this are cut in elided turns


def stub_output(ev: dict) -> str:
    """What an elided tool result says instead of its output."""
    n = ev.get("chars") or len(ev.get("output") or "")
    where = f"; the full text is in {ev['full_output']}" if ev.get("full_output") else ""
    return (f"[{ev.get('name', 'tool')} output ({n} characters) elided by the context policy{where}; "
            "ask for it again if you need it]")


def _elide_input(b: dict) -> dict:
    inp = b.get("input") or {}
    out = {}
    for k, v in inp.items():
        if isinstance(v, str) and len(v) > ELIDE_INPUT_CHARS:
            first = v.splitlines()[0][:120] if v.strip() else ""
            v = f"{first} [... {len(v)} characters elided by the context policy]"
        out[k] = v
    return dict(b, input=out)


def outgoing(blocks, elided: bool = False) -> list[dict]:
    """Assistant blocks as they are sent back: no empty text; old turns without thinking and with
    long tool inputs cut."""
    out = []
    for b in blocks or []:
        t = b.get("type")
        if t == "text" and not str(b.get("text", "")).strip():
            continue
        if elided and t in ("thinking", "redacted_thinking"):
            continue                      # the API ignores thinking of earlier turns anyway
        out.append(_elide_input(b) if elided and t == "tool_use" else b)
    return out


def _latest(events, action):
    evs = [e for e in events if e.get("type") == "context" and e.get("action") == action]
    return max(evs, key=lambda e: e.get("upto_seq", -1)) if evs else None


def conversation_events(events: list[dict]) -> list[dict]:
    """The events that make the conversation: messages and tool results of the main chain."""
    return [e for e in events if not e.get("sidechain") and
            (e.get("type") == "tool_result" or (e.get("type") == "message" and e.get("role") in ("user", "assistant")))]


def rebuild(events: list[dict]) -> tuple[list[dict], list[dict], int | None]:
    """(messages sent so far, blocks of the next user message, index of the last message of the
    compacted stretch or None)."""
    conv = conversation_events(events)
    summ, elide = _latest(events, "summarize"), _latest(events, "elide")
    cut = max([e.get("upto_seq", -1) for e in (summ, elide) if e] + [-1])
    if summ is not None:
        first = next((e for e in conv if e.get("role") == "user"), None)
        digest = {"type": "message", "role": "user", "seq": summ["upto_seq"],
                  "content": [{"type": "text", "text": summ["summary"]}]}
        conv = ([first] if first else []) + [digest] + [e for e in conv if e["seq"] > summ["upto_seq"]]
    messages, pending, last_seq, stable = [], [], [], None

    def flush():
        nonlocal pending
        if pending:
            messages.append({"role": "user", "content": pending})
            last_seq.append(pend_seq[0])
            pending = []
    pend_seq = [-1]
    for ev in conv:
        old = elide is not None and ev["seq"] <= elide["upto_seq"]
        if ev["type"] == "message" and ev["role"] == "assistant":
            blocks = outgoing(ev.get("content"), old)
            if ev.get("dropped") or not blocks:
                continue
            if not pending and messages and messages[-1]["role"] == "assistant":
                messages[-1] = {"role": "assistant", "content": messages[-1]["content"] + blocks}
                last_seq[-1] = ev["seq"]
                continue
            flush()
            messages.append({"role": "assistant", "content": blocks})
            last_seq.append(ev["seq"])
            continue
        if ev["type"] == "message":
            text = traces.text_of(ev.get("content"))
            if not text.strip():
                continue
            pending.append({"type": "text", "text": text})
        else:
            out = stub_output(ev) if old else (ev.get("output") or "(no output)")
            pending.append({"type": "tool_result", "tool_use_id": ev["tool_use_id"], "content": out,
                            "is_error": bool(ev.get("is_error"))})
        pend_seq[0] = ev["seq"]
    if cut >= 0:
        stable = max((i for i, s in enumerate(last_seq) if s <= cut), default=None)
        if stable is None and messages:
            stable = 0
    return messages, pending, stable


def request_messages(messages: list[dict], pending: list[dict]) -> list[dict]:
    """The messages of the next request: the pending user blocks appended (none after a paused
    assistant turn that is continued); a final assistant message loses trailing whitespace."""
    msgs = messages + ([{"role": "user", "content": pending}] if pending else [])
    if msgs and msgs[-1]["role"] == "assistant":
        blocks = list(msgs[-1]["content"])
        if blocks and blocks[-1].get("type") == "text":
            blocks[-1] = dict(blocks[-1], text=blocks[-1]["text"].rstrip())
        msgs[-1] = {"role": "assistant", "content": blocks}
    return msgs


def _mark(msg: dict) -> dict:
    blocks = list(msg["content"])
    blocks[-1] = dict(blocks[-1], cache_control=EPHEMERAL)
    return {"role": msg["role"], "content": blocks}


def with_cache(system: str, messages: list[dict], stable: int | None) -> tuple[list[dict], list[dict]]:
    """The system blocks and messages with cache_control breakpoints (at most 4; see module doc)."""
    sys_blocks = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    marks = {len(messages) - 1} if messages else set()
    if len(users) >= 2:
        marks.add(users[-2] if users[-1] == len(messages) - 1 else users[-1])
    marks.add(stable if stable is not None else 0)
    out = [(_mark(m) if i in marks and m["content"] else m) for i, m in enumerate(messages)]
    return sys_blocks, out


def trailing_drops(events: list[dict], kind: str) -> int:
    """How many of the latest assistant replies in a row were dropped for `kind`."""
    n = 0
    for ev in reversed(events):
        if ev.get("type") == "message" and ev.get("role") == "assistant" and not ev.get("sidechain"):
            if ev.get("dropped") != kind:
                break
            n += 1
    return n
