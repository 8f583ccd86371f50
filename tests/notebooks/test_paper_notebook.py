"""The paper's numbers: the data in data/paper/ against the documents in ../shared/seeds/, and the
paper_numbers notebook run headlessly by papermill (with and without traces to recompute from)."""
import json
import os
from pathlib import Path

import pytest

from kernelseek import paper

ROOT = Path(__file__).resolve().parents[2]
CAMP = ROOT / "tests" / "fixtures" / "campaign_small"


def test_every_number_quotes_its_source():
    nums = paper.load()
    assert len(nums) >= 100
    assert {n.source for n in nums} <= set(paper.sources())
    assert all(n.as_written in n.sentence for n in nums)
    if not paper.SEEDS_DIR.is_dir():
        pytest.skip(f"the source documents are not here ({paper.SEEDS_DIR}); sentences not checked")
    assert paper.check(nums) == []


def test_disagreements_are_kept_not_reconciled():
    nums = paper.load()
    dis = paper.disagreements(nums)
    got = {q: sorted(set(g["value"])) for q, g in dis.groupby("quantity")}
    assert got["equipped_geomean_fa3"] == [0.48, 0.50]
    assert got["blackwell_scenarios_correct"] == [154, 182]
    assert paper.values(nums, "question_driven_geomean_fa3") == [1.13]
    assert "question_driven_geomean_fa3" not in got


def test_check_finds_a_misquote(tmp_path):
    (tmp_path / "doc.txt").write_text("The agent reached 1.13x on the grid.")
    good = paper.Number("a", "q", 1.13, "x", "s", "doc.txt", "1.13x", "The agent reached 1.13x on the grid.")
    bad = paper.Number("b", "q", 1.14, "x", "s", "doc.txt", "1.14x", "The agent reached 1.14x on the grid.")
    assert paper.check([good], tmp_path) == []
    probs = paper.check([bad], tmp_path)
    assert len(probs) == 1 and "not found verbatim" in probs[0]


def test_recompute_says_what_it_cannot_do(tmp_path):
    r = paper.recompute([tmp_path / "missing.jsonl"])
    assert not r.available and "not found" in r.reason and not r.values
    assert paper.recompute([]).reason == "no trace given"
    raw = paper.recompute([ROOT / "tests" / "fixtures" / "claude_code" / "session.jsonl"])
    assert not raw.available and "import-claude-code" in raw.reason


def run_paper_nb(tmp_path, **params) -> dict:
    pm = pytest.importorskip("papermill")
    out = tmp_path / "paper.json"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([old] if old else []))
    try:
        pm.execute_notebook(str(ROOT / "notebooks" / "paper_numbers.ipynb"), str(tmp_path / "paper.out.ipynb"),
                            kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False,
                            parameters=dict(params, out_json=str(out)), execution_timeout=180)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    nb = json.loads((tmp_path / "paper.out.ipynb").read_text())
    rec = json.loads(out.read_text())
    rec["_pngs"] = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    return rec


def test_paper_notebook_reads_data_traces_by_default_and_says_what_cannot_be_compared(tmp_path):
    rec = run_paper_nb(tmp_path)
    data = ROOT / "data" / "traces"
    assert rec["recompute"]["traces"] == [str(p) for p in sorted(data.glob("*.jsonl"))]
    if any(r["provenance"] == "model-driven" for r in rec["traces"]):
        assert rec["comparable"] is True
        return
    assert rec["comparable"] is False
    nb = json.loads((tmp_path / "paper.out.ipynb").read_text())
    text = "".join("".join(o.get("data", {}).get("text/markdown", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "comparison with the paper's human-questioned campaign is not yet possible" in text


def test_paper_notebook_on_a_folder_with_a_model_driven_trace(tmp_path):
    """A folder of traces as the user points the notebook at it: the fixture campaign, and the same
    events with a real model named (model-driven by its start event) as the equipped arm."""
    folder = tmp_path / "traces"
    folder.mkdir()
    lines = (CAMP / "trace.jsonl").read_text().splitlines()
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    start = json.loads(lines[0])
    start.update(arm="equipped", model="claude-sonnet-4-5", config=dict(start["config"], note="", arm="equipped"))
    (folder / "b.jsonl").write_text("\n".join([json.dumps(start)] + lines[1:]) + "\n")
    rec = run_paper_nb(tmp_path, traces=[str(folder)])
    assert [r["provenance"] for r in rec["traces"]] == ["hand-built", "model-driven"]
    assert rec["comparable"] is True
    v = rec["recompute"]["values"]
    assert v["question_driven_tool_calls"] == v["equipped_tool_calls"] == 3
    assert v["equipped_geomean_fa3"] == pytest.approx(1.0340, abs=1e-4)


def test_paper_notebook_with_a_trace(tmp_path):
    rec = run_paper_nb(tmp_path, traces=[str(CAMP)])
    assert rec["numbers"] == len(paper.load())
    assert rec["disagreements"]["equipped_geomean_fa3"] == [0.48, 0.5]
    assert rec["_pngs"] >= 11                      # the paper's charts, and one figure per family
    if paper.SEEDS_DIR.is_dir():
        assert rec["check"] == []
    r = rec["recompute"]
    try:
        import kernelseek.analytics  # noqa: F401
    except ImportError:
        assert not r["available"] and "kernelseek.analytics is unavailable" in r["reason"]
        return
    assert r["available"], r["reason"]
    # the fixture's trace: one human question, three evaluation tool calls, best geomean of evals/2
    v = r["values"]
    assert v["human_messages"] == 1 and v["message_type_question"] == 1
    assert v["question_driven_tool_calls"] == 3 and v["benchmark_runs_question_driven"] == 3
    assert v["category_gap_triage"] == 1
    assert v["question_driven_geomean_fa3"] == pytest.approx(1.0340, abs=1e-4)
    assert rec["comparable"] is False and rec["traces"][0]["provenance"] == "hand-built"
    side = {row["quantity"]: row for row in rec["side_by_side"]}
    assert side["human_messages"]["paper"] == "162" and side["human_messages"]["recomputed"] == 1
    assert side["question_driven_tool_calls"]["paper"] == "11500 | 11532"


def test_paper_notebook_without_traces(tmp_path):
    rec = run_paper_nb(tmp_path, traces=[])
    assert rec["recompute"] == {"available": False, "reason": "no trace given", "traces": [], "values": {}}
    assert "side_by_side" not in rec and rec["comparable"] is False
    # the paper's side of every family is still shown: its values, one figure per family
    assert set(rec["families"]) == {"messages", "tools", "reading", "timeline"}
    assert all(r["recomputed"] is None for f in rec["families"].values() for r in f)
    sink = {r["quantity"]: r for r in rec["families"]["timeline"]}["turning_point_coverage_sink_error"]
    assert sink["paper"] == "495" and "no event says so" in sink["not from a trace"]
    qb = rec["questioner_bench"]                     # issue 30: the bank questioner's table
    assert qb["all"]["situations"] == qb["tuning"]["situations"] + qb["held_back"]["situations"] >= 16
    assert 0.0 <= qb["held_back"]["top3"] <= 1.0 and "random_top1" in qb["tuning"]
