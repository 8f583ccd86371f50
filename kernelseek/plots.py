"""Figures for triage, bounds, campaigns and instruction mixes (matplotlib, no pyplot state).

Each function takes a table and returns a `matplotlib.figure.Figure`; save it with
`fig.savefig("out.png")`, or let a notebook display it.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from kernelseek.compare import REPEAT_TOLERANCE, compare
from kernelseek.history import timeline as _timeline
from kernelseek.rows import as_rows, is_timed, row_class

BELOW, ABOVE, BASE, FAIL = "#c0392b", "#27ae60", "#7f8c8d", "#8e44ad"


def _label(r) -> str:
    return str(r.row) if r.row is not None else r.scenario[:18]


def speedup_bars(table: Any, title: str | None = None) -> Figure:
    """Per-row speedup on a log axis, the parity line at 1; failed and n/a rows marked with x.

    One bar per timed row, in table order, from 1 to the speedup; an untimed row gets an 'x' on
    the parity line.
    """
    rows = as_rows(table)
    fig = Figure(figsize=(max(6.0, 0.35 * len(rows) + 2), 4.0), layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    for x, r in zip(xs, rows):
        cls = row_class(r)
        if cls in ("below", "above"):
            # drawn from the parity line: down for slower rows, up for faster ones
            ax.bar(x, r.speedup - 1.0, bottom=1.0, color=BELOW if cls == "below" else ABOVE, width=0.8)
        else:
            ax.plot([x], [1.0], marker="x", color=FAIL, markersize=9, mew=2, linestyle="none")
            ax.annotate("n/a" if cls == "n/a" else r.status, (x, 1.0), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=7, color=FAIL, rotation=90)
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    sp = [r.speedup for r in rows if row_class(r) in ("below", "above")]
    if sp:
        lo, hi = min(sp + [1.0]), max(sp + [1.0])
        ax.set_ylim(lo / 1.3, hi * 1.3)
    ax.set_xticks(xs, [_label(r) for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("speedup vs baseline (log)")
    ax.set_title(title or "per-row speedup (below 1: slower than the baseline)")
    return fig


def repeat_plot(runs: list[tuple[str, Any]], tol: float = REPEAT_TOLERANCE, title: str | None = None) -> Figure:
    """Consecutive runs of one kernel: each row's speedup per run (one marker color per run, a grey
    line from lowest to highest); rows that moved more than `tol` between two consecutive runs are
    shaded, red where the baseline moved and ours did not, orange otherwise."""
    names = [n for n, _ in runs]
    tables = [as_rows(t) for _, t in runs]
    order = [r.scenario for r in tables[0]]
    labels = {r.scenario: _label(r) for r in tables[0]}
    by = [{r.scenario: r for r in t} for t in tables]
    fig = Figure(figsize=(max(6.0, 0.35 * len(order) + 2), 4.0), layout="constrained")
    ax = fig.add_subplot()
    moved: dict[str, str] = {}
    for ta, tb in zip(tables, tables[1:]):
        for c in compare(ta, tb, noise=tol).itertuples():
            if c.moved:
                base_only = str(c.cause).startswith("baseline")
                moved[c.scenario] = "base" if base_only and moved.get(c.scenario) != "ours" else "ours"
    for x, name in enumerate(order):
        if name in moved:
            ax.axvspan(x - 0.45, x + 0.45, color=BELOW if moved[name] == "base" else "#e67e22", alpha=0.18, lw=0)
        sp = [b[name].speedup for b in by if name in b and is_timed(b[name])]
        if sp:
            ax.plot([x, x], [min(sp), max(sp)], color=BASE, lw=1.5)
    colors = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22"]
    for i, (n, b) in enumerate(zip(names, by)):
        pts = [(x, b[s].speedup) for x, s in enumerate(order) if s in b and is_timed(b[s])]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=4, ls="none", color=colors[i % len(colors)], label=n[-40:])
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter
    for axis in (ax.yaxis,):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if round(v * 10) % 2 == 0 else ""))
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_xticks(range(len(order)), [labels[s] for s in order], rotation=90, fontsize=7)
    ax.set_ylabel("speedup vs baseline (log)")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(title or f"repeatability: shaded rows moved > {tol:.0%} between consecutive runs "
                          "(red: only the baseline moved)", fontsize=9)
    return fig


def sol_bars(table: Any, ceilings: dict | None = None, meta: dict | None = None, title: str | None = None) -> Figure:
    """Fraction of the roofline bound reached per row: candidate and baseline side by side.

    `table` is a results table (with `ceilings`) or an already computed bounds.bounds_table.
    Two bars per row (a missing value draws an empty bar).
    """
    if isinstance(table, pd.DataFrame) and "sol_candidate" in table.columns:
        df = table
    else:
        from kernelseek.bounds import bounds_table
        if ceilings is None:
            raise ValueError("sol_bars needs the ceilings dict for a results table")
        df = bounds_table(table, ceilings, meta)
    n = len(df)
    fig = Figure(figsize=(max(6.0, 0.45 * n + 2), 4.0), layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(n))

    def h(v):
        return 0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    ax.bar([x - 0.2 for x in xs], [h(v) for v in df["sol_candidate"]], width=0.4, color=ABOVE, label="candidate")
    ax.bar([x + 0.2 for x in xs], [h(v) for v in df["sol_baseline"]], width=0.4, color=BASE, label="baseline")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    labels = [str(int(r)) if r is not None and not pd.isna(r) else s[:18] for r, s in zip(df["row"], df["scenario"])]
    ax.set_xticks(xs, [f"{lab} {b[0]}" for lab, b in zip(labels, df["binds"])], rotation=90, fontsize=7)
    ax.set_ylabel("fraction of the bound (speed of light)")
    ax.set_title(title or "fraction of the roofline bound reached (c: compute-, m: memory-bound)", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def timeline_plot(evals: Any, title: str | None = None) -> Figure:
    """Geometric mean and worst row per evaluation; `evals` as for triage.timeline, or its table."""
    tl = evals if isinstance(evals, pd.DataFrame) else _timeline(evals)
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    x = tl["eval"].tolist()
    ax.plot(x, tl["geomean"].astype(float).tolist(), marker="o", color=ABOVE, label="geomean speedup")
    ax.plot(x, tl["worst_speedup"].astype(float).tolist(), marker="v", color=BELOW, label="worst row")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_yscale("log")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("speedup vs baseline (log)")
    ax.set_title(title or "campaign timeline")
    ax.legend(fontsize=8)
    return fig


def history_plot(hist: pd.DataFrame, title: str | None = None) -> Figure:
    """A kernel's versions (triage.history): the geomean speedup of each configuration group and of
    the whole grid, per version, against parity."""
    fig = Figure(figsize=(9.0, 4.6), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(len(hist)))
    groups = [c for c in hist.columns if c not in ("version", "runs", "geomean", "kernel_geomean", "worst")]
    for g in groups:
        ax.plot(x, hist[g].astype(float).tolist(), marker=".", lw=1.2, label=g)
    ax.plot(x, hist["geomean"].astype(float).tolist(), marker="o", lw=2.6, color="black", label="all rows (geomean)")
    ax.plot(x, hist["worst"].astype(float).tolist(), ls=":", marker="v", color=BELOW, label="worst row")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_yscale("log")
    # early versions far below parity would squash the rest: clip at `floor` and print their values
    cols = [*groups, "geomean", "worst"]
    vals = [(i, float(v)) for c in cols for i, v in enumerate(hist[c]) if v is not None and not pd.isna(v)]
    hi = max([v for _, v in vals] + [1.0]) * 1.08
    floor = 0.5
    if any(v < floor for _, v in vals):
        ax.set_ylim(floor, hi)
        for i in sorted({i for i, v in vals if v < floor}):
            low = sorted(v for j, v in vals if j == i and v < floor)
            ax.annotate("\n".join(f"\u2193{v:.2f}" for v in low), (i, floor), xytext=(0, 3),
                        textcoords="offset points", fontsize=6, ha="center", va="bottom")
    lo = ax.get_ylim()[0]
    ticks = [t for t in (0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.4, 1.7, 2.0, 3.0) if lo <= t <= hi]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xticks(x, [f"{v}\n({n})" for v, n in zip(hist["version"], hist["runs"])], fontsize=8)
    ax.set_xlabel("version (runs)")
    ax.set_ylabel("speedup vs best baseline (log; median over runs)")
    ax.set_title(title or f"{Path(str(hist.attrs.get('kernel') or 'kernel')).name}: speedup per version", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def mix_plot(mixes: dict[str, Counter], families: list[str] | None = None, title: str | None = None) -> Figure:
    """Instruction counts per family, one bar per (family, build): label -> sass.instruction_mix."""
    from kernelseek.sass import FAMILIES
    fams = list(families or FAMILIES)
    labels = list(mixes)
    k = max(1, len(labels))
    w = 0.8 / k
    fig = Figure(figsize=(max(6.0, 0.6 * len(fams) + 2), 4.0), layout="constrained")
    ax = fig.add_subplot()
    for j, lab in enumerate(labels):
        ax.bar([i - 0.4 + w * (j + 0.5) for i in range(len(fams))], [mixes[lab].get(f, 0) for f in fams],
               width=w, label=lab)
    ax.set_xticks(range(len(fams)), fams, rotation=45, fontsize=8)
    ax.set_ylabel("static instruction count")
    ax.set_title(title or "SASS instruction mix")
    ax.legend(fontsize=8)
    return fig
