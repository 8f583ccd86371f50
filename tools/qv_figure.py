"""The qv kernel's long-sequence rows by version against FA3 (graph ms), from tools/qv_probe.py's JSON runs.

    python tools/qv_figure.py OUT.png RUN.json [RUN.json ...]

Rows: s08's prefill chunks, dv512, dv256_d64. Per row, one bar per (run, long-sequence kernel) it measured,
labelled by the run's directory and the kernel (ws: qv_ws.cuh, ws-cp: the same with every K/V block by cp.async,
wg: v18's wgmma form, mma: the mma.sync form), and FA3's time from the last run. Lower is better.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROWS = ("s08_prefills", "dv512", "dv256_d64")


def bars(runs: list[Path]) -> dict:
    """{row: [(label, graph ms)]}: each run's plain (not /old) long-kernel variants, then FA3."""
    out = {r: [] for r in ROWS}
    for path in runs:
        for r in json.loads(path.read_text()):
            if r["name"] in out and r.get("plain", True) and r.get("num_splits", 0) == 0:
                out[r["name"]].append((f"{path.parent.name.split('-')[-1]} {r['big_kernel']}", r["ours_graph_ms"]))
    for name in out:
        base = [r for r in json.loads(runs[-1].read_text()) if r["name"] == name and r["big_kernel"] == "ws"]
        if base:
            out[name].append(("FA3", base[0]["base_graph_ms"]))
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__)
        return 2
    data = bars([Path(p) for p in argv[1:]])
    fig, axes = plt.subplots(1, len(ROWS), figsize=(4.2 * len(ROWS), 3.6))
    for ax, name in zip(axes, ROWS):
        labels, ms = zip(*data[name]) if data[name] else ((), ())
        colors = ["#888888" if lab == "FA3" else ("#1f77b4" if lab.endswith("ws") else "#ff7f0e") for lab in labels]
        ax.barh(range(len(ms)), ms, color=colors)
        ax.set_yticks(range(len(ms)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("graph replay, ms (lower is better)")
        ax.set_title(name, fontsize=10)
        for y, v in enumerate(ms):
            ax.text(v, y, f" {v:.3f}", va="center", fontsize=7)
    fig.suptitle("kernels/qv_fwd long-sequence rows on an H200 by run: ws (qv_ws.cuh), ws-cp (cp.async), wg (v18), "
                 "mma, against FA3", fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[0], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
