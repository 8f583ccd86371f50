"""Which question groups to ask from first at a moment, from the moment's own evidence.

`triggers.detect` passes every moment through `aim`; `bank.select(prefer_groups=...)` then asks
from those groups first. The rules (docs/questioner_bench.md, change 1, says which benchmark
situations they were written for):
- a completion claim asks why the goal is met (agent process), then where the gap is (gap triage);
  one that rests on correctness ("40 of 40 correct") asks whether the grid covers the operator's
  use (scenario coverage) first;
- a claimed limit is challenged first, then located (gap triage);
- at the start and at a plateau, a concentrated loss (a few rows carry most of the log deficit)
  asks where the gap is; a loss spread over every row asks about the design and the bound.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

TOP = 0.2           # the worst fifth of the rows ...
SHARE = 0.5         # ... carrying at least half of the log deficit: a concentrated loss

_COMPLETION = re.compile(r"\b(goal|target|task|objective|milestone\s*\w*)\b.{0,40}\b(met|achieved|reached|"
                         r"complete|completed|done|accomplished)\b|\b(completes|concludes|wraps up)\b|"
                         r"\b(done|finished|ready)\b", re.I)
_CORRECT = re.compile(r"\b(correct|correctness|pass(es|ed|ing)?|all \d+ (of \d+ )?scenarios)\b", re.I)

CLAIM_LIMIT = ("challenge a limit", "gap triage", "agent process")
CLAIM_DONE = ("agent process", "gap triage", "scenario coverage")
CLAIM_DONE_CORRECT = ("scenario coverage", "agent process", "gap triage")
LOSS_CONCENTRATED = ("gap triage", "bound differencing")
LOSS_SPREAD = ("strategy options", "bound differencing", "gap triage")


def concentration(speedups: dict) -> float | None:
    """Share of the log deficit (sum of -ln x over rows below parity) carried by the worst fifth
    of the timed rows; None when no row is below parity."""
    xs = sorted(x for x in speedups.values() if x is not None and x > 0)
    deficits = [-math.log(x) for x in xs if x < 1.0]
    total = sum(deficits)
    if not xs or total <= 0:
        return None
    k = max(1, math.ceil(TOP * len(xs)))
    return sum(deficits[:k]) / total


def _latest_table(h) -> dict:
    for e in reversed(h.evaluations):
        if e.speedups:
            return e.speedups
    return {}


def aim(moment, h):
    """`moment` with `prefer_groups` set from its evidence and the history `h`."""
    if moment.kind == "limit_claim":
        s = moment.evidence.get("sentence", "")
        if _COMPLETION.search(s):
            groups = CLAIM_DONE_CORRECT if _CORRECT.search(s) else CLAIM_DONE
        else:
            groups = CLAIM_LIMIT
        return replace(moment, prefer_groups=groups)
    if moment.kind in ("start", "plateau"):
        c = concentration(_latest_table(h))
        if c is None:
            return moment
        groups = LOSS_CONCENTRATED if c >= SHARE else LOSS_SPREAD
        return replace(moment, prefer_groups=groups,
                       evidence={**moment.evidence, "loss_concentration": round(c, 3)})
    return moment
