"""A campaign's course in time: its span and idle gaps, branches and rollbacks, where it started and
how it ended, and what followed each question.

    span_and_idle     hours from the first event to the last, and the gaps of at least `min_gap_s`
                      with no tool call running (a person away, no session open): paper "of its
                      68.0 hours, 26.7 were an idle gap"
    branches          fork and rollback events (kernelseek campaign restore --fork/--rollback, or a
                      rewound Claude Code conversation): paper "Thirty-seven branches were opened ...
                      36 of them from that same step, and 3 human rollbacks discarded 117 steps"
    start_and_end     the first passed evaluation's geomean (paper "its 0.009x starting point"), the
                      best one's worst row and rows at parity (paper "the worst configuration sat
                      at 0.24x, 0 of the 26 configurations reached parity"), the steps after the
                      best (paper "stopped improving for the remaining 98 steps")
    question_effects  for each interrogative message of a person: the geomean before it, the best
                      before the next one, and how long that took (paper "the geomean went from
                      0.44x to 0.96x in four hours")
Steps are parent model calls (`usage` events not in a sub-agent). Only full evaluations of versions
that passed every row count as progress (traces.passed_full).
"""
from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from .concepts import interrogative
from .traces import passed_full, text_of

BRANCH = "branch"              # the trace event: action fork | rollback (see kernelseek.branching)


def _steps_before(events: list[dict], seq: int) -> int:
    return sum(1 for e in events if e.get("type") == "usage" and not e.get("sidechain") and e.get("seq", 0) < seq)


def steps(events: list[dict]) -> int:
    return sum(1 for e in events if e.get("type") == "usage" and not e.get("sidechain"))


def idle_gaps(events: list[dict], min_gap_s: float = 1800.0) -> list[tuple[float, float]]:
    """(t0, t1) of each gap of at least `min_gap_s` between consecutive events (in time order) while
    no tool call ran. A start or resume event closes calls a crashed session left open, and a gap
    ending at one is idle whatever was open."""
    timed = sorted((e for e in events if isinstance(e.get("t"), (int, float))), key=lambda e: (e["t"], e.get("seq", 0)))
    open_calls: set = set()
    gaps = []
    for a, b in zip(timed, timed[1:]):
        if a.get("type") in ("start", "resume"):
            open_calls.clear()
        if a.get("type") == "message" and a.get("role") == "assistant" and isinstance(a.get("content"), list):
            open_calls |= {x.get("id") for x in a["content"] if isinstance(x, dict) and x.get("type") == "tool_use"}
        elif a.get("type") == "tool_result":
            open_calls.discard(a.get("tool_use_id"))
        if b["t"] - a["t"] >= min_gap_s and (not open_calls or b.get("type") in ("start", "resume")):
            gaps.append((a["t"], b["t"]))
    return gaps


def span_and_idle(events: list[dict], min_gap_s: float = 1800.0) -> dict:
    """span_hours, idle_hours (the idle_gaps summed), idle_gaps (how many), longest_idle_hours."""
    ts = [e["t"] for e in events if isinstance(e.get("t"), (int, float))]
    if not ts:
        return {"span_hours": None, "idle_hours": None, "idle_gaps": 0, "longest_idle_hours": None}
    gaps = [b - a for a, b in idle_gaps(events, min_gap_s)]
    return {"span_hours": (max(ts) - min(ts)) / 3600, "idle_hours": sum(gaps) / 3600,
            "idle_gaps": len(gaps), "longest_idle_hours": max(gaps) / 3600 if gaps else 0.0}


def _best(events):
    ev = [e for e in events if passed_full(e)]
    return max(ev, key=lambda e: e["geomean"]) if ev else None


def branches(events: list[dict]) -> dict:
    """forks, rollbacks, human_rollbacks, steps_discarded (by the rollbacks), forks_from_best (forks
    from the evaluation that is the trace's best), most_forked_eval and how often it was forked."""
    evs = [e for e in events if e.get("type") == BRANCH]
    forks = [e for e in evs if e.get("action") == "fork"]
    rolls = [e for e in evs if e.get("action") == "rollback"]
    best = _best(events)
    by_from = Counter(str(e.get("from_eval")) for e in forks)
    top = by_from.most_common(1)[0] if by_from else (None, 0)
    return {"forks": len(forks), "rollbacks": len(rolls),
            "human_rollbacks": sum(e.get("by") == "human" for e in rolls),
            "steps_discarded": sum(int(e.get("discarded_steps") or 0) for e in rolls),
            "forks_from_best": sum(best is not None and str(e.get("from_eval")) == str(best.get("n")) for e in forks),
            "most_forked_eval": top[0], "most_forked_count": top[1]}


def start_and_end(events: list[dict]) -> dict:
    """start_geomean, best_geomean, best_worst_row, best_rows_at_parity, best_scenarios, steps,
    steps_after_best."""
    ev = [e for e in events if passed_full(e)]
    best = _best(events)
    s = (best or {}).get("summary") or {}
    total = steps(events)
    return {"start_geomean": ev[0]["geomean"] if ev else None, "best_geomean": best["geomean"] if best else None,
            "best_worst_row": (s.get("worst") or {}).get("speedup"), "best_rows_at_parity": s.get("at_parity"),
            "best_scenarios": s.get("scenarios"), "steps": total,
            "steps_after_best": total - _steps_before(events, best["seq"]) if best else None}


def question_effects(events: list[dict], authors=("human",)) -> pd.DataFrame:
    """One row per interrogative message of a person (sub-agents aside): seq, text, geomean_before
    (the latest passed full evaluation before it), best_after (the best one after it and before the
    next such message), hours_to_best_after."""
    qs = [e for e in events if e.get("type") == "message" and e.get("role") == "user" and e.get("author") in authors
          and not e.get("sidechain") and e.get("interrogative", interrogative(text_of(e.get("content"))))]
    full = [e for e in events if passed_full(e)]
    rows = []
    for i, q in enumerate(qs):
        end = qs[i + 1]["seq"] if i + 1 < len(qs) else float("inf")
        before = [e for e in full if e["seq"] < q["seq"]]
        after = [e for e in full if q["seq"] < e["seq"] < end]
        top = max(after, key=lambda e: e["geomean"]) if after else None
        rows.append({"seq": q["seq"], "text": text_of(q.get("content")).strip(),
                     "geomean_before": before[-1]["geomean"] if before else None,
                     "best_after": top["geomean"] if top else None,
                     "hours_to_best_after": (top["t"] - q["t"]) / 3600 if top and q.get("t") is not None else None})
    return pd.DataFrame(rows, columns=["seq", "text", "geomean_before", "best_after", "hours_to_best_after"])


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s or "").strip().lower()


def turning_point(events: list[dict], question: str) -> dict | None:
    """The question_effects row of the first message holding `question` (case and spacing aside)."""
    df = question_effects(events)
    q = _norm(question)
    for r in df.to_dict("records"):
        if q in _norm(r["text"]):
            return {k: None if isinstance(v, float) and v != v else v for k, v in r.items()}   # NaN: none
    return None
