"""The hopper grid is frozen once fast-kernel work starts: its scenarios must stay those the
committed H200 runs checked (later changes add a new grid instead)."""
import json
from pathlib import Path

from kernelseek.scenarios import load_grid

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"


def test_hopper_grid_matches_the_committed_h200_runs():
    names = [s.name for s in load_grid("hopper")]
    runs = sorted(RUNS.glob("h200-hopper-*/results.json"))
    assert runs
    for f in runs:
        recorded = [r["scenario"] for r in json.loads(f.read_text())["rows"]]
        assert recorded == names, f"{f.parent.name}: the hopper grid changed since this run"
    feats = {s.name: s.features() for s in load_grid("hopper")}
    rows = json.loads(runs[-1].read_text())["rows"]
    assert all(r["features"] == json.loads(json.dumps(feats[r["scenario"]])) for r in rows)
