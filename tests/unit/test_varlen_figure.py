"""tools/varlen_figure.py on session 23's committed varlen runs: the values drawn are each row's kernel-time
speedup from the run's results, the figure is written, and an argument without a run directory is refused."""
import gzip
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / "data" / "runs"
OLD = RUNS / "h200-varlen-20261203-155341-fa3_hopper-v23a-ostoredensetma"
NEW = RUNS / "h200-varlen-20261203-161701-fa3_hopper-v23c"


def test_speedups_are_the_runs_kernel_speedups_and_the_figure_is_written(tmp_path, load_tool):
    vf = load_tool("varlen_figure")
    rows = json.load(gzip.open(NEW / "results.json.gz"))["rows"]
    sp = vf.speedups(NEW)
    assert sp == {r["scenario"]: r["kernel_speedup"] for r in rows} and len(sp) == 8
    old = vf.speedups(OLD)
    assert old.keys() == sp.keys()
    # session 23's two changes, as the committed runs hold them: hd64 and non-causal gained the most
    assert sp["v05_hd64_gqa8"] > old["v05_hd64_gqa8"] + 0.15 and sp["v06_noncausal"] > old["v06_noncausal"] + 0.15
    out = tmp_path / "v.png"
    assert vf.main(["--out", str(out), f"old={OLD}", f"new={NEW}"]) == 0
    assert out.stat().st_size > 20_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_a_run_without_a_label_is_refused(tmp_path, capsys, load_tool):
    with pytest.raises(SystemExit):
        load_tool("varlen_figure").main(["--out", str(tmp_path / "v.png"), str(NEW)])
    assert "expected LABEL=RUN_DIR" in capsys.readouterr().err
