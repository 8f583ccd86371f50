"""The varlen grid against FA3, kernel time per row, across session 23's builds (docs/varlen-v23.png).

Reads committed run directories (data/runs/h200-varlen-*) through kernelseek.store and draws, per row, ours over
FA3's kernel time (kernel_speedup: the profiler's kernel times, steadier than per-call times) for each run given.

    python tools/varlen_figure.py --out docs/varlen-v23.png LABEL=RUN_DIR ...
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelseek.plots import save_png  # noqa: E402

from kernelseek import store  # noqa: E402


def speedups(run_dir: str | Path) -> dict:
    """{scenario: FA3's kernel time over ours} of one run directory (None where a row was not timed)."""
    return {r["scenario"]: r.get("kernel_speedup") for r in store.read_results(Path(run_dir))["rows"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("runs", nargs="+", help="LABEL=RUN_DIR, in the order to draw")
    a = ap.parse_args(argv)
    series = []
    for item in a.runs:
        label, _, path = item.partition("=")
        if not path:
            ap.error(f"{item!r}: expected LABEL=RUN_DIR")
        series.append((label, speedups(path)))
    names = list(series[0][1])
    fig, ax = plt.subplots(figsize=(10, 4.2))
    w = 0.8 / len(series)
    for i, (label, sp) in enumerate(series):
        ax.bar([j + i * w for j in range(len(names))], [sp.get(n) or 0.0 for n in names], w, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(0.8, color="grey", lw=0.6, ls="--")
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(names))], [n.split("_", 1)[1] for n in names], rotation=25, ha="right")
    ax.set_ylabel("FA3 kernel time / ours")
    ax.set_title("varlen grid on the H200: packed-query prefill against FlashAttention-3 (kernel time)")
    ax.legend(fontsize=8)
    save_png(fig, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
