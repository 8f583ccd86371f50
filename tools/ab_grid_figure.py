"""An A/B of two builds over fa3api rows, drawn (docs/mixed-small-v25.png): per row, graph time of the default, of
the variant and of the baseline, from alternating grid runs (tools/fa3api_grid.py --json, rounds a, b, ...).

    python tools/ab_grid_figure.py --out docs/mixed-small-v25.png --title "..." \\
        data/fa3api/session25-ab04dbc/grid_def_{a,b}.json --variant data/fa3api/session25-ab04dbc/grid_small_{a,b}.json

Each side is the median of its rounds per row; a row missing from a round, or measured without a graph time,
is refused naming the file and the row.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelseek.plots import save_png  # noqa: E402


def side(paths) -> dict[str, dict]:
    """{row: {"ours": median graph us, "base": median graph us or None, "paths": the kernel paths}} over the
    rounds in `paths` (fa3api_grid.py --json files); ValueError naming the file and row when a round lacks
    a row the first has, or a graph time."""
    rounds = [{r["name"]: r for r in json.loads(Path(p).read_text())} for p in paths]
    out = {}
    for name in rounds[0]:
        ours, base = [], []
        for p, rnd in zip(paths, rounds):
            r = rnd.get(name)
            if r is None or r.get("ours_graph_ms") is None:
                raise ValueError(f"{p}: row {name!r} {'missing' if r is None else 'has no graph time'}")
            ours.append(r["ours_graph_ms"] * 1e3)
            if r.get("base_graph_ms") is not None:
                base.append(r["base_graph_ms"] * 1e3)
        out[name] = {"ours": statistics.median(ours), "base": statistics.median(base) if base else None,
                     "paths": rounds[0][name]["paths"]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="fa3api rows, graph replay on the H200")
    ap.add_argument("--labels", default="default,variant")
    ap.add_argument("files", nargs="+", help="the default's rounds")
    ap.add_argument("--variant", nargs="+", required=True, help="the variant's rounds")
    a = ap.parse_args(argv)
    da, vb = side(a.files), side(a.variant)
    names = [n for n in da if n in vb]
    la, lb = a.labels.split(",")
    fig, ax = plt.subplots(figsize=(9, 4))
    w = 0.27
    for i, (lab, vals) in enumerate([(la, [da[n]["ours"] for n in names]), (lb, [vb[n]["ours"] for n in names]),
                                     ("baseline", [da[n]["base"] or 0.0 for n in names])]):
        bars = ax.bar([j + (i - 1) * w for j in range(len(names))], vals, w, label=lab)
        ax.bar_label(bars, [f"{v:.0f}" if v else "" for v in vals], fontsize=7)
    ax.set_xticks(range(len(names)), [f"{n}\n{'/'.join(vb[n]['paths'])}" for n in names], fontsize=8)
    ax.set_ylabel("graph replay, us (L2 flushed)")
    ax.set_title(a.title, fontsize=10)
    ax.legend(fontsize=8)
    save_png(fig, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
