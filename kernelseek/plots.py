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

from kernelseek.history import timeline as _timeline
from kernelseek.rows import as_rows, row_class

BELOW, ABOVE, BASE, FAIL, MOVED = "#c0392b", "#27ae60", "#7f8c8d", "#8e44ad", "#e67e22"
RUN_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22"]
SPEEDUP_LABEL = "speedup = baseline ms / our ms\n(per call; log scale; above 1: we are faster)"


# ---- labels shared by the figures -------------------------------------------------------------
def row_name(row, scenario: str) -> str:
    """A row's tick label: its grid row number and its scenario name (without the rNN_ prefix)."""
    if row is None or (isinstance(row, float) and math.isnan(row)):
        return scenario
    short = scenario[4:] if len(scenario) > 4 and scenario[0] == "r" and scenario[1:3].isdigit() and scenario[3] == "_" \
        else scenario
    return f"{int(row)} {short}"


def _label(r) -> str:
    return row_name(r.row, r.scenario)


def caption(meta: dict | None = None, run: str | None = None, rows: list | None = None) -> str:
    """One line naming what a figure shows: kernel, grid, baseline (with the libraries that won per
    row when it is `best`), run and GPU; parts that are unknown are left out."""
    meta = meta or {}
    parts = []
    if meta.get("kernel"):
        parts.append(f"kernel {Path(str(meta['kernel'])).name}")
    if meta.get("grid"):
        parts.append(f"grid {meta['grid']}")
    base = meta.get("baseline")
    used = sorted({r.baseline for r in rows or [] if getattr(r, "baseline", None)})
    if base or used:
        text = f"baseline {base or ', '.join(used)}"
        if base == "best" and used:
            text += f" (per row the fastest of: {', '.join(used)})"
        parts.append(text)
    if run:
        parts.append(f"run {run}")
    gpu = (meta.get("env") or {}).get("gpu") or meta.get("gpu")
    if gpu:
        parts.append(str(gpu))
    return " | ".join(parts)


def _titles(fig: Figure, ax, title: str, cap: str) -> None:
    """A bold title over the figure and, under it, the caption line naming kernel, baseline and run."""
    fig.suptitle(title, fontsize=11, fontweight="bold")
    if cap:
        ax.set_title(cap, fontsize=8, color="#333333")


NICE = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0, 2.5, 3.0, 4.0,
        5.0, 7.0, 10.0, 20.0, 50.0, 100.0)


def log_ticks(ax, lo: float, hi: float, suffix: str = "") -> None:
    """Plain-number ticks on a log y axis between lo and hi (no 2x10^0 labels), minor ticks off; ticks
    kept at least a twelfth of the axis apart (in log), walking out from 1."""
    gap = (math.log(hi) - math.log(lo)) / 12
    cands = [t for t in NICE if lo <= t <= hi]
    start = min(cands, key=lambda t: abs(math.log(t))) if cands else None
    ticks = [start] if start else []
    for side in (sorted(t for t in cands if t > start), sorted((t for t in cands if start and t < start), reverse=True)):
        last = start
        for t in side:
            if abs(math.log(t) - math.log(last)) >= gap:
                ticks.append(t)
                last = t
    ticks.sort()
    ax.set_yticks(ticks, [f"{t:g}{suffix}" for t in ticks])
    ax.minorticks_off()
    ax.set_ylim(lo, hi)


def _row_ticks(ax, labels: list[str], size: float = 7.5) -> None:
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=size)
    ax.set_xlim(-0.7, len(labels) - 0.3)


