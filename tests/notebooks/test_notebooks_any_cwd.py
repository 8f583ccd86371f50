"""Every notebook under notebooks/ executed by papermill from two working directories: the repository
root or notebooks/ (where a person starts Jupyter), and a temporary folder outside the repository (papermill
from anywhere). Relative parameters and defaults are taken from the repository, so each run must find the
same files and compute the same values. gap_triage and bounds run on their defaults, which pick the newest
committed H200 run: the test asks nbparams which run that is rather than naming one, so it holds when a
new run is committed; the other tests in this folder pin their runs."""
import json
import os
import sys
from pathlib import Path

import pytest

pm = pytest.importorskip("papermill")
pytest.importorskip("ipykernel")

from kernelseek import bounds, nbparams, paper, results, triage  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
FIXTURE = "tests/fixtures/campaign_small"          # relative on purpose: taken from the repository root


def execute(name: str, cwd: Path, tmp_path: Path, **params) -> dict:
    """Run notebooks/<name>.ipynb with its kernel started in `cwd`; returns the executed notebook."""
    out = tmp_path / f"{name}.out.ipynb"
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env_path] if env_path else []))
    try:
        pm.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), parameters=params,
                            kernel_name="python3", cwd=str(cwd), progress_bar=False, execution_timeout=240)
    finally:
        if env_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_path
    return json.loads(out.read_text())


def pngs(nb: dict) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))


def check_gap_triage(cwd, tmp_path):
    newest = nbparams.newest_run()
    nb = execute("gap_triage", cwd, tmp_path, out_json=str(tmp_path / "v.json"))
    rec = json.loads((tmp_path / "v.json").read_text())
    assert rec["run"] == str(newest)
    assert rec["summary"]["geomean"] == pytest.approx(triage.deficit_summary(newest)["geomean"])
    assert pngs(nb) == 1


def check_bounds(cwd, tmp_path):
    newest = nbparams.newest_run()
    nb = execute("bounds", cwd, tmp_path, out_json=str(tmp_path / "v.json"))
    rec = json.loads((tmp_path / "v.json").read_text())
    rows, meta = results.load(newest)
    assert rec["run"] == str(newest) and "error" not in rec
    assert rec["rows"] == len(rows) and "H200" in rec["ceilings"]["gpu"]
    df = bounds.bounds_table(rows, bounds.load_ceilings(bounds._gpu_name(meta)), meta)
    assert rec["median_sol_candidate"] == pytest.approx(float(df["sol_candidate"].median()))
    assert pngs(nb) == 1


def check_trace_analysis(cwd, tmp_path):
    execute("trace_analysis", cwd, tmp_path, out_json=str(tmp_path / "v.json"))   # default: data/traces/*.jsonl
    table = json.loads((tmp_path / "v.json").read_text())
    want = sorted(p.stem for p in (ROOT / "data" / "traces").glob("*.jsonl"))
    assert want and sorted(r["trace"] for r in table) == want


def check_paper_numbers(cwd, tmp_path):
    nb = execute("paper_numbers", cwd, tmp_path, out_json=str(tmp_path / "v.json"),
                 traces=["tests/fixtures/traces/known_counts.jsonl"])
    rec = json.loads((tmp_path / "v.json").read_text())
    assert rec["numbers"] == len(paper.load())
    assert rec["recompute"]["available"], rec["recompute"]["reason"]
    assert rec["recompute"]["traces"] == [str(ROOT / "tests" / "fixtures" / "traces" / "known_counts.jsonl")]
    assert pngs(nb) >= 9


def check_console(cwd, tmp_path):
    before = sorted(p.name for p in (ROOT / FIXTURE).iterdir())
    execute("console", cwd, tmp_path, campaign=FIXTURE, ceilings=f"{FIXTURE}/ceilings.json", auto_refresh=0,
            out_json=str(tmp_path / "v.json"))
    snap = json.loads((tmp_path / "v.json").read_text())
    assert snap["campaign"] == str(ROOT / FIXTURE) and snap["evals"] == 3
    assert set(snap["plots"]) == {"triage", "timeline", "bounds"}          # the ceilings file was found
    assert sorted(p.name for p in (ROOT / FIXTURE).iterdir()) == before      # nothing written into the fixture


def check_campaign(cwd, tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "fakeapi"))
    from fakeapi import FakeAPI, load_script
    from harness import KEY, config
    os.environ["ANTHROPIC_API_KEY"] = KEY
    try:
        with FakeAPI(load_script("reach_goal"), key=KEY, by_turn=True) as api:
            cfg = config(api.base_url).to_dict()
            # relative paths, taken from the repository root whatever the kernel's cwd
            cfg.update(kernel="tests/fixtures/runs/kernel.cu", evaluator="replay:tests/fixtures/runs/campaign",
                       prices="tests/fixtures/fakeapi/prices.yaml")
            nb = execute("campaign", cwd, tmp_path, campaign_dir=str(tmp_path / "camp"), config_json=json.dumps(cfg))
    finally:
        os.environ.pop("ANTHROPIC_API_KEY", None)
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "goal met" in text
    saved = json.loads((tmp_path / "camp" / "config.json").read_text())
    assert saved["kernel"] == str(ROOT / "tests" / "fixtures" / "runs" / "kernel.cu")


CWDS = {                 # the directory each notebook used to fail from, and one outside the repository
    "gap_triage": "root", "bounds": "root", "trace_analysis": "notebooks", "campaign": "notebooks",
    "console": "notebooks", "paper_numbers": "root",
}


def test_every_notebook_is_covered():
    assert sorted(CWDS) == NOTEBOOKS


@pytest.mark.parametrize("where", ["repo", "elsewhere"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_from_two_directories(name, where, tmp_path):
    away = tmp_path / "elsewhere"
    away.mkdir()
    cwd = away if where == "elsewhere" else ROOT / "notebooks" if CWDS[name] == "notebooks" else ROOT
    globals()[f"check_{name}"](cwd, tmp_path)
