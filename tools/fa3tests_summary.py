"""Summarise a run of FA3's tests against kernelseek.attention (the JSON lines tools/fa3tests_shim.py's
conftest writes): counts per test function, then every failure with its reason, grouped by reason.

    python3 tools/fa3tests_summary.py LOG.jsonl [LOG2.jsonl ...] > summary.md
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict


def load(paths):
    rows = []
    for p in paths:
        try:
            rows += [json.loads(line) for line in open(p) if line.strip()]
        except FileNotFoundError:
            pass
    return rows


def summary(rows) -> str:
    per = defaultdict(Counter)
    for r in rows:
        fn = r["id"].split("::")[-1].split("[")[0]
        per[fn][r["outcome"]] += 1
    out = ["| test function | run | passed | failed | skipped | errors |", "|---|---|---|---|---|---|"]
    tot = Counter()
    for fn in sorted(per):
        c = per[fn]
        tot.update(c)
        out.append(f"| {fn} | {sum(c.values())} | {c['passed']} | {c['failed']} | {c['skipped']} | {c['error']} |")
    out.append(f"| **all** | {sum(tot.values())} | {tot['passed']} | {tot['failed']} | {tot['skipped']} "
               f"| {tot['error']} |")
    fails = [r for r in rows if r["outcome"] in ("failed", "error")]
    groups = defaultdict(list)
    for r in fails:
        groups[re.sub(r"[-+]?\d+\.\d+(e[-+]?\d+)?", "<x>", r["reason"])[:160]].append(r["id"].split("::")[-1])
    out += ["", f"## failures ({len(fails)}), by reason", ""]
    for reason, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        out.append(f"- {len(ids)} x `{reason}`")
        out += [f"    - {i}" for i in ids]
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(load(sys.argv[1:])))
