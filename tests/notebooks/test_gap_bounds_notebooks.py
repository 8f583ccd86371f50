"""Gap triage and bound differencing notebooks, and `kernelseek report`, run headlessly by papermill
on the recorded campaign fixture (tests/fixtures/campaign_small); the asserts read the JSON of key
values each notebook writes (`out_json`) and compare it with the library's own numbers."""
import json
import math
import os
import shutil
from pathlib import Path

import pytest

pm = pytest.importorskip("papermill")
pytest.importorskip("ipykernel")

from kernelseek import bounds, report, results, triage  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CAMP = ROOT / "tests" / "fixtures" / "campaign_small"
CEILINGS = CAMP / "ceilings.json"


def run_nb(name: str, tmp_path: Path, **params) -> tuple[dict, dict]:
    """Execute notebooks/<name>.ipynb with params; returns (recorded values, executed notebook)."""
    out_json = tmp_path / f"{name}.json"
    out_nb = tmp_path / f"{name}.out.ipynb"
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env_path] if env_path else []))
    try:
        pm.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out_nb), kernel_name="python3",
                            parameters=dict(params, out_json=str(out_json)), cwd=str(ROOT / "notebooks"),
                            progress_bar=False, execution_timeout=180)
    finally:
        if env_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_path
    return json.loads(out_json.read_text()), json.loads(out_nb.read_text())


def pngs(nb: dict) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))


def test_gap_triage_one_run(tmp_path):
    run = CAMP / "evals" / "0"
    rec, nb = run_nb("gap_triage", tmp_path, run=str(run))
    want = triage.deficit_summary(run)
    assert rec["summary"]["timed"] == want["timed"] == 25
    assert math.isclose(rec["summary"]["deficit"], want["deficit"], rel_tol=1e-12)
    assert math.isclose(rec["summary"]["geomean"], want["geomean"], rel_tol=1e-12)
    # the rows on the slow fallback (0.01x) carry the largest shares; the failed row is listed first
    assert {r["scenario"][:3] for r in rec["top_rows"]} == {"r13", "r14", "r15", "r16", "r17"}
    assert all(math.isclose(r["speedup"], 0.01) for r in rec["top_rows"])
    assert rec["not_timed"] == [{"scenario": "r26_prefill_d256_gqa2_s4k_cap50", "class": "failed",
                                 "reason": "failed: max error 0.412 over bound 0.0081 (softcap applied after scaling)"}]
    assert set(rec["heavy_groups"][:3]) == {"head_dim=256", "head_dim=96", "head_dim=192"}   # excess 3.19 each
    assert "moved" not in rec
    assert pngs(nb) == 1


def test_gap_triage_two_runs(tmp_path):
    before, after = CAMP / "evals" / "1", CAMP / "evals" / "2"
    rec, nb = run_nb("gap_triage", tmp_path, run=str(before), compare=str(after))
    cmp = triage.compare(before, after)
    assert rec["compare_summary"]["geomean"] == pytest.approx(triage.deficit_summary(after)["geomean"])
    assert rec["moved"]["better"] == sorted(cmp.loc[cmp["moved"] == "better", "scenario"])
    assert "r25_prefill_d128_gqa4_s4k_win1024" in rec["moved"]["better"]
    assert rec["moved"]["worse"] == []
    assert rec["not_timed"][0]["class"] == "n/a"          # r24 had no usable baseline in evals/1
    assert pngs(nb) == 2


def test_gap_triage_repeatability_of_committed_h200_runs(tmp_path):
    """Three consecutive bench26 runs of v10 on the H200 (data/runs/): the notebook reports each
    pair's rows over 3% with the side that moved them, and draws them."""
    runs = [str(ROOT / "data" / "runs" / f"h200-bench26-20261130-{t}-fa3_hopper-v10")
            for t in ("103933", "104252", "104338")]
    rec, nb = run_nb("gap_triage", tmp_path, run=runs[0], repeat=runs[1:])
    assert [p["over_tol"] for p in rec["repeat"]] == [5, 2]
    moved = {n: c for n, _, c in rec["repeat"][1]["moved"]}
    assert set(moved) == {"r04_prefill_d128_s512_causal", "r20_decode_paged_b16_kv8k"}
    assert all(c.startswith("baseline host-bound") for c in moved.values())
    assert rec["repeat"][0]["own_time_max_move"] < 0.03
    assert pngs(nb) == 2                                    # the speedup bars and the repeat plot


