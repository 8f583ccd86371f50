"""A/B table of build variants: run directories of the same grid and rows, some built with a
`--define` (meta build_defines) and some without, grouped into experiments; per row the variant's time
over the default's (median over each side's runs, per call and in CUDA-graph replay: below 1 the
variant is faster) and whether both sides were correct.

    python tools/ab_table.py RUNS_ROOT [--json out.json]     (every run dir below RUNS_ROOT)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelseek import results as R  # noqa: E402
from kernelseek import store  # noqa: E402


def _runs(root: Path) -> list[tuple[Path, list, dict]]:
    out = []
    for d in sorted({f.parent for n in (store.RESULTS, store.RESULTS_GZ) for f in root.rglob(n)}):
        try:
            rows, meta = R.load(d)
        except Exception as e:                      # one unreadable run is named, the rest still count
            print(f"skipped {d}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        out.append((d, rows, meta))
    return out


def experiments(runs) -> dict:
    """(grid, rows filter, define) -> {"off": [rows...], "on": [rows...]}: the runs without defines of a
    grid and filter are the "off" side of every define run on the same grid and filter."""
    off, on = defaultdict(list), defaultdict(list)
    for _, rows, meta in runs:
        key = (meta.get("grid"), meta.get("scenarios_filter"))
        defs = meta.get("build_defines") or {}
        if defs:
            on[key + (" ".join(f"{k}={v}" for k, v in sorted(defs.items())),)].append(rows)
        else:
            off[key].append(rows)
    return {k: {"off": off.get(k[:2], []), "on": v} for k, v in on.items()}


def _med(rows_lists, name, field):
    xs = [getattr(r, field) for rows in rows_lists for r in rows
          if r.scenario == name and r.status == "passed" and getattr(r, field)]
    return statistics.median(xs) if xs else None


def table(exp: dict) -> tuple[list[dict], dict]:
    """Per row: off/on ms per call and graph, their ratios, correct on each side; and the summary."""
    names = list(dict.fromkeys(r.scenario for rows in exp["off"] + exp["on"] for r in rows))
    out = []
    for n in names:
        rec = {"scenario": n}
        for side in ("off", "on"):
            st = [r.status for rows in exp[side] for r in rows if r.scenario == n]
            rec[f"{side}_correct"] = f"{sum(s == 'passed' for s in st)}/{len(st)}"
            rec[f"{side}_ms"], rec[f"{side}_graph_ms"] = _med(exp[side], n, "time_ms"), _med(exp[side], n, "graph_ms")
            rec[f"{side}_path"] = ",".join(sorted({str((r.features or {}).get("path", "?"))
                                                   for rows in exp[side] for r in rows if r.scenario == n}))
        rec["ratio"] = rec["on_ms"] / rec["off_ms"] if rec["on_ms"] and rec["off_ms"] else None
        rec["graph_ratio"] = (rec["on_graph_ms"] / rec["off_graph_ms"]
                              if rec["on_graph_ms"] and rec["off_graph_ms"] else None)
        out.append(rec)
    summ = {"rows": len(out), "runs_off": len(exp["off"]), "runs_on": len(exp["on"]),
            "all_correct_on": all(r["on_correct"].split("/")[0] == r["on_correct"].split("/")[1] != "0" for r in out),
            "geomean_ratio": R.geomean([r["ratio"] for r in out]), "geomean_graph_ratio": R.geomean([r["graph_ratio"] for r in out])}
    return out, summ


def _f(x, fmt="{:.4f}"):
    return fmt.format(x) if x else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if not a.root.is_dir():
        print(f"ab_table: {a.root}: not a directory", file=sys.stderr)
        return 2
    exps, dump = experiments(_runs(a.root)), {}
    if not exps:
        print(f"ab_table: no run built with a --define under {a.root}", file=sys.stderr)
        return 2
    for (grid, filt, define), exp in exps.items():
        rows, s = table(exp)
        dump[f"{define} | {grid} | {filt}"] = {"rows": rows, "summary": s}
        print(f"\n== {define} on {grid} rows {filt}: {s['runs_off']} runs off, {s['runs_on']} on; "
              f"on/off time per call {_f(s['geomean_ratio'], '{:.3f}')}, graph {_f(s['geomean_graph_ratio'], '{:.3f}')} "
              f"(below 1: the variant is faster); every row correct with it: {s['all_correct_on']}")
        print(f"  {'scenario':44} {'ok off':>6} {'ok on':>6} {'off ms':>8} {'on ms':>8} {'ratio':>6} "
              f"{'g.off':>8} {'g.on':>8} {'g.rat':>6}  path off -> on")
        for r in rows:
            print(f"  {r['scenario'][:44]:44} {r['off_correct']:>6} {r['on_correct']:>6} {_f(r['off_ms']):>8} "
                  f"{_f(r['on_ms']):>8} {_f(r['ratio'], '{:.3f}'):>6} {_f(r['off_graph_ms']):>8} "
                  f"{_f(r['on_graph_ms']):>8} {_f(r['graph_ratio'], '{:.3f}'):>6}  {r['off_path']} -> {r['on_path']}")
    if a.json:
        a.json.write_text(json.dumps(dump, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
