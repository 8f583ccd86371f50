"""The serving grid's figure and table for docs/RESULTS.md, from a results file of serving_bench.

    python3 tools/serving_figures.py SERVING.json --png docs/serving.png [--md OUT.md]   (serving_figures.write)

Left panel: our speedup over the fastest baseline per row (baseline ms / our ms; per call and CUDA graph;
the line at 1 is parity). Right panel: the fraction of the row's bound each time reaches (bound ms / ms:
the datasheet HBM or tensor rate, whichever limits the row, serving_counts.py), ours per call and graph and
the best baseline's graph; a dotted line at 0.85 (issue 26's bar for rows whose bytes dominate). A row
without a time (failed, or no baseline) has no bar and says n/a in the table. The caption names the GPU,
git revision and start time from the file's meta, so a figure never loses where its numbers came from.
"""
from __future__ import annotations

import json
from pathlib import Path

from matplotlib.figure import Figure


def load(path) -> tuple[dict, list[dict]]:
    d = json.loads(Path(path).read_text())
    if "rows" not in d or "meta" not in d:
        raise ValueError(f"{path}: not a serving results file (needs 'meta' and 'rows')")
    return d["meta"], d["rows"]


def _frac(r: dict, key: str):
    return (r.get(key) or {}).get("frac_bound")


def caption(meta: dict) -> str:
    return (f"{meta.get('gpu', 'unknown GPU')}, driver {meta.get('driver', '?')}, torch {meta.get('torch', '?')}, "
            f"git {str(meta.get('git_rev', '?'))[:12]}, started {meta.get('started_utc', '?')}")


def _bars(ax, labels, series, ref_lines, xlabel):
    n, k = len(labels), len(series)
    h = 0.8 / k
    for j, (name, vals, color) in enumerate(series):
        ys = [i + (j - (k - 1) / 2) * h for i in range(n)]
        ax.barh([y for y, v in zip(ys, vals) if v], [v for v in vals if v], height=h, label=name, color=color)
    for x, style in ref_lines:
        ax.axvline(x, color="black", lw=0.8, ls=style)
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel, fontsize=8)
    ax.legend(fontsize=7, loc="lower right")


def figure(meta: dict, rows: list[dict]) -> Figure:
    labels = [f"{r['name']} ({r.get('limit', '?')})" for r in rows]
    fig = Figure(figsize=(13, 0.45 * len(rows) + 2))
    a, b = fig.subplots(1, 2, sharey=True)
    _bars(a, labels, [("per call", [r.get("speedup_call") for r in rows], "#1f77b4"),
                      ("CUDA graph", [r.get("speedup_graph") for r in rows], "#2ca02c")],
          [(1.0, "-")], "speedup = fastest baseline ms / our ms (above 1: we are faster)")
    _bars(b, labels, [("ours per call", [_frac(r, "ours_call_rates") for r in rows], "#1f77b4"),
                      ("ours graph", [_frac(r, "ours_graph_rates") for r in rows], "#2ca02c"),
                      ("best baseline graph", [_frac(r, "best_graph_rates") for r in rows], "#7f8c8d")],
          [(1.0, "-"), (0.85, ":")], "fraction of the bound (bound ms / ms; bound: datasheet HBM or tensor rate)")
    fig.suptitle(f"serving grid: mixed chunked prefill + decode over paged KV ({caption(meta)})", fontsize=9)
    fig.tight_layout()
    return fig


def _f(x, spec=".3f"):
    return format(x, spec) if isinstance(x, (int, float)) else "n/a"


def markdown(meta: dict, rows: list[dict]) -> str:
    """The RESULTS.md table: one line per row, every number read from the results file."""
    out = [f"Serving grid on {caption(meta)}.", "",
           "| row | model | mix | limit | ours ms call / graph | host ms | best (call / graph) | best ms call / graph "
           "| speedup call / graph | ours graph: % of bound | rate |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o = (r.get("times") or {}).get("ours") or {}
        rt = r.get("ours_graph_rates") or r.get("ours_call_rates") or {}
        rate = (f"{rt['gbps']:.0f} GB/s" if r.get("limit") == "bytes" else f"{rt['tflops']:.0f} TFLOP/s") if rt else "n/a"
        status = "" if r.get("ok") else f" **failed: {r.get('error') or 'max err ' + _f(r.get('max_err'), '.2g')}**"
        out.append(f"| {r['name']}{status} | {r.get('model', '')} | {r.get('mix', '')} | {r.get('limit', '?')} "
                   f"| {_f(o.get('time_ms'))} / {_f(o.get('graph_ms'))} | {_f(o.get('host_ms'))} "
                   f"| {r.get('best_call') or 'n/a'} / {r.get('best_graph') or 'n/a'} "
                   f"| {_f(r.get('best_call_ms'))} / {_f(r.get('best_graph_ms'))} "
                   f"| {_f(r.get('speedup_call'))} / {_f(r.get('speedup_graph'))} "
                   f"| {_f(100 * rt['frac_bound'], '.1f') if rt else 'n/a'} | {rate} |")
    return "\n".join(out)


def write(results, png, md=None) -> str:
    """The figure to `png` and the table to `md` (when given) from a results file; returns the table."""
    meta, rows = load(results)
    figure(meta, rows).savefig(png, dpi=110)
    text = markdown(meta, rows)
    if md:
        Path(md).write_text(text + "\n")
    return text
