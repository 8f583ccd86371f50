"""The four arms of the experiment: what, besides the harness and the goal, reaches the agent.

    bare      nothing: the harness and the goal
    bank      the triggers watch the campaign; at each moment a bank question is put in the inbox
              (source "bank") and delivered as a user message at the agent's next turn
    human     questions a person puts in the inbox (the console, `kernelseek ask RUN "..."`)
    equipped  each step's prompt carries a briefing (agent/equipped.py): profile, bottleneck,
              one menu optimization, instruction-mix change, BM25 passages, notes, recent steps
Before each model call the loop calls `arm.observe(loop)` (which may fire questions or return
injections) and then delivers the inbox lines whose source the arm accepts (`inbox_sources`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..traces import text_of


@dataclass
class Injection:
    text: str
    author: str                     # bank | human | equipped
    meta: dict = field(default_factory=dict)


class Arm:
    name = "bare"
    inbox_sources: frozenset | None = frozenset()   # None: every source

    def __init__(self, cfg, paths):
        self.cfg, self.paths = cfg, paths

    def accepts(self, source: str) -> bool:
        return self.inbox_sources is None or source in self.inbox_sources

    def restore(self, events: list[dict]) -> None:
        """Rebuild state from the trace (on resume)."""

    def observe(self, loop) -> list[Injection]:
        return []


class Bare(Arm):
    name = "bare"


class Human(Arm):
    name = "human"
    inbox_sources = None


def full_evals(paths, cfg) -> list:
    """Run directories of the full, timed evaluations (what the triggers and the goal look at)."""
    from ..store import read_meta
    out = []
    for d in paths.eval_dirs():
        meta = read_meta(d)
        if not meta.get("check_only") and meta.get("scenarios_filter") == cfg.scenarios:
            out.append(d)
    return out


class Bank(Arm):
    """The questioner: triggers over the campaign's history, questions from the bank."""
    name = "bank"
    inbox_sources = frozenset({"bank"})

    def __init__(self, cfg, paths, entries=None):
        super().__init__(cfg, paths)
        self.entries = entries
        self.fired: set[str] = set()
        self.asked: list[str] = []

    def restore(self, events):
        for ev in events:
            if ev.get("type") == "question" and ev.get("source") == "bank":
                self.fired.add(ev.get("key", ""))
                if ev.get("bank_id"):
                    self.asked.append(ev["bank_id"])

    def history(self, events):
        from ..triggers import Evaluation, History, Message
        evals = [Evaluation.from_run(d) for d in full_evals(self.paths, self.cfg)]
        msgs = [Message("assistant" if ev.get("role") == "assistant" else "user", text_of(ev.get("content")),
                        ev.get("t") or 0.0)
                for ev in events if ev.get("type") == "message" and text_of(ev.get("content")).strip()]
        return History(evals, msgs)

    def key(self, m, h) -> str:
        n = len([e for e in h.evaluations if e.geomean is not None])
        if m.kind == "start":
            return "start"
        if m.kind == "plateau":
            return f"plateau@{n // max(1, self.cfg.plateau_evals)}"
        if m.kind == "suspicious_gain":   # a flag asks once while its signature holds (review.py)
            sig = m.evidence.get("signature")
            return f"suspicious_gain:{sig}" if sig else f"suspicious_gain@{len(h.evaluations)}"
        return f"{m.kind}@{m.evidence.get('time')}"

    def observe(self, loop):
        from .. import inbox
        from ..bank import select
        from ..results import load
        from ..triggers import detect
        h = self.history(loop.events)
        moments = detect(h, n=self.cfg.plateau_evals, minutes=self.cfg.plateau_minutes)
        evals = full_evals(self.paths, self.cfg)
        rows, meta = load(evals[-1]) if evals else ([], {})
        for m in moments:
            k = self.key(m, h)
            if k in self.fired:
                continue
            kw = dict(meta=meta, asked=self.asked, prefer_groups=m.prefer_groups,
                      seed=self.cfg.seed + self.cfg.replicate, entries=self.entries)
            q = select(m.kind, rows, **kw) or select(m.kind, rows, allow_repeat=True, **kw)
            self.fired.add(k)
            if q is None:
                loop.emit("note", text=f"moment {m.kind} fired but the bank has no question for it", key=k)
                continue
            rec = inbox.ask(self.paths.root, q.text, source="bank", bank_id=q.id, moment=m.kind)
            loop.emit("question", moment=m.kind, reason=m.reason, bank_id=q.id, group=q.group, layer=q.layer,
                      text=q.text, source="bank", key=k, inbox_line=rec["line"])
            self.asked.append(q.id)
            break                        # one question at a time
        return []


class Equipped(Arm):
    """A briefing at the start and after each new full evaluation."""
    name = "equipped"

    def __init__(self, cfg, paths):
        super().__init__(cfg, paths)
        from .equipped import Equipment
        self.kit = Equipment(cfg, paths)
        self.tried: list[str] = []
        self.briefed_after = -2          # evaluation count at the last briefing

    def restore(self, events):
        for ev in events:
            if ev.get("type") == "message" and ev.get("author") == "equipped":
                if ev.get("optimization"):
                    self.tried.append(ev["optimization"])
                self.briefed_after = ev.get("after_evals", self.briefed_after)

    def observe(self, loop):
        evs = [e for e in loop.events if e.get("type") == "evaluation"]
        full = [e for e in evs if not e.get("filtered") and not e.get("check_only")]
        if len(full) == self.briefed_after:
            return []
        # annotate each evaluation with the optimization briefed before it, for the memory
        tried_at, cur = {}, None
        for e in loop.events:
            if e.get("type") == "message" and e.get("author") == "equipped":
                cur = e.get("optimization")
            elif e.get("type") == "evaluation":
                tried_at[e["n"]] = cur
        memory = [dict(e, tried=tried_at.get(e["n"])) for e in evs]
        text, info = self.kit.bundle(memory, self.tried)
        self.tried.append(info["optimization"])
        self.briefed_after = len(full)
        return [Injection(text, "equipped", dict(info, after_evals=len(full)))]


def make_arm(cfg, paths) -> Arm:
    return {"bare": Bare, "bank": Bank, "human": Human, "equipped": Equipped}[cfg.arm](cfg, paths)