# ---- one run -----------------------------------------------------------------------------------
def speedup_bars(table: Any, title: str | None = None, meta: dict | None = None, run: str | None = None) -> Figure:
    """Per-row speedup on a log axis, the parity line at 1 and the geomean; failed and n/a rows
    marked with x, rows the harness flagged for review with a star.

    One bar per timed row, in table order, from 1 to the speedup; an untimed row gets an 'x' on
    the parity line. `meta` (a run's meta) and `run` (its name) go into the caption line.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    rows = as_rows(table)
    fig = Figure(figsize=(max(7.0, 0.32 * len(rows) + 2.5), 5.6), layout="constrained")
    ax = fig.add_subplot()
    sp = [r.speedup for r in rows if row_class(r) in ("below", "above")]
    lo, hi = min(sp + [1.0]) / 1.25, max(sp + [1.0]) * 1.25
    ax.set_yscale("log")
    for x, r in enumerate(rows):
        cls = row_class(r)
        if cls in ("below", "above"):
            # drawn from the parity line: down for slower rows, up for faster ones
            ax.bar(x, r.speedup - 1.0, bottom=1.0, color=BELOW if cls == "below" else ABOVE, width=0.8)
            if r.suspicious:
                ax.plot([x], [r.speedup * 1.08], marker="*", color=FAIL, markersize=10, linestyle="none")
        else:
            ax.plot([x], [1.0], marker="x", color=FAIL, markersize=9, mew=2, linestyle="none")
            ax.annotate("n/a" if cls == "n/a" else r.status, (x, 1.0), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=7, color=FAIL, rotation=90)
    ax.axhline(1.0, color="black", lw=1, ls="--")
    gm = math.exp(sum(math.log(v) for v in sp) / len(sp)) if sp else None
    if gm:
        ax.axhline(gm, color="#2c3e50", lw=1, ls=":")
    log_ticks(ax, lo, hi * (1.1 if any(r.suspicious for r in rows) else 1.0))
    _row_ticks(ax, [_label(r) for r in rows])
    ax.set_xlabel("scenario (grid row and name)")
    ax.set_ylabel(SPEEDUP_LABEL)
    handles = [Patch(color=ABOVE, label="faster than the baseline"), Patch(color=BELOW, label="slower than the baseline"),
               Line2D([], [], color="black", ls="--", label="parity (1)")]
    if gm:
        handles.append(Line2D([], [], color="#2c3e50", ls=":", label=f"geomean over timed rows ({gm:.3f})"))
    if any(row_class(r) in ("failed", "n/a") for r in rows):
        handles.append(Line2D([], [], marker="x", color=FAIL, mew=2, ls="none",
                              label="not timed: failed, or no usable baseline (n/a)"))
    if any(r.suspicious for r in rows):
        handles.append(Line2D([], [], marker="*", color=FAIL, markersize=10, ls="none",
                              label="FLAGGED: gain too large to trust unchecked\n(not met until reviewed)"))
    ax.legend(handles=handles, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _titles(fig, ax, title or "Speedup per row against the baseline", caption(meta, run, rows))
    return fig


def sol_bars(table: Any, ceilings: dict | None = None, meta: dict | None = None, title: str | None = None,
             run: str | None = None) -> Figure:
    """Fraction of the roofline bound reached per row: ours and the baseline side by side.

    `table` is a results table (with `ceilings`) or an already computed bounds.bounds_table.
    Two bars per row (a missing value draws an empty bar); each tick says which bound binds the row.
    """
    rows = None
    if isinstance(table, pd.DataFrame) and "sol_candidate" in table.columns:
        df = table
    else:
        rows = as_rows(table)
        from kernelseek.bounds import bounds_table
        if ceilings is None:
            raise ValueError("sol_bars needs the ceilings dict for a results table")
        df = bounds_table(rows, ceilings, meta)
    n = len(df)
    fig = Figure(figsize=(max(7.0, 0.4 * n + 2.5), 5.8), layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(n))

    def h(v):
        return 0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    kernel = Path(str((meta or {}).get("kernel") or "")).name
    bases = sorted({r.baseline for r in rows or [] if r.baseline})
    ours = f"ours ({kernel})" if kernel else "ours"
    theirs = f"baseline ({', '.join(bases)})" if bases else "baseline"
    ax.bar([x - 0.2 for x in xs], [h(v) for v in df["sol_candidate"]], width=0.4, color=ABOVE, label=ours)
    ax.bar([x + 0.2 for x in xs], [h(v) for v in df["sol_baseline"]], width=0.4, color=BASE, label=theirs)
    ax.axhline(1.0, color="black", lw=1, ls="--", label="1 = the bound from the measured ceilings\n(a bar above it beat the ceiling as measured)")
    _row_ticks(ax, [f"{row_name(r, s)} | {b}" for r, s, b in zip(df["row"], df["scenario"], df["binds"])])
    ax.set_xlabel("scenario (grid row and name) | the bound that binds it: compute (FLOPs at the matrix rate) "
                  "or memory (bytes at the read bandwidth)", fontsize=8)
    ax.set_ylabel("fraction of the roofline bound\n(bound ms / measured ms; 1 = at the ceiling)")
    ax.set_ylim(0, max(1.1, max([h(v) for v in df["sol_candidate"]] + [h(v) for v in df["sol_baseline"]]) * 1.08))
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    cap = caption(meta, run, rows)
    if ceilings:
        cap += f" | ceilings {ceilings.get('gpu', '?')}: bf16 {ceilings.get('bf16_tflops', 0):.0f} TFLOP/s, " \
               f"read {ceilings.get('read_gbps', 0):.0f} GB/s"
    _titles(fig, ax, title or "Fraction of the roofline bound reached per row", cap)
    return fig


def sol_compare(both: pd.DataFrame, before: str, after: str, meta: dict | None = None,
                title: str | None = None) -> Figure:
    """Two runs' fraction of the bound per row (columns sol_candidate_before/_after, row, scenario)."""
    fig = Figure(figsize=(max(7.0, 0.35 * len(both) + 2.5), 5.6), layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(both)))
    ax.bar([x - 0.2 for x in xs], both["sol_candidate_before"].fillna(0), width=0.4, color=BASE, label=f"before: {before}")
    ax.bar([x + 0.2 for x in xs], both["sol_candidate_after"].fillna(0), width=0.4, color=ABOVE, label=f"after: {after}")
    ax.axhline(1.0, color="black", lw=1, ls="--", label="the bound (1)")
    _row_ticks(ax, [row_name(r, s) for r, s in zip(both["row"], both["scenario"])])
    ax.set_xlabel("scenario (grid row and name)")
    ax.set_ylabel("fraction of the roofline bound\n(bound ms / measured ms)")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _titles(fig, ax, title or "Fraction of the roofline bound, before and after", caption(meta))
    return fig


