"""The repeatability figure: each row's speedup in consecutive runs of one kernel source, per call
and, when the runs timed CUDA-graph replay, on the graph measure in a second panel (the measure that
judges host-bound rows). Rows that moved more than the tolerance are shaded, by which side moved."""
from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from kernelseek import plots as P
from kernelseek.compare import REPEAT_TOLERANCE, compare, repeatability, symmetric_move
from kernelseek.rows import as_rows, is_timed

GRAPH_LABEL = "speedup in CUDA-graph replay\n(log scale; above 1: we are faster)"


def _moved_per_call(tables: list, tol: float) -> dict[str, str]:
    """Scenario -> "base" (only the baseline's time moved) or "ours", for rows whose per-call speedup
    moved more than tol between two consecutive runs (compare's rule and cause)."""
    moved: dict[str, str] = {}
    for ta, tb in zip(tables, tables[1:]):
        for c in compare(ta, tb, noise=tol).itertuples():
            if c.moved:
                base_only = str(c.cause).startswith("baseline")
                moved[c.scenario] = "base" if base_only and moved.get(c.scenario) != "ours" else "ours"
    return moved


def _moved_graph(tables: list, tol: float) -> dict[str, str]:
    """The same on the graph measure: the rows repeatability() counts over tol there; "ours" when our
    own graph time moved by more than tol too (the same |log| rule, compare.symmetric_move)."""
    moved: dict[str, str] = {}
    for rep, ta, tb in zip(repeatability(list(enumerate(tables)), tol).itertuples(), tables, tables[1:]):
        a, b = {r.scenario: r for r in ta}, {r.scenario: r for r in tb}
        for name, _ in rep.graph_over:
            ga, gb = a[name].graph_ms, b[name].graph_ms
            ours = bool(ga and gb) and symmetric_move(ga, gb) > tol
            moved[name] = "ours" if ours or moved.get(name) == "ours" else "base"
    return moved


def _panel(ax, order: list[str], by: list[dict], value, moved: dict[str, str]) -> list[float]:
    """One panel: shading for moved rows, a grey range line per row, one marker colour per run."""
    for x, name in enumerate(order):
        if name in moved:
            ax.axvspan(x - 0.45, x + 0.45, color=P.BELOW if moved[name] == "base" else P.MOVED, alpha=0.18, lw=0)
        sp = [v for b in by if name in b and (v := value(b[name]))]
        if sp:
            ax.plot([x, x], [min(sp), max(sp)], color=P.BASE, lw=1.5)
    allv = []
    for i, b in enumerate(by):
        dx = (i - (len(by) - 1) / 2) * 0.12            # side by side, so coinciding runs stay visible
        pts = [(x + dx, v) for x, s in enumerate(order) if s in b and (v := value(b[s]))]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=4, ls="none", color=P.RUN_COLORS[i % len(P.RUN_COLORS)])
            allv += [v for _, v in pts]
    ax.set_yscale("log")
    P.log_ticks(ax, min(allv + [1.0]) / 1.1, max(allv + [1.0]) * 1.1)
    ax.axhline(1.0, color="black", lw=1, ls="--")
    return allv


def repeat_plot(runs: list[tuple[str, Any]], tol: float = REPEAT_TOLERANCE, title: str | None = None,
                meta: dict | None = None) -> Figure:
    """Consecutive runs of one kernel: each row's speedup per run (one marker colour per run, a grey
    line from lowest to highest); rows that moved more than `tol` between two consecutive runs are
    shaded, red where the baseline moved and ours did not, orange otherwise. A second panel below
    shows the graph speedups when every run has some (eval --graph)."""
    names = [n for n, _ in runs]
    tables = [as_rows(t) for _, t in runs]
    order = [r.scenario for r in tables[0]]
    labels = {r.scenario: P.row_name(r.row, r.scenario) for r in tables[0]}
    by = [{r.scenario: r for r in t} for t in tables]
    graph = all(any(r.graph_speedup for r in t) for t in tables)
    width = max(7.0, 0.32 * len(order) + 5.5)
    fig = Figure(figsize=(width, 8.4 if graph else 5.6), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True) if graph else [fig.add_subplot()]
    ax = axes[0]
    _panel(ax, order, by, lambda r: r.speedup if is_timed(r) else None, _moved_per_call(tables, tol))
    ax.set_ylabel(P.SPEEDUP_LABEL)
    if graph:
        g = axes[1]
        _panel(g, order, by, lambda r: r.graph_speedup or None, _moved_graph(tables, tol))
        g.set_ylabel(GRAPH_LABEL)
    P._row_ticks(axes[-1], [labels[s] for s in order])
    axes[-1].set_xlabel("scenario (grid row and name)")
    handles = [Line2D([], [], marker="o", ms=5, ls="none", color=P.RUN_COLORS[i % len(P.RUN_COLORS)],
                      label=f"run {i + 1}: {n}") for i, n in enumerate(names)]
    handles += [Line2D([], [], color=P.BASE, lw=1.5, label="range of the row over the runs"),
                Patch(color=P.BELOW, alpha=0.3, label=f"moved > {tol:.0%} between consecutive runs:\nonly the baseline's time moved"),
                Patch(color=P.MOVED, alpha=0.3, label=f"moved > {tol:.0%}: our time moved too"),
                Line2D([], [], color="black", ls="--", label="parity (1)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    cap = P.caption(meta, None, tables[-1]) + f" | {len(runs)} consecutive runs of one kernel source"
    P._titles(fig, ax, title or "Repeatability: each row's speedup in consecutive runs", cap)
    return fig
