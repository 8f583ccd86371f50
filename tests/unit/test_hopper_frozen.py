"""The hopper grid is frozen once fast-kernel work starts: its scenarios must stay those the
committed H200 runs checked (later changes add a new grid instead)."""
import json
from pathlib import Path

from kernelseek import store
from kernelseek.scenarios import load_grid

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"


def test_hopper_grid_matches_the_committed_h200_runs():
    """A whole-grid run recorded exactly the grid's scenarios, in order; a run of part of it (meta
    scenarios_filter: session 11 timed the grid in two halves) a subsequence of them. Each row's
    features are its scenario's (plus, since session 11, the kernel's word on its path)."""
    names = [s.name for s in load_grid("hopper")]
    runs = [d for d in store.list_runs(RUNS) if d.name.startswith("h200-hopper-")]
    assert runs
    for d in runs:
        doc = store.read_results(d)
        recorded = [r["scenario"] for r in doc["rows"]]
        part = doc["meta"].get("scenarios_filter")
        want = [n for n in names if n in set(recorded)] if part else names
        assert recorded == want and recorded, f"{d.name}: the hopper grid changed since this run"
    feats = {s.name: s.features() for s in load_grid("hopper")}
    for d in runs[-2:]:
        rows = store.read_results(d)["rows"]
        assert all({k: v for k, v in r["features"].items() if k != "path"} == json.loads(json.dumps(feats[r["scenario"]]))
                   for r in rows), d.name
