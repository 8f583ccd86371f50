"""Gap triage: which rows and feature groups bring the geometric-mean speedup down.

The log-geomean deficit. Over the N timed rows (status passed, a positive speedup s_i):
    log G   = (1/N) * sum_i log(s_i)                       (G = geometric-mean speedup)
    deficit = -(1/N) * sum_{i: s_i < 1} log(s_i)   >= 0    (rows below parity)
    surplus =  (1/N) * sum_{i: s_i >= 1} log(s_i)  >= 0    (rows at or above parity)
    G       = exp(surplus - deficit)
A below-parity row's share is -log(s_i)/N; the shares sum to the deficit, and bringing that row
to parity alone multiplies G by exp(share). An above-parity row's surplus is log(s_i)/N.
Failed, errored, refused rows and rows without a usable baseline (n/a) are not timed; they are
listed first, with their reasons. Groups sum the shares of their rows (same N), so the groups of
one feature split the deficit exactly.

    kernelseek triage RUN_DIR [--compare RUN_DIR2] [--noise 0.03] [--plot out.png]
    kernelseek triage RUN_1 --repeat RUN_2 [RUN_3 ...]     (consecutive runs of one kernel)

Two runs compared, repeatability: compare.py. A kernel's versions, a campaign's timeline:
history.py. Their names stay importable from here (`triage.compare`, `triage.history`, ...), as
notebooks and tests use them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd

from kernelseek.compare import (DEFAULT_NOISE, REPEAT_TOLERANCE, compare, format_compare,  # noqa: F401
                                format_repeatability, p10_speedups, repeatability)
from kernelseek.history import (HARNESS_ENV, campaign_evals, config_group, format_history, is_variant, same_kernel,  # noqa: F401
                                history, timeline, version_label)
from kernelseek.results import Row
from kernelseek.rows import as_rows, deficit_summary, is_timed, row_class  # noqa: F401


def _reason(r: Row) -> str:
    cls = row_class(r)
    if cls == "failed":
        return f"{r.status}: {r.reason}" if r.reason else r.status
    if cls == "n/a":
        return r.baseline_reason or f"baseline {r.baseline_status}"
    return ""


# ---- one run -----------------------------------------------------------------------------------
def row_table(rows: Iterable[Row] | Any) -> pd.DataFrame:
    """One line per row: failures and n/a first, then below parity by share, then surplus."""
    rows = as_rows(rows)
    n = sum(is_timed(r) for r in rows)
    recs = []
    for r in rows:
        cls = row_class(r)
        logs = math.log(r.speedup) if cls in ("below", "above") else float("nan")
        share = -logs / n if cls == "below" else 0.0
        recs.append({
            "scenario": r.scenario, "row": r.row, "class": cls, "status": r.status,
            "speedup": r.speedup if cls in ("below", "above") else float("nan"),
            "time_ms": r.time_ms, "baseline_ms": r.baseline_ms, "baseline": r.baseline,
            "log_speedup": logs,
            "share": share,                                     # of the deficit, in log units
            "surplus": logs / n if cls == "above" else 0.0,
            "geomean_x_if_parity": math.exp(share),             # G multiplies by this at parity
            "reason": _reason(r),
        })
    df = pd.DataFrame(recs, columns=["scenario", "row", "class", "status", "speedup", "time_ms",
                                     "baseline_ms", "baseline", "log_speedup", "share", "surplus",
                                     "geomean_x_if_parity", "reason"])
    order = {"failed": 0, "n/a": 1, "below": 2, "above": 3}
    df["_o"] = df["class"].map(order)
    df["_k"] = df["surplus"] - df["share"]   # below: largest share first; above: nearest parity first
    df = df.sort_values(["_o", "_k"], kind="stable").drop(columns=["_o", "_k"]).reset_index(drop=True)
    return df


def group_table(rows: Iterable[Row] | Any, features: list[str] | None = None) -> pd.DataFrame:
    """Per (feature, value): rows, timed, below, failed/n/a, group geomean, deficit and surplus.

    `deficit` sums the shares of the group's below-parity rows (the run's N), so the values of one
    feature split the run's deficit. `excess` = (group's fraction of the deficit) / (group's
    fraction of timed rows): above 1, the group carries more than its weight.
    """
    rows = as_rows(rows)
    table = row_table(rows)
    by_name = {r.scenario: r for r in rows}
    total = deficit_summary(rows)
    keys = features or sorted({k for r in rows for k in (r.features or {})})
    recs = []
    for key in keys:
        vals: dict[str, list[int]] = {}
        for i, name in enumerate(table["scenario"]):
            v = (by_name[name].features or {}).get(key)
            vals.setdefault(_label(v), []).append(i)
        for v, idx in vals.items():
            sub = table.iloc[idx]
            timed = sub[sub["class"].isin(["below", "above"])]
            d = float(sub["share"].sum())
            frac_d = d / total["deficit"] if total["deficit"] > 0 else 0.0
            frac_n = len(timed) / total["timed"] if total["timed"] else 0.0
            recs.append({
                "feature": key, "value": v, "rows": len(sub), "timed": len(timed),
                "below": int((sub["class"] == "below").sum()),
                "failed": int((sub["class"] == "failed").sum()), "na": int((sub["class"] == "n/a").sum()),
                "geomean": math.exp(timed["log_speedup"].mean()) if len(timed) else float("nan"),
                "worst": float(timed["speedup"].min()) if len(timed) else float("nan"),
                "deficit": d, "surplus": float(sub["surplus"].sum()),
                "deficit_frac": frac_d, "excess": frac_d / frac_n if frac_n else float("nan"),
            })
    df = pd.DataFrame(recs, columns=["feature", "value", "rows", "timed", "below", "failed", "na",
                                     "geomean", "worst", "deficit", "surplus", "deficit_frac", "excess"])
    return df.sort_values(["feature", "deficit"], ascending=[True, False], kind="stable").reset_index(drop=True)


def _label(v) -> str:
    return "-" if v is None else str(v)


@dataclass
class Triage:
    """The triage of one run: rows, groups, the summary, and a text report."""
    rows: pd.DataFrame
    groups: pd.DataFrame
    summary: dict

    def text(self, top_groups: int = 8) -> str:
        return format_report(self, top_groups)


def triage(table: Any, features: list[str] | None = None) -> Triage:
    """Triage a results table (list of Row, DataFrame or run directory)."""
    rows = as_rows(table)
    return Triage(row_table(rows), group_table(rows, features), deficit_summary(rows))


def format_report(t: Triage, top_groups: int = 8) -> str:
    s = t.summary
    gm = f"{s['geomean']:.3f}x" if s["geomean"] else "n/a"
    out = [f"timed {s['timed']}/{s['rows']}  geomean {gm}  = exp(surplus {s['surplus']:.4f} - deficit "
           f"{s['deficit']:.4f})  below parity {s['below']}  failed {s['failed']}  n/a {s['na']}"]
    bad = t.rows[t.rows["class"].isin(["failed", "n/a"])]
    if len(bad):
        out.append("\nnot timed (fix these first):")
        out += [f"  {r.scenario[:40]:40} {'n/a: ' if r['class'] == 'n/a' else ''}{r.reason[:80]}" for _, r in bad.iterrows()]
    below = t.rows[t.rows["class"] == "below"]
    if len(below):
        out.append("\nbelow parity (share of the deficit; geomean gain if brought to parity):")
        for _, r in below.iterrows():
            pct = r.share / s["deficit"] * 100 if s["deficit"] else 0.0
            out.append(f"  {r.scenario[:40]:40} {r.speedup:7.3f}x  share {r.share:.4f} ({pct:4.1f}%)"
                       f"  -> geomean x{r.geomean_x_if_parity:.3f}")
    above = t.rows[t.rows["class"] == "above"]
    if len(above):
        out.append("\nat or above parity (surplus):")
        out += [f"  {r.scenario[:40]:40} {r.speedup:7.3f}x  surplus {r.surplus:.4f}" for _, r in above.iterrows()]
    g = t.groups[t.groups["excess"] > 1].sort_values("excess", ascending=False).head(top_groups)
    if len(g):
        out.append("\ngroups carrying more than their weight (excess = deficit fraction / row fraction):")
        for _, r in g.iterrows():
            out.append(f"  {f'{r.feature}={r.value}':24} timed {r.timed:3d}  geomean {r.geomean:6.3f}x  "
                       f"deficit {r.deficit:.4f} ({r.deficit_frac * 100:4.1f}%)  excess {r.excess:.2f}")
    return "\n".join(out)
