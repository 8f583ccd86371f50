"""A mixed call's decode/prefill arrangement swept on the H200 (docs/reserve-v24.png): FA3's graph time over ours
per row, at each number of SMs reserved for the decode part (tools/mixed_overlap_probe.py's table).

    python tools/reserve_figure.py --out docs/reserve-v24.png data/fa3api/session24-e6f9c27/reserve_sweep.txt

The table's header names the reserves ("rsv N"); each row line holds the row name, FA3's graph us, then one
"graph us/per-call us" cell (with = or !: output bits equal to reserve 0's or not) per reserve.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelseek.plots import save_png  # noqa: E402

CELL = re.compile(r"([\d.]+)/\s*(\d+)([=!])")


def parse(path: str | Path) -> tuple[list[int], dict]:
    """(the reserves, {row: {"fa3": graph us or None, "graph": [us per reserve], "same": [bits equal]}}) of a
    sweep table; ValueError naming the file and line when a row does not have one cell per reserve."""
    reserves, rows = None, {}
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.startswith("row ") and "rsv" in line:
            reserves = [int(x) for x in re.findall(r"rsv (\d+)", line)]
            continue
        if reserves is None or not line.strip() or line.startswith((" ", "=")):
            continue
        cells = CELL.findall(line)
        if len(cells) != len(reserves):
            raise ValueError(f"{path}:{n}: {len(cells)} cells for {len(reserves)} reserves: {line[:60]!r}")
        name, fa3 = line.split()[:2]
        rows[name] = {"fa3": None if fa3 == "nan" else float(fa3), "graph": [float(g) for g, _, _ in cells],
                      "same": [s == "=" for _, _, s in cells]}
    if reserves is None:
        raise ValueError(f"{path}: no header line with the reserves (rsv N)")
    return reserves, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("table", help="mixed_overlap_probe.py's output")
    a = ap.parse_args(argv)
    reserves, rows = parse(a.table)
    names = [n for n, r in rows.items() if r["fa3"]]
    fig, ax = plt.subplots(figsize=(11, 4.2))
    w = 0.8 / len(reserves)
    for i, rsv in enumerate(reserves):
        ax.bar([j + i * w for j in range(len(names))], [rows[n]["fa3"] / rows[n]["graph"][i] for n in names], w,
               label="one stream" if rsv == 0 else f"{rsv} SM{'s' if rsv > 1 else ''} reserved" + (" (default)" if rsv == 20 else ""))
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(names))], [n[:22] for n in names], rotation=25, ha="right")
    ax.set_ylabel("FA3 graph time / ours")
    ax.set_title("mixed calls on the H200: the decode part beside the prefill, SMs reserved for it (graph replay)")
    ax.set_ylim(0, 1.35)
    ax.legend(fontsize=8, ncol=len(reserves), loc="upper left")
    save_png(fig, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
