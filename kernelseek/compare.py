"""Two runs of a kernel compared row by row: which rows moved beyond noise, and which side moved them.

`compare(before, after)` matches rows by scenario and calls a row moved when its speedup ratio is
beyond the runs' own spread; `_cause` names the side (candidate, baseline, a host-bound baseline).
`repeatability(runs)` applies the same test to consecutive runs of one kernel (issue 3: bench26
twice in a row moves each row's speedup by less than REPEAT_TOLERANCE).

    kernelseek triage RUN_DIR --compare RUN_DIR2 [--noise 0.03]
    kernelseek triage RUN_1 --repeat RUN_2 [RUN_3 ...]
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kernelseek.results import Row
from kernelseek.rows import as_rows, deficit_summary, is_timed

DEFAULT_NOISE = 0.03   # relative run-to-run noise assumed when p10/p90 are missing
REPEAT_TOLERANCE = 0.03  # issue 3: bench26 twice in a row moves each row's speedup by less than this


def _spread(r: Row | None) -> float | None:
    """Half the p10..p90 spread relative to the median (fraction), or None."""
    if r is None or not r.time_ms or r.time_p10_ms is None or r.time_p90_ms is None:
        return None
    return (r.time_p90_ms - r.time_p10_ms) / (2.0 * r.time_ms)


def compare(before: Any, after: Any, noise: float | None = None) -> pd.DataFrame:
    """Per scenario (matched by name): speedup ratio after/before, time change, moved or not.

    `noise` is a relative fraction. When None, each row's noise is the sum of the two runs'
    half p10..p90 spreads, or DEFAULT_NOISE when either run lacks them. A row moved when
    |log(ratio)| > log(1 + noise); the ratio is of speedups when both runs have one, else of
    candidate times (inverted, so > 1 is better). Status changes are reported as moved.
    """
    a = {r.scenario: r for r in as_rows(before)}
    b = {r.scenario: r for r in as_rows(after)}
    names = list(a) + [n for n in b if n not in a]
    recs = []
    for name in names:
        ra, rb = a.get(name), b.get(name)
        sa, sb = _spread(ra), _spread(rb)
        nz = noise if noise is not None else (sa + sb if sa is not None and sb is not None else DEFAULT_NOISE)
        spa = ra.speedup if ra is not None and is_timed(ra) else None
        spb = rb.speedup if rb is not None and is_timed(rb) else None
        ta, tb = (ra.time_ms if ra else None), (rb.time_ms if rb else None)
        ratio = spb / spa if spa and spb else None
        if ratio is None and ta and tb and ra.status == rb.status == "passed":
            ratio = ta / tb
        time_change = tb / ta - 1.0 if ta and tb else None
        st_a, st_b = (ra.status if ra else "absent"), (rb.status if rb else "absent")
        if st_a != st_b:
            moved = "status"
        elif ratio is not None and abs(math.log(ratio)) > math.log1p(nz):
            moved = "better" if ratio > 1 else "worse"
        else:
            moved = ""
        recs.append({"scenario": name, "status_before": st_a, "status_after": st_b,
                     "speedup_before": spa, "speedup_after": spb, "ratio": ratio,
                     "time_before_ms": ta, "time_after_ms": tb, "time_change": time_change,
                     "noise": nz, "moved": moved,
                     "cause": _cause(ra, rb, nz) if moved in ("better", "worse") else ""})
    return pd.DataFrame(recs)


def _host_bound(r: Row) -> bool:
    """The baseline's host enqueue time per call is at least HOST_BOUND of its per-call time."""
    from .timing import HOST_BOUND
    return bool(r.baseline_ms and r.baseline_host_ms and r.baseline_host_ms >= HOST_BOUND * r.baseline_ms)


