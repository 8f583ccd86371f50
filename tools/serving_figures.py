"""The serving grid's figure and table for docs/RESULTS.md from a results file of tools/serving_bench.py.

    python3 tools/serving_figures.py SERVING.json --png docs/serving.png [--md OUT.md]

Without --md the table is printed (kernelseek/serving_figures.py says what the panels show).
"""
from __future__ import annotations

import argparse
import sys

from kernelseek import serving_figures as SF


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="serving.json from tools/serving_bench.py")
    ap.add_argument("--png", required=True)
    ap.add_argument("--md", default=None, help="write the markdown table here (else print it)")
    a = ap.parse_args(argv)
    text = SF.write(a.results, a.png, a.md)
    if not a.md:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
