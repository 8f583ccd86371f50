"""Run the fa3api grid (kernelseek/grids/fa3api.yaml) on the GPU: check, kernel paths, timing (per call and
CUDA-graph replay; decode-shaped rows judged on graph time, kernelseek/fa3api_grid.py).

    python tools/fa3api_grid.py [--check-only] [--rows REGEX] [--reps N] [--json OUT.json] [--grid FILE]

Exit 0 when every row matched the reference on a fast path (kernelseek/fa3api_grid.py says what a row is).
"""
from __future__ import annotations

import argparse
import json
import re
import sys

from kernelseek import fa3api_grid as G


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=None, help="grid file (default kernelseek/grids/fa3api.yaml)")
    ap.add_argument("--rows", default=None, help="regex on row names")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    rows = [r for r in G.load_rows(a.grid) if not a.rows or re.search(a.rows, r["name"])]
    res = G.run_rows(rows, a.check_only, a.reps)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(G.table(res))
    return 0 if all(r.get("ok") and r.get("fast") for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
