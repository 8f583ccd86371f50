"""The hopper grid against its peers as one figure: every row's speedup in CUDA-graph replay (log scale),
grouped by block (dense, varlen, paged prefill, decode) and dtype, with each group's geomean.
Made for docs/RESULTS.md from session 11's two halves of the grid:

    python tools/hopper_figure.py data/runs/h200-hopper-*-v13peers-* --out docs/hopper-v13peers.png
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelseek import results as R  # noqa: E402

BLOCKS = ("dense", "varlen", "paged", "decode")
DTYPES = ("bf16", "fp16", "fp8")


def groups(rows) -> dict[tuple[str, str], list[float]]:
    """(block, dtype) -> the graph speedups of its timed rows (block = the scenario name's prefix)."""
    out: dict[tuple[str, str], list[float]] = {(b, d): [] for b in BLOCKS for d in DTYPES}
    for r in rows:
        block = r.scenario.split("_", 1)[0]
        dtype = (r.features or {}).get("dtype")
        if r.graph_speedup and (block, dtype) in out:
            out[(block, dtype)].append(r.graph_speedup)
    return out


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def figure(rows, meta: dict, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    g = groups(rows)
    keys = [k for k in g if g[k]]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    colors = {"bf16": "tab:blue", "fp16": "tab:green", "fp8": "tab:red"}
    for i, k in enumerate(keys):
        xs = g[k]
        jitter = [i + (j % 7 - 3) * 0.04 for j in range(len(xs))]
        ax.scatter(jitter, xs, s=14, color=colors[k[1]], alpha=0.7)
        gm = geomean(xs)
        ax.plot([i - 0.3, i + 0.3], [gm, gm], color="black", lw=2)
        ax.annotate(f"{gm:.2f}", (i + 0.32, gm), fontsize=7, va="center")
    ax.axhline(1.0, color="gray", ls="--", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(keys)), [f"{b}\n{d} ({len(g[(b, d)])})" for b, d in keys], fontsize=8)
    ax.set_ylabel("speedup in CUDA-graph replay\n(best baseline ms / our ms, log scale)")
    env = meta.get("env") or {}
    ax.set_title(f"{title}\n{env.get('gpu', '')}, git {meta.get('git_rev', '')}; bar = group geomean; "
                 f"rows far below 1 on paged fp8 / page 1 / leftpad run on the naive fallback", fontsize=9)
    fig.tight_layout()
    return fig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="run directories of the hopper grid (halves are merged)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    rows, meta = [], {}
    for d in a.runs:
        rr, m = R.load(d)
        rows += rr
        meta = meta or m
    figure(rows, meta, f"hopper grid, {len(rows)} rows, against {meta.get('baseline', '')}").savefig(
        a.out, dpi=110, bbox_inches="tight")
    for (b, d), xs in groups(rows).items():
        if xs:
            print(f"{b:7} {d:5} {len(xs):3} rows  graph geomean {geomean(xs):.3f}  min {min(xs):.3f}  max {max(xs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
