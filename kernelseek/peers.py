"""Peer tables: every available implementation's time per row, per call and in CUDA-graph replay.

`kernelseek peers` runs one evaluation (our kernel against `best` with --graph: cuDNN, FA4, FA3,
FlashInfer, FA2, flash_op where each is available and computes the row; the dense stand-in beside
paged rows) and writes, into that run directory, a markdown table with one row per scenario and,
per implementation, its per-call ms / graph-replay ms. `peer_table(run)` rebuilds the same table from
any recorded run, so a comparison made on one GPU can be redone on another by one command.

Columns: ours first, then the baselines in PEER_ORDER, then any other that ran (a stand-in is marked
"stand-in": dense K/V already gathered, not the same work). A cell is "per-call / graph" in ms, "-" for
a measure that does not exist (no capture), "x" for an implementation that failed the check or errored,
"declined [n]" where it did not run and the run recorded why (reason n in the legend, with its rows:
unavailable, the scenario declined, a module not built), and empty where it did not run in a run that
recorded no reason (runs before the reasons were kept). The last columns are our speedup over the best per
call and in graph replay, and which peer was fastest in each.
"""
from __future__ import annotations

import math
from pathlib import Path

from . import results as R

PEER_ORDER = ("cudnn", "fa4", "fa3", "flashinfer", "fa2", "flash_op", "flex")
PEER_BASELINE = "best"       # the baseline spec `kernelseek peers` evaluates against


def _ms(x) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def _cell(rec: dict | None, declined: int | None = None) -> str:
    if not rec:
        return f"declined [{declined}]" if declined else ""
    if rec.get("status") != "passed":
        return "x"
    return f"{_ms(rec.get('time_ms'))} / {_ms(rec.get('graph_ms'))}"


def columns(rows: list[R.Row]) -> list[str]:
    """The baselines that appear in any row, in PEER_ORDER, then the others (stand-ins last)."""
    seen = {n for r in rows for n in (r.baselines or {})}
    known = [n for n in PEER_ORDER if n in seen]
    return known + sorted(n for n in seen if n not in known)


def declines(rows: list[R.Row]) -> dict[tuple[str, str], list]:
    """{(baseline, why): [rows]} over the rows' recorded declines, numbered by order of first appearance
    (the table's "declined [n]" is the n-th key, from 1)."""
    out: dict[tuple[str, str], list] = {}
    for r in rows:
        for name, why in (r.baselines_declined or {}).items():
            out.setdefault((name, str(why)), []).append(r.row if r.row is not None else r.scenario)
    return out


def peer_table(rows: list[R.Row], meta: dict | None = None) -> str:
    """The markdown peer table for a run's rows (and, when given, its meta: GPU, baselines' sources)."""
    cols = columns(rows)
    number = {k: i + 1 for i, k in enumerate(declines(rows))}
    head = ["#", "scenario", "ours"] + [c + (" (stand-in)" if "standin" in c else "") for c in cols] + [
        "speedup", "graph speedup", "best per call", "best graph"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ours = "x" if r.status != "passed" else f"{_ms(r.time_ms)} / {_ms(r.graph_ms)}"
        cells = [str(r.row if r.row is not None else ""), r.scenario, ours]
        why = r.baselines_declined or {}
        cells += [_cell((r.baselines or {}).get(c), number.get((c, str(why[c]))) if c in why else None) for c in cols]
        cells += [f"{r.speedup:.3f}" if r.speedup else "-", f"{r.graph_speedup:.3f}" if r.graph_speedup else "-",
                  r.baseline or "-", r.baseline_graph or "-"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(_preamble(rows, meta or {}) + out + _legend(rows, meta or {}))


def _preamble(rows: list[R.Row], meta: dict) -> list[str]:
    env = meta.get("env") or {}
    s = R.summarize(rows)
    gm, gg = s.get("geomean_speedup"), s.get("geomean_graph_speedup")
    per_call = f"per call {gm:.3f}x over {s['timed']} rows" if gm else "per call n/a"
    graph = f"graph {gg:.3f}x over {s['graph_timed']} rows" if gg else "graph n/a"
    return [f"# Peers: {meta.get('grid') or (rows[0].grid if rows else '?')} on {env.get('gpu', 'unknown GPU')}", "",
            f"Kernel `{meta.get('kernel', '?')}` at {str(meta.get('git_rev', '?'))[:12]}, torch {env.get('torch', '?')}, "
            f"started {meta.get('started_utc', '?')}. Each cell: per-call ms / CUDA-graph replay ms (median; inputs "
            "refreshed and L2 flushed before every batch or replay).", "",
            f"Our geomean speedup over the best peer: {per_call}; {graph}.", ""]


def _legend(rows: list[R.Row], meta: dict) -> list[str]:
    said = declines(rows)
    empty = ("declined [n] = did not run, for reason n below; empty = did not run (no reason recorded)" if said
             else "empty = did not run (declined the scenario or unavailable)")   # runs before reasons were kept
    out = ["", f"x = failed its check or errored; {empty}; - = no such measure (not captured). A stand-in computes "
           "on dense K/V already gathered: not the same work, never counted as best.", "",
           "Baselines (version; where loaded from):"]
    ran = meta.get("baselines_ran") or {}
    for name in columns(rows):
        rec = ran.get(name) or {}
        out.append(f"- {name}: {rec.get('version') or '?'}" + (f"; from {rec['from']}" if rec.get("from") else "")
                   + f" ({rec.get('passed', 0)} rows passed)")
    absent = {n: v for n, v in ((meta.get("env") or {}).get("baselines") or {}).items()
              if str(v).startswith("unavailable") and not any(n == k for k, _ in said)}
    for name, why in absent.items():
        out.append(f"- {name}: {why}")
    if said:
        out += ["", "Did not run (the reason each baseline gave; the rows):"]
        out += [f"- [{i}] {name}, {_rows(where, len(rows))}: {why[:240]}"
                for i, ((name, why), where) in enumerate(said.items(), 1)]
    notes = sorted({f"{n}: {b['graph_note'][:120]}" for r in rows for n, b in (r.baselines or {}).items()
                    if b.get("graph_note")})
    if notes:
        out += ["", "Not captured in a CUDA graph:"] + [f"- {n}" for n in notes[:12]]
    return out


def _rows(where: list, n: int) -> str:
    return "every row" if len(where) == n else ("rows " if len(where) > 1 else "row ") + ", ".join(map(str, where))


def write_table(run_dir: str | Path) -> Path:
    """Write the peer table of the run at `run_dir` into it (store.PEERS); returns the file."""
    from . import store
    rows, meta = R.load(run_dir)
    path = store.peers_file(store.find_results(run_dir).parent)
    path.write_text(peer_table(rows, meta) + "\n")
    return path

