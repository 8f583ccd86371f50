"""Results rows as the analyses see them: rows from any form of table, each row's class (failed,
n/a, below or above parity), and the log-geomean deficit over a table (defined in triage.py).

Shared by triage.py (one run), compare.py (two runs), history.py (a kernel's versions, a campaign),
bounds.py and plots.py, so none of them imports another for these basics.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from kernelseek import results
from kernelseek.results import Row


def as_rows(table: Any) -> list[Row]:
    """Rows from a list of Row, a list of dicts, a results DataFrame (results.to_frame) or a run dir."""
    if isinstance(table, (str, Path)):
        return results.load(table)[0]
    if isinstance(table, pd.DataFrame):
        out = []
        for rec in table.to_dict("records"):
            feats = {k[2:]: v for k, v in rec.items() if k.startswith("f_") and not _missing(v)}
            d = {k: (None if _missing(v) else v) for k, v in rec.items() if not k.startswith("f_")}
            d["features"] = feats
            out.append(Row.from_dict(d))
        return out
    return [r if isinstance(r, Row) else Row.from_dict(r) for r in table]


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def is_timed(r: Row) -> bool:
    """A passed row with a positive, finite speedup: the rows the geometric mean is taken over."""
    return r.status == "passed" and r.speedup is not None and math.isfinite(r.speedup) and r.speedup > 0


def row_class(r: Row) -> str:
    """'failed' (any status but passed), 'n/a' (passed, no usable baseline), 'below' or 'above'."""
    if r.status != "passed":
        return "failed"
    if not is_timed(r):
        return "n/a"
    return "below" if r.speedup < 1.0 else "above"


def deficit_summary(rows: Iterable[Row] | Any) -> dict[str, Any]:
    """N timed, deficit, surplus, geomean = exp(surplus - deficit), counts per class."""
    rows = as_rows(rows)
    timed = [r for r in rows if is_timed(r)]
    n = len(timed)
    deficit = -sum(math.log(r.speedup) for r in timed if r.speedup < 1) / n if n else 0.0
    surplus = sum(math.log(r.speedup) for r in timed if r.speedup >= 1) / n if n else 0.0
    classes = [row_class(r) for r in rows]
    return {
        "rows": len(rows), "timed": n, "deficit": deficit, "surplus": surplus,
        "geomean": math.exp(surplus - deficit) if n else None,
        "below": classes.count("below"), "above": classes.count("above"),
        "failed": classes.count("failed"), "na": classes.count("n/a"),
    }
