"""A bank question's slots: the {names} in its text, and their values from a results table.

`values(rows, bounds=..., meta=...)` phrases each slot from the data ("row 3 (dense_causal) at
0.81x"); a slot without data gets its neutral phrasing from SLOTS, never "None". `fill` puts
them into a text. bank.py re-exports these names (`bank.values`, `bank.fill`, `bank.SLOTS`).
"""
from __future__ import annotations

import string


# slot -> the neutral phrasing used when the data for it is absent (never a crash, never "None")
SLOTS = {
    "worst_rows": "the slowest scenarios",
    "worst_row": "the slowest scenario",
    "best_row": "the fastest scenario",
    "failed_rows": "the failing rows",
    "geomean": "the current geometric mean",
    "bound_fraction": "an unmeasured share of its bound",
    "at_parity": "some rows",
    "n_scenarios": "scenarios",
    "baseline": "the baseline",
    "gpu": "this GPU",
    "noise": "the measured noise",
}


def fields(text: str) -> list[str]:
    """The slot names in a text (Python format fields); ValueError on unbalanced braces."""
    return [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]


def fill(text: str, vals: dict) -> str:
    """Replace each {slot} by vals[slot]; an unknown slot stays as written."""
    out = []
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:
        return text
    for lit, f, _, _ in parts:
        out.append(lit)
        if f is not None:
            out.append(str(vals[f]) if f in vals else "{" + f + "}")
    return "".join(out)


def _label(r) -> str:
    return f"row {r.row} ({r.scenario})" if r.row is not None else r.scenario


def _join(xs: list[str], limit: int = 4) -> str:
    more = len(xs) - limit
    xs = xs[:limit]
    s = xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]
    return s + (f" (and {more} more)" if more > 0 else "")


def _fraction(b) -> float | None:
    if isinstance(b, dict):
        b = next((b[k] for k in ("fraction", "bound_fraction", "sol_candidate") if k in b), None)
    ok = isinstance(b, (int, float)) and not isinstance(b, bool) and b == b  # not NaN
    return float(b) if ok else None


def bound_fractions(bounds) -> dict[str, float]:
    """scenario -> fraction of its roofline bound reached (bound time / measured time; above 1 is
    faster than the hardware allows), from a mapping (numbers, or dicts with `fraction` or
    `sol_candidate`), a list of dicts with `scenario`, or bounds.bounds_table's DataFrame."""
    if hasattr(bounds, "to_dict"):
        bounds = bounds.to_dict("records")
    if isinstance(bounds, list):
        bounds = {b.get("scenario"): b for b in bounds if isinstance(b, dict)}
    fr = {k: _fraction(v) for k, v in (bounds or {}).items()}
    return {k: v for k, v in fr.items() if v is not None}


def values(rows=None, *, bounds=None, meta=None, noise=None, extra=None) -> tuple[dict, set]:
    """Every slot's text from a results table, and the set of slots filled with real data.

    rows: Row objects (or dicts); bounds: as for bound_fractions; meta: the
    results meta (gpu, baseline); noise: relative run-to-run noise; extra: slot -> text overrides.
    """
    from .results import Row, summarize
    rows = [r if isinstance(r, Row) else Row.from_dict(r) for r in (rows or [])]
    meta = meta or {}
    fracs = bound_fractions(bounds)
    v: dict[str, str] = {}
    if rows:
        s = summarize(rows)
        timed = sorted((r for r in rows if r.status == "passed" and r.speedup is not None),
                       key=lambda r: r.speedup)
        if timed:
            v["worst_rows"] = _join([f"{_label(r)} at {r.speedup:.2f}x" for r in timed[:3]])
            v["worst_row"] = f"{_label(timed[0])} at {timed[0].speedup:.2f}x"
            v["best_row"] = f"{_label(timed[-1])} at {timed[-1].speedup:.2f}x"
            v["at_parity"] = f"{s['at_parity']} of {len(timed)} rows"
        bad = [r for r in rows if r.status != "passed"]
        if bad:
            v["failed_rows"] = _join([f"{_label(r)} ({r.status})" for r in bad])
        if s["geomean_speedup"]:
            v["geomean"] = f"a geometric mean of {s['geomean_speedup']:.2f}x"
        v["n_scenarios"] = f"{len(rows)} scenarios"
        names = [r.baseline for r in rows if r.baseline]
        if names:
            v["baseline"] = max(set(names), key=names.count)
        for r in timed + [r for r in rows if r not in timed]:
            if r.scenario in fracs:
                v["bound_fraction"] = f"{100 * fracs[r.scenario]:.0f}% of its bound on {_label(r)}"
                break
    elif fracs:
        k = min(fracs, key=fracs.get)
        v["bound_fraction"] = f"{100 * fracs[k]:.0f}% of its bound on {k}"
    if meta.get("baseline") and "baseline" not in v:
        v["baseline"] = str(meta["baseline"])
    gpu = meta.get("gpu") or (meta.get("env") or {}).get("gpu")   # evaluate records it under env
    if gpu:
        v["gpu"] = str(gpu)
    if noise is not None:
        v["noise"] = f"{100 * noise:.1f}%"
    v.update({k: str(x) for k, x in (extra or {}).items()})
    return {**SLOTS, **v}, set(v)
