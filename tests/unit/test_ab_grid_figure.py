"""tools/ab_grid_figure.py on session 25's committed A/B (data/fa3api/session25-ab04dbc): per row the medians of
the rounds are the files' values, the figure is written, and a round missing a row is refused naming it."""
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
D = REPO / "data" / "fa3api" / "session25-ab04dbc"
DEF = [D / "grid_def_a.json", D / "grid_def_b.json"]
SMALL = [D / "grid_small_a.json", D / "grid_small_b.json"]


def test_medians_are_the_rounds_values_and_the_figure_is_written(tmp_path, load_tool):
    t = load_tool("ab_grid_figure")
    d, s = t.side(DEF), t.side(SMALL)
    raw = [{r["name"]: r for r in json.loads(p.read_text())} for p in DEF]
    want = (raw[0]["varlen_q_dense"]["ours_graph_ms"] + raw[1]["varlen_q_dense"]["ours_graph_ms"]) / 2 * 1e3
    assert d["varlen_q_dense"]["ours"] == pytest.approx(want)
    # what NOTES v25c reads from it: the dense row faster on the prefill, the page-16 row slower, paths as routed
    assert s["varlen_q_dense"]["ours"] < 0.8 * d["varlen_q_dense"]["ours"]
    assert s["varlen_q_paged"]["ours"] > 1.5 * d["varlen_q_paged"]["ours"]
    assert d["varlen_q_paged"]["paths"] == ["mixed_gather"] and s["varlen_q_paged"]["paths"] == ["prefill"]
    assert d["append_rotary_prefill"]["base"] is not None
    out = tmp_path / "ab.png"
    assert t.main(["--out", str(out), *map(str, DEF), "--variant", *map(str, SMALL)]) == 0
    assert out.stat().st_size > 20_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_a_round_missing_a_row_is_refused_naming_it(tmp_path, load_tool):
    rows = json.loads(DEF[1].read_text())
    bad = tmp_path / "round_b.json"
    bad.write_text(json.dumps([r for r in rows if r["name"] != "varlen_q_dense"]))
    with pytest.raises(ValueError, match=r"round_b.json: row 'varlen_q_dense' missing"):
        load_tool("ab_grid_figure").side([DEF[0], bad])
