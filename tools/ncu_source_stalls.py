"""Summarize Nsight Compute's source page (per-SASS-instruction warp stall samples) of one kernel.

    python tools/ncu_source_stalls.py PROFILE.csv[.gz] [--top 25] [--ops]

PROFILE.csv is what `ncu --section WarpStateStats --section SourceCounters --page source --print-source sass
--csv ...` prints for one kernel launch (tools/gpu_v18.sh tma2 writes them). Prints the kernel's name, its
stall reasons as shares of all samples, the top instructions by samples with their main reasons, the samples
by opcode, and with --ops the warp-level instructions executed by opcode (how many instructions a tile costs,
kernel against kernel). Runs anywhere (no GPU).
"""
from __future__ import annotations

import argparse
import collections
import csv
import sys


def load(path: str) -> tuple[str, list[dict]]:
    """(the kernel-name line, one dict per SASS instruction) of an ncu source-page CSV."""
    import gzip
    lines = (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)).read().splitlines()
    try:
        i = next(k for k, line in enumerate(lines) if line.startswith('"Address"'))
    except StopIteration:
        raise SystemExit(f"{path}: no source-page table (a line starting with \"Address\")") from None
    return (lines[i - 1] if i else ""), list(csv.DictReader(lines[i:]))


def num(x) -> float:
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def opcode(src: str, full_hgmma: bool = True) -> str:
    words = [w for w in src.strip().split() if not w.startswith("@")]
    if not words:
        return "?"
    return words[0][:20] if full_hgmma and words[0].startswith("HGMMA") else words[0].split(".")[0]


def summary(path: str, top: int = 25, ops: bool = False) -> str:
    name, rows = load(path)
    samples = "Warp Stall Sampling (All Samples)"
    tot = sum(num(r.get(samples)) for r in rows) or 1.0
    stalls = [c for c in (rows[0] if rows else {}) if c.startswith("stall_") and "Not Issued" not in c]
    by_reason = {c[6:]: sum(num(r[c]) for r in rows) / tot * 100 for c in stalls}
    out = [name[:160], f"instructions {len(rows)}, samples {int(tot)}",
           "stall reasons (% of samples): " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                       sorted(by_reason.items(), key=lambda kv: -kv[1]) if v >= 0.5)]
    for r in sorted(rows, key=lambda r: -num(r.get(samples)))[:top]:
        main = sorted(((num(r[c]), c[6:]) for c in stalls), reverse=True)[:3]
        out.append(f"{r['Address'].strip()[-6:]:>6} {num(r.get(samples)) / tot * 100:5.1f}%  "
                   f"{r['Source'].strip()[:58]:<58} " + " ".join(f"{k}:{v / tot * 100:.1f}" for v, k in main if v))
    by_op = collections.Counter()
    for r in rows:
        by_op[opcode(r["Source"], False)] += num(r.get(samples))
    out.append("samples by opcode (%): " + ", ".join(f"{k} {v / tot * 100:.1f}" for k, v in by_op.most_common(15)))
    if ops:
        ex = collections.Counter()
        for r in rows:
            ex[opcode(r["Source"])] += num(r.get("Instructions Executed"))
        out.append(f"warp instructions executed: {int(sum(ex.values()))}; by opcode: "
                   + ", ".join(f"{k} {int(v)}" for k, v in ex.most_common(20)))
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--ops", action="store_true")
    a = ap.parse_args(argv)
    print(summary(a.csv, a.top, a.ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
