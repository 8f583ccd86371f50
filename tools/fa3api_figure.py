"""The fa3api grid's judged speed per row, run by run (issue 25's 0.8x line drawn), from fa3api_grid JSON runs.

    python tools/fa3api_figure.py OUT.png RUN.json [RUN.json ...]

One group of bars per row, one bar per run (labelled by the run's directory and file: `run_label`), the row's judged measure
(graph for decode-shaped rows, per call for the others: fa3api_grid.speeds); a hatched bar is judged per call.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def speeds(path: Path) -> dict:
    """{row name: (judged speed, judged measure)} of one grid run."""
    rows = json.loads(path.read_text())
    return {r["name"]: (r.get("judged_speed"), r.get("judged")) for r in rows}


def run_label(p: Path) -> str:
    """A run's legend label: its session folder (session25-3801fce -> s25-3801fce), the subfolder of a run kept
    beside another (grid_a), and the file's stem."""
    parts = [p.parent.parent.name, p.parent.name] if p.parent.name.startswith("grid_") else [p.parent.name]
    return " ".join([*(x.replace("session", "s") for x in parts), p.stem])


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out, runs = Path(argv[0]), [Path(a) for a in argv[1:]]
    data = [(run_label(p), speeds(p)) for p in runs]
    names = list(data[0][1])
    width = 0.8 / len(data)
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.6), 4.2))
    for i, (label, sp) in enumerate(data):
        xs = [k + (i - (len(data) - 1) / 2) * width for k in range(len(names))]
        ys = [min((sp.get(n) or (None, None))[0] or 0.0, 2.5) for n in names]
        hatch = ["//" if (sp.get(n) or (None, None))[1] == "per_call" else "" for n in names]
        bars = ax.bar(xs, ys, width, label=label)
        for b, h in zip(bars, hatch):
            b.set_hatch(h)
    ax.axhline(0.8, color="k", lw=1, ls="--")
    ax.text(len(names) - 0.5, 0.82, "0.8x", ha="right", fontsize=8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("judged speed (x baseline)")
    ax.set_title("fa3api grid on the H200 (hatched: per call; plain: graph; clipped at 2.5)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