# ---- many runs ---------------------------------------------------------------------------------
def timeline_plot(evals: Any, title: str | None = None, meta: dict | None = None) -> Figure:
    """Geometric mean and worst row per evaluation; `evals` as for triage.timeline, or its table."""
    tl = evals if isinstance(evals, pd.DataFrame) else _timeline(evals)
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    x = tl["eval"].tolist()
    gm, worst = tl["geomean"].astype(float).tolist(), tl["worst_speedup"].astype(float).tolist()
    ax.plot(x, gm, marker="o", color=ABOVE, label="geomean speedup over the timed rows")
    ax.plot(x, worst, marker="v", color=BELOW, label="worst row's speedup")
    ax.axhline(1.0, color="black", lw=1, ls="--", label="parity (1)")
    ax.set_yscale("log")
    vals = [v for v in gm + worst if v == v and v > 0]
    log_ticks(ax, min(vals + [1.0]) / 1.15, max(vals + [1.0]) * 1.15)
    ax.set_xticks(x, [str(v) for v in x])
    ax.set_xlabel("evaluation (in the order they ran)")
    ax.set_ylabel(SPEEDUP_LABEL)
    ax.legend(fontsize=8)
    _titles(fig, ax, title or "Campaign timeline: speedup per evaluation", caption(meta))
    return fig


def history_plot(hist: pd.DataFrame, title: str | None = None, meta: dict | None = None) -> Figure:
    """A kernel's versions (triage.history): the geomean speedup of each configuration group and of
    the whole grid, per version, against parity. Values below the axis floor are printed at the
    bottom with their series' name (a down arrow, explained in the legend)."""
    from matplotlib.lines import Line2D
    fig = Figure(figsize=(10.0, 5.4), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(len(hist)))
    groups = [c for c in hist.columns if c not in ("version", "runs", "geomean", "kernel_geomean", "worst")]
    for g in groups:
        ax.plot(x, hist[g].astype(float).tolist(), marker=".", lw=1.2, label=f"{g} (group geomean)")
    ax.plot(x, hist["geomean"].astype(float).tolist(), marker="o", lw=2.6, color="black", label="all rows (geomean)")
    ax.plot(x, hist["worst"].astype(float).tolist(), ls=":", marker="v", color=BELOW, label="worst row")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_yscale("log")
    # early versions far below parity would squash the rest: clip at `floor` and print their values
    cols = [*groups, "geomean", "worst"]
    vals = [(i, c, float(v)) for c in cols for i, v in enumerate(hist[c]) if v is not None and not pd.isna(v)]
    hi = max([v for _, _, v in vals] + [1.0]) * 1.08
    floor = 0.5
    lo = floor if any(v < floor for _, _, v in vals) else min([v for _, _, v in vals] + [1.0]) / 1.08
    names = {"geomean": "all rows", "worst": "worst row"}
    clipped = {i: sorted((v, names.get(c, c)) for j, c, v in vals if j == i and v < floor)
               for i in sorted({i for i, _, v in vals if v < floor})}
    if clipped:                        # a down arrow at the floor; the values go into the footnote
        ax.plot(list(clipped), [floor * 1.03] * len(clipped), ls="none", marker="$\u2193$", color="black",
                markersize=9)
    log_ticks(ax, lo, hi)
    ax.set_xticks(x, [f"{v}\n({n})" for v, n in zip(hist["version"], hist["runs"])], fontsize=8,
                  rotation=30 if len(x) > 12 else 0)   # long labels (v12peers) overlap upright
    note = "; ".join(f"{hist['version'].iloc[i]}: " + ", ".join(f"{c} {v:.2f}" for v, c in low)
                     for i, low in clipped.items())
    ax.set_xlabel("kernel version, in the order first run (number of runs)"
                  + (f"\n\u2193 values below {floor:g}, off the axis: {note}" if note else ""))
    ax.set_ylabel("speedup vs the baseline (log scale)\ngeomean over rows, median over the version's runs")
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="black", ls="--", label="parity (1)")]
    if clipped:
        handles.append(Line2D([], [], marker="$\u2193$", color="black", ls="none", markersize=9,
                              label=f"values below {floor:g}, off the axis\n(listed under the plot)"))
    ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    kernel = Path(str(hist.attrs.get("kernel") or (meta or {}).get("kernel") or "kernel")).name
    cap = caption({k: v for k, v in (meta or {}).items() if k in ("grid", "baseline", "env")})
    left = hist.attrs.get("variants_left_out")
    if left:
        cap += f" | {left} variant run(s) (build defines or kernel switches) left out"
    _titles(fig, ax, title or f"{kernel}: speedup per version", cap)
    return fig


