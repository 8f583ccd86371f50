"""tools/fa3api_figure.py on session 26's committed grids (data/fa3api/session26-e49e89d: two runs in a row):
each run keeps its own label, its rows' judged speeds are the file's, and the figure is written."""
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
D = REPO / "data" / "fa3api"
RUNS = [D / "session25-3801fce" / "grid.json", D / "session26-e49e89d" / "grid_a" / "grid.json",
        D / "session26-e49e89d" / "grid_b" / "grid.json"]


def test_runs_keep_their_labels_and_speeds_and_the_figure_is_written(tmp_path, load_tool):
    t = load_tool("fa3api_figure")
    assert [t.run_label(p) for p in RUNS] == ["s25-3801fce grid", "s26-e49e89d grid_a grid", "s26-e49e89d grid_b grid"]
    rows = {r["name"]: r for r in json.loads(RUNS[1].read_text())}
    sp = t.speeds(RUNS[1])
    assert sp["varlen_q_paged"] == (rows["varlen_q_paged"]["judged_speed"], "per_call")
    assert sp["splits_decode"][1] == "graph" and len(sp) == 19
    out = tmp_path / "f.png"
    assert t.main([str(out), *map(str, RUNS)]) == 0
    assert out.stat().st_size > 20_000 and out.read_bytes()[:4] == b"\x89PNG"