def test_bounds_one_run(tmp_path):
    run = CAMP / "evals" / "2"
    rec, nb = run_nb("bounds", tmp_path, run=str(run), ceilings=str(CEILINGS))
    rows, meta = results.load(run)
    df = bounds.bounds_table(rows, json.loads(CEILINGS.read_text()), meta)
    assert rec["rows"] == 26 and rec["timed"] == 26
    assert rec["binds"] == df["binds"].value_counts().to_dict() == {"compute": 20, "memory": 6}
    assert rec["median_sol_candidate"] == pytest.approx(float(df["sol_candidate"].median()))
    assert rec["median_sol_baseline"] == pytest.approx(0.62)      # the fixture's baseline sits at 62%
    assert rec["above_bound"] == []
    assert rec["largest_gap"][0]["scenario"] == "r12_prefill_d128_s16k"
    assert rec["median_outside_ms"] == pytest.approx(0.003)
    assert rec["ceilings"]["read_gbps"] == 4200.0
    assert pngs(nb) == 1


def test_bounds_two_runs(tmp_path):
    rec, nb = run_nb("bounds", tmp_path, run=str(CAMP / "evals" / "1"), compare=str(CAMP / "evals" / "2"),
                     ceilings=str(CEILINGS))
    assert rec["sol_improved"] == 26 and rec["sol_worsened"] == 0
    assert rec["median_sol_change"] > 0
    assert rec["outside_change_ms_median"] == pytest.approx(-0.003)   # 6 us -> 3 us outside the kernel
    assert rec["compare_values"]["median_sol_candidate"] > rec["median_sol_candidate"]
    assert pngs(nb) == 2


def test_bounds_without_ceilings_says_so(tmp_path):
    rec, _ = run_nb("bounds", tmp_path, run=str(CAMP / "evals" / "2"), ceilings=str(tmp_path / "none.json"))
    assert "no such ceilings file" in rec["error"]
    assert "rows" not in rec


def test_report_renders_html(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(CAMP / "evals" / "2", run)
    monkeypatch.chdir(tmp_path / "run")             # out/ goes under the working directory, not into the run
    files = sorted(p.name for p in run.iterdir())
    paths = report.render(run, ceilings=CEILINGS, code=False)
    assert [p.name for p in paths] == ["gap_triage.html", "bounds.html"]
    out = run / "out" / "report" / "run"
    assert all(p.parent == out for p in paths)
    assert sorted(p.name for p in run.iterdir()) == sorted(files + ["out"])   # nothing else written into the run
    gap, bnd = (p.read_text() for p in paths)
    assert "Gap triage" in gap and "Bound differencing" in bnd
    assert gap.count("data:image/png;base64") >= 1 and bnd.count("data:image/png;base64") >= 1
    assert "import json" not in gap                    # code cells left out
    rec = json.loads((out / "gap_triage.json").read_text())
    assert rec["summary"]["geomean"] == pytest.approx(triage.deficit_summary(run)["geomean"])
    with pytest.raises(FileNotFoundError):
        report.render(tmp_path / "nothing")


def test_report_on_a_campaign_and_the_cli(tmp_path, capsys, monkeypatch):
    camp = tmp_path / "camp"
    shutil.copytree(CAMP, camp)
    monkeypatch.chdir(tmp_path)
    paths = report.render(camp, notebooks=("gap_triage",))       # the latest evaluation vs the one before
    assert paths == [tmp_path / "out" / "report" / "camp" / "gap_triage.html"]
    assert not (camp / "notebooks").exists()
    rec = json.loads((tmp_path / "out" / "report" / "camp" / "gap_triage.json").read_text())
    assert rec["run"].endswith("evals/1") and rec["compare"].endswith("evals/2")
    from kernelseek.cli import main
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "missing: no such run or campaign directory" in capsys.readouterr().err


def test_gap_triage_history_of_the_committed_kernel_versions(tmp_path):
    """With `history`, the notebook tabulates and draws every version of the run's kernel from the
    committed H200 runs, the same table as triage.history."""
    from kernelseek.mainjob import committed_runs
    run = ROOT / "data" / "runs" / "h200-bench26-20261130-114832-fa3_hopper-v12"
    rec, nb = run_nb("gap_triage", tmp_path, run=str(run), history="data/runs")   # from the repository root
    want = triage.history(committed_runs(ROOT / "data" / "runs", grid="bench26"), kernel="kernels/fa3_hopper.cu")
    assert [h["version"] for h in rec["history"]] == list(want["version"])
    # pinned to v12 by name, so a later committed version does not change what is checked
    v12 = next(h for h in rec["history"] if h["version"] == "v12")
    assert v12["geomean"] == pytest.approx(float(want.set_index("version").loc["v12", "geomean"]))
    assert pngs(nb) == 2                                    # the speedup bars and the history plot