def _cause(ra: Row, rb: Row, noise: float) -> str:
    """Which side moved a row's speedup: "candidate", "baseline" or "both". A baseline that moved
    while host-bound in either run is named so, with its host ms per call: its per-call time follows
    the host's speed (FA4's Python dispatch on short decode rows), not the GPU."""
    def moved(x, y):
        return bool(x and y) and abs(math.log(y / x)) > math.log1p(noise)
    cand = moved(ra.time_ms, rb.time_ms)
    base = moved(ra.baseline_ms, rb.baseline_ms)
    if base and not cand:
        if _host_bound(ra) or _host_bound(rb):
            return (f"baseline host-bound ({ra.baseline}: host {ra.baseline_host_ms:.3f} -> "
                    f"{rb.baseline_host_ms:.3f} ms/call, per call {ra.baseline_ms:.3f} -> {rb.baseline_ms:.3f} ms)")
        return "baseline"
    return "candidate" if cand and not base else "both"


def format_compare(df: pd.DataFrame, before: Any = None, after: Any = None) -> str:
    lines = []
    if before is not None and after is not None:
        ga, gb = deficit_summary(before)["geomean"], deficit_summary(after)["geomean"]
        if ga and gb:
            lines.append(f"geomean {ga:.3f}x -> {gb:.3f}x ({(gb / ga - 1) * 100:+.1f}%)")
    for what in ("status", "better", "worse"):
        sub = df[df["moved"] == what]
        lines.append(f"{what}: {len(sub)}")
        for _, r in sub.iterrows():
            if what == "status":
                lines.append(f"  {r.scenario[:40]:40} {r.status_before} -> {r.status_after}")
            else:
                tc = f"time {r.time_change * 100:+6.1f}%" if r.time_change is not None and not pd.isna(r.time_change) else ""
                cause = f"  [{r.cause}]" if r.get("cause") else ""
                lines.append(f"  {r.scenario[:40]:40} x{r.ratio:.3f} (noise {r.noise * 100:.1f}%) {tc}{cause}")
    lines.append(f"within noise: {int((df['moved'] == '').sum())}")
    return "\n".join(lines)


# ---- repeatability -------------------------------------------------------------------------------
def p10_speedups(table: Any) -> dict[str, float]:
    """Per scenario, the winning baseline's 10th-percentile time per call over the candidate's (ms /
    ms): the speedup with the slowest 90% of each side's batches left out. Host interference that comes
    and goes over seconds (a host-bound baseline on a VM) lands in the upper tail, so this ratio
    tells a row that moved with it from one that moved in its floor."""
    out = {}
    for r in as_rows(table):
        b = (r.baselines or {}).get(r.baseline or "", {})
        if r.time_p10_ms and b.get("time_p10_ms"):
            out[r.scenario] = b["time_p10_ms"] / r.time_p10_ms
    return out


def graph_speedups(table: Any, p10: bool = False) -> dict[str, float]:
    """Per scenario, the speedup on the CUDA-graph measure (results graph_speedup, eval --graph); p10:
    on each side's fastest replays, against the same baseline (rows that record graph p10 times)."""
    if not p10:
        return {r.scenario: r.graph_speedup for r in as_rows(table) if r.graph_speedup}
    out = {}
    for r in as_rows(table):
        b = (r.baselines or {}).get(r.baseline_graph or "", {})
        if r.graph_speedup and getattr(r, "graph_p10_ms", None) and b.get("graph_p10_ms"):
            out[r.scenario] = b["graph_p10_ms"] / r.graph_p10_ms
    return out


def symmetric_move(a: float, b: float) -> float:
    """How far a ratio moved from a to b, the same either way (compare's rule: |log(b / a)|), as a
    fraction: 0.97 -> 1.0 and 1.0 -> 0.97 both move 3.1%."""
    return math.exp(abs(math.log(b / a))) - 1.0


