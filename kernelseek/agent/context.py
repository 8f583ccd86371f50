"""The context policy: what a long campaign's model sees, what is dropped or summarised, and when.

1. Bounded tool output, always. A tool result shows the model at most `output_cap` characters
   (default 8,000: the first 40% and the last 60%). The full text is saved in the workspace as
   .kseek/outputs/<tool>-<id>.txt and the result names that file, so the agent can read any part
   of it with `read` (offset, limit). A `read` that is cut says which lines to ask for next.
2. Measured size. Before each call the request (tools, system, messages) is serialized and its
   bytes counted; tokens are estimated as bytes / (bytes per token), the ratio measured on the
   campaign's latest reply (its request bytes over the prompt tokens the API reported: input +
   cache read + cache write), 3.0 before anything is measured.
3. Compaction, when the estimate passes `trigger` x `window` (default 0.70 x 200,000 tokens), or
   when the API answers "prompt is too long". Always kept verbatim: the system prompt, the tools,
   the task (first user message) and the last `keep_turns` assistant turns (default 8) with all
   that follows them. The policy tries, in order, until the estimate is at most `target` x
   `window` (default 0.40):
     a. elide: tool results before the kept turns become a one-line stub naming their length and
        the file with the full text; tool inputs over 400 characters in those turns (a whole file
        written, a long command) are cut to their first line; their thinking blocks are dropped
        (the API ignores the thinking of earlier turns anyway);
     b. summarize: the turns before the kept ones are dropped and a digest the harness writes
        from the trace (no model call) is appended to the task: every evaluation (geomean,
        rows passed, verdict), the best so far, the files written or edited, the questions asked
        and the agent's last words before the cut;
     c. keep fewer turns (halving, down to 1) and try again.
   Each compaction is one `context` event in the trace (action, upto_seq, estimated tokens before
   and after, why). The conversation is rebuilt from the trace with those events applied
   (conversation.rebuild), so a resumed campaign sees the same conversation and, between two
   compactions, every request starts with the same bytes: prompt caching hits.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .. import traces
from ..store import TOOL_OUTPUTS
from .conversation import conversation_events, rebuild, request_messages, with_cache

DEFAULT_BYTES_PER_TOKEN = 3.0
OUTPUTS = Path(TOOL_OUTPUTS)


# ---- 1. bounded tool output --------------------------------------------------------------------
def bound_output(text: str, cap: int, workspace: Path, stem: str, source: str | None = None) -> tuple[str, str | None]:
    """(what the model sees, the workspace-relative file with the full text or None).
    `source`: the text is that workspace file already (a `read`): no copy, say which lines to ask for."""
    if len(text) <= cap:
        return text, None
    head, tail = int(cap * 0.4), int(cap * 0.6)
    cut = len(text) - head - tail
    if source is not None:
        rel = source
        note = (f"[... {cut} of {len(text)} characters not shown; read {source} with offset and limit "
                f"to see the lines in between]")
    else:
        rel = str(OUTPUTS / f"{stem}.txt")
        p = workspace / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        note = (f"[... {cut} of {len(text)} characters not shown; the full output ({text.count(chr(10)) + 1} "
                f"lines) is in {rel}: read it with the read tool (offset, limit)]")
    return f"{text[:head]}\n{note}\n{text[-tail:]}", (rel if source is None else None)


# ---- 2. measured size -----------------------------------------------------------------------------
def bytes_per_token(events: list[dict]) -> float:
    """Request bytes per prompt token on the latest usage event that recorded both."""
    for ev in reversed(events):
        if ev.get("type") == "usage" and ev.get("request_bytes"):
            tok = sum(int(ev.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                       "cache_creation_input_tokens"))
            if tok > 0:
                return ev["request_bytes"] / tok
    return DEFAULT_BYTES_PER_TOKEN


def request_bytes(kw: dict) -> int:
    return len(json.dumps(kw, separators=(",", ":")).encode())


@dataclass
class Policy:
    window: int = 200_000            # the model's context window, tokens
    trigger: float = 0.70            # compact above trigger * window (estimated prompt tokens)
    target: float = 0.40             # ... down to target * window
    keep_turns: int = 8              # assistant turns kept verbatim, with all that follows them

    def request(self, base: dict, system: str, events: list[dict]) -> tuple[dict, int]:
        """The request for the conversation the events give, and its size in bytes."""
        messages, pending, stable = rebuild(events)
        sys_blocks, msgs = with_cache(system, request_messages(messages, pending), stable)
        kw = dict(base, system=sys_blocks, messages=msgs)
        return kw, request_bytes(kw)

    def estimate(self, base, system, events) -> int:
        return int(self.request(base, system, events)[1] / bytes_per_token(events))

    def needs(self, tokens: int) -> bool:
        return tokens > self.trigger * self.window

    def compact(self, base: dict, system: str, events: list[dict], why: str, tokens: int | None = None,
                limit: int | None = None) -> dict | None:
        """The `context` event fields that bring the request to target x window (x `limit`, the
        API's own count of the window, when it is smaller), or the smallest request found; None
        when nothing is left to compact. `tokens`: the API's count of the current request."""
        ratio = bytes_per_token(events)
        est = max(1, self.estimate(base, system, events))
        before = tokens if tokens is not None else est
        scale = max(1.0, before / est)            # the API counted more than estimated: trust it
        best = None
        keep = max(1, self.keep_turns)
        while True:
            cut = cut_before_turn(events, keep)
            for action in ("elide", "summarize"):
                if cut is None or not _advances(events, action, cut):
                    continue
                ev = {"type": "context", "seq": 1 << 60, "action": action, "upto_seq": cut}
                if action == "summarize":
                    ev["summary"] = digest(events, cut)
                after = int(self.request(base, system, events + [ev])[1] / ratio * scale)
                if best is None or after < best[1]:
                    best = (ev, after)
                if after <= self.target * min(self.window, limit or self.window):
                    return _fields(ev, before, after, keep, why)
            if keep == 1:
                break
            keep = max(1, keep // 2)
        return _fields(best[0], before, best[1], keep, why) if best else None


def _fields(ev: dict, before: int, after: int, keep: int, why: str) -> dict:
    out = {k: v for k, v in ev.items() if k not in ("type", "seq")}
    return dict(out, tokens_before=before, tokens_after=after, kept_turns=keep, reason=why)


def _advances(events, action, cut) -> bool:
    prev = [e.get("upto_seq", -1) for e in events if e.get("type") == "context" and
            (e.get("action") == action or e.get("action") == "summarize")]
    return cut > max(prev, default=-1)


def cut_before_turn(events: list[dict], keep: int) -> int | None:
    """The seq of the last conversation event before the `keep`-th last assistant turn (a turn
    starts at a kept assistant message), or None when there are not that many turns."""
    conv = conversation_events(events)
    starts = [i for i, e in enumerate(conv) if e["type"] == "message" and e["role"] == "assistant"
              and not e.get("dropped") and not e.get("continues")]
    if len(starts) <= keep:
        return None
    i = starts[-keep]
    return conv[i - 1]["seq"] if i > 0 else None


# ---- the digest ------------------------------------------------------------------------------------
def digest(events: list[dict], cut: int, max_chars: int = 6000) -> str:
    """What the turns up to `cut` did, from the trace: evaluations, files, questions, last words."""
    old = [e for e in events if e.get("seq", 0) <= cut]
    steps = sum(e.get("type") == "usage" for e in old)
    lines = [f"[Summary of the first {steps} steps, written by the harness from the campaign's trace so "
             "that the conversation fits the model's context; earlier tool outputs are in .kseek/outputs/ "
             "in the workspace.]"]
    evals = [e for e in old if e.get("type") == "evaluation"]
    if evals:
        lines.append("Evaluations (n: geomean, rows passed/total, goal):")
        for e in evals[-25:]:
            s = e.get("summary") or {}
            gm = f"{e['geomean']:.3f}x" if isinstance(e.get("geomean"), (int, float)) else "n/a"
            kind = "check only" if e.get("check_only") else ("partial" if e.get("filtered") else "full")
            lines.append(f"  {e.get('n')}: {gm}, {s.get('passed', '?')}/{s.get('scenarios', '?')} passed, "
                         f"{kind}, goal {'met' if e.get('met') else 'not met'}, version {str(e.get('kernel_sha256'))[:12]}")
        good = [e for e in evals if traces.passed_full(e)]
        if good:
            b = max(good, key=lambda e: e["geomean"])
            lines.append(f"Best full evaluation with every row passing: {b.get('n')} ({b['geomean']:.3f}x).")
    files: dict[str, int] = {}
    for c in traces.tool_calls(old):
        if c["name"] in ("write", "edit") and isinstance(c["input"].get("path"), str):
            files[c["input"]["path"]] = files.get(c["input"]["path"], 0) + 1
    if files:
        lines.append("Files written or edited (times): " + ", ".join(f"{k} ({v})" for k, v in sorted(files.items())))
    qs = [e.get("text", "") for e in old if e.get("type") == "question"]
    if qs:
        lines.append("Questions you were asked: " + " | ".join(q[:200] for q in qs[-6:]))
    said = [traces.text_of(e.get("content")) for e in conversation_events(old)
            if e["type"] == "message" and e["role"] == "assistant" and traces.text_of(e.get("content")).strip()]
    if said:
        lines.append("Your last words before this summary: " + said[-1].strip()[:800])
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[:max_chars - 20] + "\n[... digest cut]"
