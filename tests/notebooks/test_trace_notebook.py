"""notebooks/trace_analysis.ipynb under papermill, on traces with known numbers."""
import json
from pathlib import Path

import pytest

pm = pytest.importorskip("papermill")
REPO = Path(__file__).resolve().parents[2]


def test_trace_notebook_on_fixtures(tmp_path):
    out = tmp_path / "summary.json"
    pm.execute_notebook(str(REPO / "notebooks" / "trace_analysis.ipynb"), str(tmp_path / "out.ipynb"),
                        parameters={"traces_glob": str(REPO / "tests" / "fixtures" / "traces" / "*.jsonl"),
                                    "out_json": str(out)},
                        kernel_name="python3", progress_bar=False, cwd=str(REPO))
    rows = {r["trace"]: r for r in json.loads(out.read_text())}
    k = rows["known_counts"]
    assert k["person_messages"] == 7 and k["tool_calls"] == 11 and k["reread_share"] == 0.82
    assert k["best_geomean"] == 0.9 and k["steps_to_best"] == 9
    assert abs(k["recurrence_share"] - 1 / 6) < 1e-9
    text = (tmp_path / "out.ipynb").read_text()
    assert "challenge a limit" in text and "sass/ptx" in text