def repeatability(runs: list[tuple[str, Any]], tol: float = REPEAT_TOLERANCE) -> pd.DataFrame:
    """Each consecutive pair of `runs` ((name, results table), in the order they ran): the rows whose
    speedup moved by more than `tol`, with the side that moved each (compare's cause), the largest
    speedup move, the largest move of the candidate's own per-call time, and the same count on the
    p10 speedups (p10_speedups; None where no row records p10 times) and on the graph measure
    (graph_speedups: the rows over `tol`, the largest move; None where no row has a graph speedup)."""
    recs = []
    for (na, ta), (nb, tb) in zip(runs, runs[1:]):
        pa, pb = p10_speedups(ta), p10_speedups(tb)
        p10_moves = [symmetric_move(pa[k], pb[k]) for k in pa if k in pb]
        ga, gb = graph_speedups(ta), graph_speedups(tb)
        g_moves = {k: symmetric_move(ga[k], gb[k]) for k in ga if k in gb}
        qa, qb = graph_speedups(ta, p10=True), graph_speedups(tb, p10=True)
        q_moves = [symmetric_move(qa[k], qb[k]) for k in qa if k in qb]
        df = compare(ta, tb, noise=tol)
        moves = (df["ratio"].dropna() - 1.0).abs()
        tmove = df["time_change"].dropna().abs()
        over = df[df["moved"] != ""]
        worst = df.loc[moves.idxmax()] if len(moves) else None
        recs.append({
            "pair": f"{na} -> {nb}", "rows": len(df), "over_tol": len(over),
            "max_move": float(moves.max()) if len(moves) else None,
            "max_move_scenario": worst["scenario"] if worst is not None else None,
            "own_time_max_move": float(tmove.max()) if len(tmove) else None,
            "own_time_max_scenario": df.loc[tmove.idxmax(), "scenario"] if len(tmove) else None,
            "moved": [(r.scenario, (r.ratio - 1.0) if r.ratio is not None and not pd.isna(r.ratio) else None,
                       r.cause or r.moved) for r in over.itertuples()],
            "p10_over_tol": sum(m > tol for m in p10_moves) if p10_moves else None,
            "p10_max_move": max(p10_moves) if p10_moves else None,
            "graph_rows": len(g_moves),
            "graph_over": sorted(((k, m) for k, m in g_moves.items() if m > tol), key=lambda km: -km[1]),
            "graph_max_move": max(g_moves.values()) if g_moves else None,
            "graph_max_scenario": max(g_moves, key=g_moves.get) if g_moves else None,
            "graph_p10_over_tol": sum(m > tol for m in q_moves) if q_moves else None,
            "graph_p10_max_move": max(q_moves) if q_moves else None,
        })
    return pd.DataFrame(recs)


def format_repeatability(df: pd.DataFrame, tol: float = REPEAT_TOLERANCE) -> str:
    """One paragraph per pair: within tolerance or not, and what moved the rows that did."""
    out = []
    for r in df.itertuples():
        ok = r.over_tol == 0
        mm = f"{r.max_move * 100:.1f}% ({r.max_move_scenario})" if r.max_move is not None else "n/a"
        own = (f"{r.own_time_max_move * 100:.1f}% ({r.own_time_max_scenario})"
               if r.own_time_max_move is not None else "n/a")
        out.append(f"{r.pair}: {'every row within' if ok else f'{r.over_tol} of {r.rows} rows over'} "
                   f"{tol * 100:.0f}%; largest speedup move {mm}; our own time moved at most {own}")
        if getattr(r, "p10_max_move", None) is not None and not pd.isna(r.p10_max_move):
            out.append(f"  on p10 times (each side's fastest batches): {int(r.p10_over_tol)} row{'' if r.p10_over_tol == 1 else 's'} over "
                       f"{tol * 100:.0f}%, largest move {r.p10_max_move * 100:.1f}%")
        for name, move, cause in r.moved:
            mv = f"{move * 100:+.1f}%" if move is not None else ""
            out.append(f"  {name[:40]:40} {mv:>7}  [{cause}]")
        if getattr(r, "graph_rows", 0):
            n = len(r.graph_over)
            out.append(f"  on the CUDA-graph measure: {'every row within' if not n else f'{n} of {r.graph_rows} rows over'} "
                       f"{tol * 100:.0f}%; largest move {r.graph_max_move * 100:.1f}% ({r.graph_max_scenario})")
            out += [f"    {name[:40]:40} {move * 100:6.1f}%" for name, move in r.graph_over]
            if getattr(r, "graph_p10_max_move", None) is not None and not pd.isna(r.graph_p10_max_move):
                out.append(f"    on graph p10 times: {int(r.graph_p10_over_tol)} row{'' if r.graph_p10_over_tol == 1 else 's'} "
                           f"over {tol * 100:.0f}%, largest move {r.graph_p10_max_move * 100:.1f}%")
    return "\n".join(out)
