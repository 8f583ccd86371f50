"""Time the serving grid (kernelseek/grids/serving.yaml) on the GPU against the baselines on the same call.

    python3 tools/serving_bench.py --out DIR [--rows REGEX] [--budget S] [--replays N] [--grid FILE]

Writes DIR/serving.json and DIR/serving.txt (kernelseek/serving_bench.py says what is measured); prints the
table last. Exit 0 when every row ran and matched the fp32 answer.
"""
from __future__ import annotations

import argparse
import sys

from kernelseek import serving_bench as SB


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for serving.json and serving.txt")
    ap.add_argument("--rows", default="", help="regular expression on row names")
    ap.add_argument("--budget", type=float, default=0.4, help="seconds of per-call timing per implementation")
    ap.add_argument("--replays", type=int, default=20, help="CUDA-graph replays per implementation")
    ap.add_argument("--grid", default=None, help="a serving grid file (default kernelseek/grids/serving.yaml)")
    a = ap.parse_args(argv)
    res = SB.run(a.out, a.rows, a.budget, a.replays, a.grid)
    print(SB.table(res))
    return 0 if res and all(r.get("ok") for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
