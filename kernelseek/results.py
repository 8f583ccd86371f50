"""The results table: one row per scenario, its summary, and saving and loading a run's rows.

A row never hides a failure: the candidate's `status` is one of STATUSES with a `reason`; the
baseline has its own fields, and a row without a usable baseline has speedup None and says why.
Units are in the column names. A run's results file is the machine-readable record of one evaluation,
    {"meta": {...}, "rows": [Row...], "summary": {...}};
kernelseek.store owns the run folder and writes and reads that file; this module owns what is in it.
"""
from __future__ import annotations

import dataclasses
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import store

STATUSES = ("passed", "failed", "error", "timeout", "refused", "skipped")


@dataclass
class Row:
    scenario: str                       # scenario name
    row: int | None = None              # bench26 row number, if any
    grid: str = ""
    status: str = "error"               # passed | failed | error | timeout | refused | skipped
    reason: str = ""                    # why, for anything but passed
    features: dict = field(default_factory=dict)   # Scenario.features(): what triage groups by
    # check (candidate against the fp32 reference)
    max_err: float | None = None        # max |cand - ref32| over O
    ref_err: float | None = None        # max |ref_lowp - ref32|: the reference's own error
    err_bound: float | None = None      # k * ref_err + atol: the pass threshold
    err_ratio: float | None = None      # max_err / err_bound (<= 1 passes)
    lse_err: float | None = None        # max |lse - lse32| over finite entries
    # candidate timing (ms per call)
    time_ms: float | None = None        # median per call, events around back-to-back calls
    time_p10_ms: float | None = None
    time_p90_ms: float | None = None
    kernel_ms: float | None = None      # device time of the kernels alone
    host_ms: float | None = None        # host wall time per call (launch + host work)
    sync_ms: float | None = None        # host wall per call until the whole device is idle
    graph_ms: float | None = None       # per call in CUDA-graph replay (eval --graph), content refreshed
    graph_p10_ms: float | None = None   # its fastest replays (p10; absent before session 11)
    graph_note: str = ""                # why the candidate has no graph time (its calls could not be captured)
    # baseline
    baseline: str | None = None         # winning baseline's name
    baseline_version: str | None = None
    baseline_status: str = "n/a"        # passed | failed | error | n/a
    baseline_reason: str = ""
    baseline_ms: float | None = None
    baseline_kernel_ms: float | None = None
    baseline_host_ms: float | None = None
    baseline_graph: str | None = None   # the fastest baseline in CUDA-graph replay (may differ from `baseline`)
    baseline_graph_ms: float | None = None  # its per-call time in graph replay
    baselines: dict = field(default_factory=dict)  # every baseline tried: name -> {ms, graph_ms, status, ...}
    baselines_declined: dict = field(default_factory=dict)  # every one that did not run: name -> why (short);
                                        # unavailable here or declined the scenario (absent in runs before 2026-12-01 s9)
    stand_in: dict = field(default_factory=dict)   # a labeled dense stand-in (not the same work)
    # derived
    speedup: float | None = None        # baseline_ms / time_ms (the per-call measure)
    graph_speedup: float | None = None  # baseline_graph_ms / graph_ms (the graph measure; --graph)
    kernel_speedup: float | None = None  # baseline_kernel_ms / kernel_ms: who wins in device time
    tflops: float | None = None         # candidate FLOPs / time
    gbps: float | None = None           # candidate min bytes / time (GB/s)
    baseline_tflops: float | None = None
    flops: float | None = None
    min_bytes: float | None = None
    suspicious: bool = False            # flagged for review (a surprising speedup): not met until reviewed
    suspicious_reason: str = ""
    runcheck: str = ""                  # the run-time code check: ok | refused | off | unavailable: why
    corroboration: dict = field(default_factory=dict)  # the parent's clock on the workers' requests and
                                        # bursts, and the verdict on the claimed time (corroborate.py)

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def pick_baselines(row: Row, bl: dict, reply: dict) -> None:
    """Fill `row`'s baseline fields from a worker reply's baselines `bl`: the fastest real baseline that
    passed, per call and (separately) in CUDA-graph replay; a stand-in is reported beside, never as best."""
    timed = {n: b for n, b in bl.items() if b.get("status") == "passed" and b.get("time_ms")}
    stand = {n: b for n, b in timed.items() if "standin" in n}
    real = {n: b for n, b in timed.items() if n not in stand}
    if stand:
        n, b = min(stand.items(), key=lambda kv: kv[1]["time_ms"])
        row.stand_in = {"name": n, "time_ms": b["time_ms"], "note": "dense K/V already gathered: not the same work"}
    if real:
        n, b = min(real.items(), key=lambda kv: kv[1]["time_ms"])
        row.baseline, row.baseline_version, row.baseline_status = n, b.get("version"), "passed"
        row.baseline_ms, row.baseline_kernel_ms, row.baseline_host_ms = b["time_ms"], b.get("kernel_ms"), b.get("host_ms")
        row.baseline_tflops = row.flops / (b["time_ms"] * 1e-3) / 1e12
        graphed = {n: b for n, b in real.items() if b.get("graph_ms")}
        if graphed:                                    # the fastest in graph replay, maybe another one
            n, b = min(graphed.items(), key=lambda kv: kv[1]["graph_ms"])
            row.baseline_graph, row.baseline_graph_ms = n, b["graph_ms"]
    else:
        why = "; ".join(f"{n}: {b.get('status')} {b.get('reason', '')[:80]}" for n, b in bl.items() if n not in stand)
        skipped = "; ".join(reply.get("baselines_skipped") or [])
        row.baseline_status = "n/a"
        row.baseline_reason = why or skipped or "no baseline computes this scenario"


