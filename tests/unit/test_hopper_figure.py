"""tools/hopper_figure.py on the committed halves of session 11's hopper run: every timed row lands in
exactly one (block, dtype) group, the geomeans are those of the rows, and the figure is written."""
import math
from pathlib import Path

from kernelseek import results as R

REPO = Path(__file__).resolve().parents[2]
RUNS = [REPO / "data" / "runs" / n for n in ("h200-hopper-20261201-215320-fa3_hopper-v13peers-dense-varlen",
                                             "h200-hopper-20261201-220056-fa3_hopper-v13peers-paged-decode")]


def test_groups_partition_the_timed_rows_and_the_figure_is_written(tmp_path, capsys, load_tool):
    hf = load_tool("hopper_figure")
    rows = [r for d in RUNS for r in R.load(d)[0]]
    g = hf.groups(rows)
    timed = [r for r in rows if r.graph_speedup]
    assert sum(len(v) for v in g.values()) == len(timed) > 150
    fp8_paged = [r.graph_speedup for r in timed if r.scenario.startswith("paged_") and r.features["dtype"] == "fp8"]
    assert sorted(g[("paged", "fp8")]) == sorted(fp8_paged)
    assert hf.geomean(fp8_paged) == math.exp(sum(map(math.log, fp8_paged)) / len(fp8_paged))
    out = tmp_path / "h.png"
    assert hf.main([str(d) for d in RUNS] + ["--out", str(out)]) == 0
    assert out.stat().st_size > 20_000 and out.read_bytes()[:4] == b"\x89PNG"
    assert "paged   fp8" in capsys.readouterr().out
