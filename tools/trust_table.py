"""The short table tools/gpu_trust.sh prints last: verdicts, the defence's cost, the fail line.

    python3 tools/trust_table.py OUT_DIR      (reads what gpu_trust.sh left there)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def verdicts(adv: Path) -> dict:
    """Print results_h200.json's verdicts (how many adversarial kernels behaved as expected, and
    what the others did); returns the document."""
    doc = json.loads(adv.read_text())
    bad = {k: v for k, v in doc["verdict"].items() if v != ["as expected"]}
    print(f"adversarial: {len(doc['verdict']) - len(bad)}/{len(doc['verdict'])} as expected"
          + (f"; NOT: {', '.join(bad)}" if bad else ""))
    for k, v in bad.items():
        print(f"  {k}: {v[0][:150]}")
    return doc


def _rows(run_root: Path) -> tuple[list[dict], dict]:
    runs = sorted(p for p in run_root.glob("*/results.json"))
    if not runs:
        return [], {}
    doc = json.loads(runs[-1].read_text())
    return doc["rows"], doc["meta"]


def main(out: str) -> int:
    out = Path(out)
    print("== issue 20 on the GPU")
    probe = out / "probe.json"
    if probe.is_file():
        checks = json.loads(probe.read_text()).get("checks", {})
        print("probe: " + ", ".join(f"{k} {'ok' if v else 'FAIL'}" for k, v in checks.items()))
    adv = out / "results_h200.json"
    if adv.is_file():
        doc = verdicts(adv)
        flagged = [f"{k}/{r['scenario']}" for k, rows in doc["kernels"].items() for r in rows
                   if r.get("suspicious") and doc["expect"].get(k, {}).get("honest")]
        print(f"honest rows flagged: {flagged or 'none'}")
    on, meta_on = _rows(out / "runs" / "trust-on")
    off, meta_off = _rows(out / "runs" / "trust-off")
    if on and off:
        print("defence cost, fa3_hopper on bench26 rows (defence on vs --no-defence):")
        print(f"  {'row':>4} {'ms on':>9} {'ms off':>9} {'base on':>9} {'base off':>9} {'status on':>10} runcheck")
        by_off = {r["scenario"]: r for r in off}
        for r in on:
            o = by_off.get(r["scenario"], {})
            f = lambda x: f"{x:9.4f}" if isinstance(x, (int, float)) else f"{'-':>9}"
            print(f"  {r['row'] or '':>4} {f(r.get('time_ms'))} {f(o.get('time_ms'))} {f(r.get('baseline_ms'))} "
                  f"{f(o.get('baseline_ms'))} {r['status']:>10} {r.get('runcheck', '')}")
        d = meta_on.get("defence", {})
        print(f"  wall {meta_on.get('wall_s', 0):.1f} s on vs {meta_off.get('wall_s', 0):.1f} s off; defence "
              f"{d.get('cost_per_timed_row_s')} s per timed row {d.get('cost_s')}")
    fl, _ = _rows(out / "runs" / "failline")
    for r in fl:
        print(f"fail line (memo_host, --no-defence): {r['scenario']} {r['status']}: {r['reason'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/out"))