def usage_plot(usage: pd.DataFrame, title: str | None = None) -> Figure:
    """A campaign's cost per model call (analytics.usage_by_step): prompt tokens by kind (cache
    read, cache write, uncached input) with the output tokens; the cached share of the prompt;
    dollars per step and in total (and, when known, what they would have been with no cache).
    Dotted lines mark the steps where the context policy compacted the conversation."""
    fig = Figure(figsize=(9.0, 8.0), layout="constrained")
    ax1, ax2, ax3 = fig.subplots(3, 1, sharex=True)
    x = usage["step"].tolist()
    k = 1e-3
    read = (usage["cache_read_input_tokens"] * k).tolist()
    write = (usage["cache_creation_input_tokens"] * k).tolist()
    fresh = (usage["input_tokens"] * k).tolist()
    ax1.stackplot(x, read, write, fresh, colors=("#2e86c1", "#f5b041", "#c0392b"),
                  labels=("cache read", "cache write", "input (uncached)"))
    ax1.plot(x, (usage["output_tokens"] * k).tolist(), color="black", lw=1, label="output")
    ax1.set_ylabel("tokens per step (thousands)")
    ax1.legend(fontsize=7, loc="upper left")
    ax2.plot(x, (usage["cached_share"] * 100).tolist(), color="#2e86c1", lw=1.2)
    ax2.set_ylim(0, 102)
    ax2.set_ylabel("prompt read from cache (%)")
    ax3.bar(x, usage["usd"].tolist(), color="#7f8c8d", width=1.0, label="per step")
    ax3.set_ylabel("$ per step")
    tot = ax3.twinx()
    tot.plot(x, usage["cumulative_usd"].tolist(), color="black", lw=1.6, label="total")
    if "cumulative_uncached_usd" in usage:
        tot.plot(x, usage["cumulative_uncached_usd"].tolist(), color=BELOW, lw=1.2, ls="--",
                 label="total with no prompt cache")
    tot.set_ylabel("$ total")
    tot.legend(fontsize=7, loc="upper left")
    ax3.set_xlabel("model call (step)")
    for s in usage.attrs.get("compaction_steps", []):
        for ax in (ax1, ax2, ax3):
            ax.axvline(s, color="black", ls=":", lw=0.8)
        ax1.annotate("compaction", (s, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10),
                     textcoords="offset points", fontsize=7)
    ax1.set_title(title or "tokens, cache and dollars per step", fontsize=10)
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
    ax.set_xlabel("SASS instruction family")
    ax.set_ylabel("static instruction count\n(instructions in the binary, not executed)")
    ax.set_title(title or "SASS instruction mix per build")
    ax.legend(fontsize=8, title="build", title_fontsize=8)
    return fig


def save_png(fig: Figure, out, dpi: int = 110) -> None:
    """fig laid out and written to `out` as a PNG, the path printed (the tools' figures under docs/)."""
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    print(f"wrote {out}")