def note_declines(seen: dict, row: Row) -> None:
    """Fold one row's declined baselines into a run meta's "baselines_declined": name -> {why: [rows]}
    (the row number, else the scenario's name), so the meta says which baseline did not run where, and why."""
    for name, why in (row.baselines_declined or {}).items():
        seen.setdefault(name, {}).setdefault(str(why), []).append(row.row if row.row is not None else row.scenario)


MEASURES = ("contract", "per_call", "graph")


def judged_speedup(r: Row, measure: str = "contract") -> tuple[float | None, str]:
    """(the speedup a goal judges, which measure it is: "per_call" | "graph").

    per_call: baseline_ms / time_ms. graph: baseline_graph_ms / graph_ms (None without both).
    contract (DESIGN.md's measurement contract): decode rows, which serving engines replay as graphs,
    on the graph measure once it exists; every other row on the per-call measure."""
    if measure not in MEASURES:
        raise ValueError(f"measure {measure!r}: expected one of {', '.join(MEASURES)}")
    if measure == "graph" or (measure == "contract" and (r.features or {}).get("kind") == "decode"
                              and r.graph_speedup is not None):
        return r.graph_speedup, "graph"
    return r.speedup, "per_call"


def summarize(rows: list[Row]) -> dict[str, Any]:
    """Scenarios correct, geometric-mean speedup, worst row, rows at or above parity."""
    n = len(rows)
    passed = [r for r in rows if r.status == "passed"]
    timed = [r for r in passed if r.speedup is not None]
    worst = min(timed, key=lambda r: r.speedup) if timed else None
    return {
        "scenarios": n,
        "passed": len(passed),
        "failed": sum(r.status == "failed" for r in rows),
        "errors": sum(r.status in ("error", "timeout") for r in rows),
        "refused": sum(r.status == "refused" for r in rows),
        "na": sum(r.status == "passed" and r.speedup is None for r in rows),
        "timed": len(timed),
        "geomean_speedup": geomean([r.speedup for r in timed]),
        # the graph measure over the rows that have it (eval --graph), and how many do
        "geomean_graph_speedup": geomean([r.graph_speedup for r in passed if r.graph_speedup]),
        "graph_timed": sum(r.graph_speedup is not None for r in passed),
        "worst": {"scenario": worst.scenario, "row": worst.row, "speedup": worst.speedup} if worst else None,
        # a flagged row is not counted as met anywhere (review.py): parity counts unflagged rows only
        "at_parity": sum(r.speedup >= 1.0 and not r.suspicious for r in timed),
        "suspicious": sum(bool(r.suspicious) for r in rows),        # flagged for review
        "all_correct": n > 0 and len(passed) == n,
    }


# ---- a run's results (the folder and its file names belong to kernelseek.store) --------------------
new_run_dir = store.new_run_dir


def save(run_dir: str | Path, rows: list[Row], meta: dict) -> Path:
    """Write the run's results (atomically) and, when pandas and pyarrow exist, the parquet copy."""
    run = store.Run(run_dir, meta, [dataclasses.asdict(r) for r in rows], summarize(rows))
    path = run.save()
    try:
        to_frame(rows).to_parquet(run.parquet_file)
    except Exception:  # parquet is a convenience copy; results.json is the record
        pass
    return path


def load(path: str | Path) -> tuple[list[Row], dict]:
    """Rows and meta from a run directory or a results.json; errors name the file and field (a row's
    field of the wrong type too: row_problem)."""
    run = store.Run.load(path)
    for i, d in enumerate(run.rows):
        problem = row_problem(d)
        if problem:
            raise ValueError(f"{store.results_file(path)}: rows[{i}] ({d.get('scenario')}): {problem}")
    return [Row.from_dict(d) for d in run.rows], run.meta


_KINDS = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "dict": (dict,)}


def row_problem(d: dict) -> str | None:
    """What is wrong with a row read from a results file (a field of the wrong type, an unknown
    status), or None. Fields Row does not know are ignored, as Row.from_dict ignores them."""
    for f in dataclasses.fields(Row):
        if f.name not in d:
            continue
        v, kinds = d[f.name], [k.strip() for k in str(f.type).split("|")]
        if v is None and "None" in kinds:
            continue
        ok = any(isinstance(v, _KINDS[k]) and not (k != "bool" and isinstance(v, bool)) for k in kinds if k in _KINDS)
        if not ok:
            return f"field '{f.name}' is {v!r}, expected {' or '.join(kinds)}"
    if d.get("status", "error") not in STATUSES:
        return f"field 'status' is {d['status']!r}, expected one of {', '.join(STATUSES)}"
    return None


