"""`kernelseek grid NAME [--scenarios PATTERN] [--json]`: list a grid's scenarios.

One line per scenario: bench26 row (or -), name, short description, group (prefill/decode),
FLOPs in GFLOP and minimum bytes in MB (both as `kernelseek.scenarios` counts them), then a
total. `--json` prints a list of objects with the same columns plus the scenario's fields.
A grid that does not load (no such file, invalid YAML, a bad scenario) or a pattern that selects
nothing prints the error on stderr and exits 2. Imports neither torch nor CUDA.
"""
from __future__ import annotations

import argparse
import json

from . import user_input
from ..scenarios import load_grid, select


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "grid", description="List a grid's scenarios: row, name, description, group, GFLOP, min MB.")
    p.add_argument("grid", metavar="NAME", help="built-in grid name (bench26, optest, hopper, smoke) or a .yaml path")
    p.add_argument("--scenarios", metavar="PATTERN", default=None,
                   help="comma-separated names, row numbers (3, 20-24) or name substrings")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def rows_of(scenarios) -> list[dict]:
    out = []
    for s in scenarios:
        out.append({
            "row": s.row, "name": s.name, "description": s.short(), "group": s.group,
            "gflop": s.flops() / 1e9, "min_mb": s.min_bytes() / 1e6,
            "scenario": s.to_dict(),
        })
    return out


def format_table(rows: list[dict], grid: str) -> str:
    w_name = max([len("name")] + [len(r["name"]) for r in rows])
    w_desc = max([len("description")] + [len(r["description"]) for r in rows])
    head = f"{'row':>3}  {'name':<{w_name}}  {'description':<{w_desc}}  {'group':<7}  {'GFLOP':>10}  {'min MB':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        row = "-" if r["row"] is None else str(r["row"])
        lines.append(f"{row:>3}  {r['name']:<{w_name}}  {r['description']:<{w_desc}}  {r['group']:<7}  "
                     f"{r['gflop']:>10.3f}  {r['min_mb']:>10.3f}")
    gf = sum(r["gflop"] for r in rows)
    mb = sum(r["min_mb"] for r in rows)
    lines.append(f"{len(rows)} scenario(s) of grid {grid}: {gf:.3f} GFLOP, {mb:.3f} MB in all")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    with user_input(args.grid):
        scenarios = select(load_grid(args.grid), args.scenarios)
    rows = rows_of(scenarios)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(format_table(rows, args.grid))
    return 0
