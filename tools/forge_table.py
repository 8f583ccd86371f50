"""The short table tools/gpu_forge.sh prints last: the forging attacks' rows and, for every timed row
of the adversarial run, the parent's clock against the claimed per-call time (corroborate.py).

    python3 tools/forge_table.py OUT_DIR
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trust_table import verdicts  # noqa: E402  (tools/ is not a package)


def main(out: str) -> int:
    out = Path(out)
    print("== issue 21: forged replies and times")
    for f in sorted((out / "forge").glob("forge_*.json")):
        doc = json.loads(f.read_text())
        for r in doc["rows"]:
            c = r.get("corroboration") or {}
            g = c.get("graph") or {}
            print(f"{doc['kernel']:<18} gate={'on ' if doc['gate'] else 'off'} {r['scenario']:<16} {r['status']:<7} "
                  f"ratio={c.get('ratio')!s:<6} graph={g.get('ratio')!s:<6} graph_ms={r.get('graph_ms')!s:<8} "
                  f"{(r['reason'] or r.get('graph_note') or '')[:80]}")
    adv = out / "results_h200.json"
    if not adv.is_file():
        print("no results_h200.json")
        return 1
    doc = verdicts(adv)
    ratios = [(k, r["scenario"], r["corroboration"]) for k, rows in doc["kernels"].items() for r in rows
              if (r.get("corroboration") or {}).get("ratio") is not None]
    if ratios:
        xs = [c["ratio"] for _, _, c in ratios]
        print(f"implied/claimed per call over {len(xs)} rows: min {min(xs):.3f} median {statistics.median(xs):.3f} "
              f"max {max(xs):.3f} (fails above 1.5 + 0.005 ms)")
        worst = sorted(ratios, key=lambda t: -t[2]["ratio"])[:5]
        for k, s, c in worst:
            print(f"  {k}/{s}: ratio {c['ratio']} claimed {c['claimed_ms']:.4f} ms implied {c['implied_ms']:.4f} "
                  f"calls {c['calls']} fixed {c['fixed_ms']:.2f} ms overhead {c['overhead_ms']:.4f} ms")
    graphs = [c["graph"]["ratio"] for rows in doc["kernels"].values() for r in rows
              for c in [r.get("corroboration") or {}] if (c.get("graph") or {}).get("ratio") is not None]
    if graphs:
        print(f"implied/claimed in graph replay over {len(graphs)} rows: min {min(graphs):.3f} "
              f"median {statistics.median(graphs):.3f} max {max(graphs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/out"))