def to_frame(rows: list[Row]):
    """A pandas DataFrame with one column per Row field and the features spread out."""
    import pandas as pd
    recs = []
    for r in rows:
        d = dataclasses.asdict(r)
        feats = d.pop("features") or {}
        d.pop("baselines", None)
        d.pop("baselines_declined", None)
        d.pop("stand_in", None)
        d.update({f"f_{k}": v for k, v in feats.items()})
        recs.append(d)
    return pd.DataFrame(recs)


def format_table(rows: list[Row], summary: dict | None = None) -> str:
    """The per-scenario table and summary as plain text (what `kernelseek eval` prints)."""
    graph = any(r.graph_ms is not None or r.baseline_graph_ms is not None for r in rows)
    hdr = f"{'#':>3} {'scenario':34} {'status':8} {'err/bound':>9} {'ms':>9} {'baseline':>16} {'base ms':>9} {'speedup':>7} {'TFLOP/s':>8} {'GB/s':>7}"
    if graph:
        hdr += f" {'graph ms':>9} {'graph base':>12} {'g.base ms':>9} {'g.speedup':>9}"
    lines = [hdr, "-" * len(hdr)]

    def f(x, fmt):
        return format(x, fmt) if isinstance(x, (int, float)) else "-"
    for r in rows:
        base = r.baseline or ("n/a" if r.baseline_status == "n/a" else r.baseline_status)
        gcols = (f" {f(r.graph_ms, '9.4f')} {(r.baseline_graph or '-')[:12]:>12} {f(r.baseline_graph_ms, '9.4f')} "
                 f"{f(r.graph_speedup, '9.3f')}") if graph else ""
        lines.append(
            f"{(r.row if r.row is not None else ''):>3} {r.scenario[:34]:34} {r.status:8} {f(r.err_ratio, '9.3f')} "
            f"{f(r.time_ms, '9.4f')} {base[:16]:>16} {f(r.baseline_ms, '9.4f')} {f(r.speedup, '7.3f')} "
            f"{f(r.tflops, '8.1f')} {f(r.gbps, '7.0f')}" + gcols
            + ("  FLAGGED (not met until reviewed)" if r.suspicious else "")
            + (f"  [{r.reason[:60]}]" if r.status != "passed" and r.reason else "")
        )
    s = summary or summarize(rows)
    gm = s["geomean_speedup"]
    w = s["worst"]
    lines.append("-" * len(hdr))
    lines.append(
        f"correct {s['passed']}/{s['scenarios']}  geomean speedup "
        + (f"{gm:.3f}x" if gm else "n/a")
        + (f"  worst {w['speedup']:.3f}x ({w['scenario']})" if w else "")
        + f"  at/above parity {s['at_parity']}/{s['timed']}"
        + (f"  n/a {s['na']}" if s["na"] else "")
        + (f"  flagged {s['suspicious']} (not met until reviewed)" if s["suspicious"] else "")
        + (f"  graph geomean {s['geomean_graph_speedup']:.3f}x over {s['graph_timed']} rows"
           if s.get("geomean_graph_speedup") else "")
    )
    return "\n".join(lines + table_notes(rows))


def table_notes(rows: list[Row]) -> list[str]:
    """The footnote printed under format_table: what each column means and why a row is flagged."""
    notes = ["columns: err/bound = our max error / the allowed error (passes at <= 1); ms = our time per call "
             "(median, host work included); baseline = the library timed beside it; base ms = its time per call; "
             "speedup = base ms / ms (above 1: we are faster); TFLOP/s, GB/s = our FLOPs and minimum bytes per second."]
    if any(r.graph_ms is not None or r.baseline_graph_ms is not None for r in rows):
        notes.append("graph ms = our time per call replayed from a CUDA graph (no host work); graph base = the "
                     "fastest baseline in graph replay, g.base ms its time; g.speedup = g.base ms / graph ms. "
                     "Decode rows are judged on g.speedup, the others on speedup (DESIGN.md's contract).")
    flagged = [r for r in rows if r.suspicious]
    if flagged:
        notes.append("FLAGGED (not met until reviewed) = a speedup too large to trust unchecked (above the flag "
                     "line over the best baseline): the goal counts the row as not met until `kernelseek review "
                     "RUN --scenario S --note ...` records that someone checked the benchmark: " + "; ".join(f"{f'row {r.row}' if r.row is not None else r.scenario}: "
                                                  f"{r.suspicious_reason or 'flagged'}" for r in flagged))
    return [textwrap.fill(n, 115, subsequent_indent="  ") for n in notes]
