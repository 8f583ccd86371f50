"""The serving figure and table read a results file. The file here is a SYNTHETIC TEST FIXTURE made in the
test (made-up times on the real rows' counts, through serving_bench.summarize as the bench makes them): it
is never written into the repository and none of its numbers is a measurement."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import serving_bench as SB
from kernelseek import serving_counts as SC
from kernelseek import serving_figures as SF
from kernelseek import serving_grid as G

FAKE_GPU = "NVIDIA H200 (SYNTHETIC TEST FIXTURE, not a measurement)"


def _row(row, times, ok=True):
    b = SC.bound_for_gpu(row, FAKE_GPU)
    res = {"name": row.name, "model": row.model, "mix": row.mix(), "bytes": SC.min_bytes(row), "flops": SC.flops(row),
           "bound_ms": b.ms, "limit": b.limit, "ok": ok}
    if times:
        res["times"] = times
        SB.summarize(res, b)
    else:
        res["error"] = "RuntimeError: made-up failure"
    return res


@pytest.fixture
def results(tmp_path):
    rows = G.load_rows()
    t = lambda call, graph, host=0.05: {"time_ms": call, "graph_ms": graph, "host_ms": host}
    data = {"meta": {"gpu": FAKE_GPU, "driver": "fixture", "torch": "fixture", "git_rev": "0" * 40,
                     "started_utc": "fixture"},
            "rows": [_row(rows[2], {"ours": t(2.0, 1.6), "fa3": t(3.0, 2.0), "flashinfer": t(2.5, 2.4)}),
                     _row(rows[4], {"ours": t(4.0, 4.0), "fa3": t(3.0, None)}),
                     _row(rows[7], {"ours": t(9.0, 8.0)}),
                     _row(rows[8], None, ok=False)]}
    p = tmp_path / "serving.json"
    p.write_text(json.dumps(data))
    return p, rows, data


def test_summarize_picks_the_fastest_baseline_per_measure(results):
    _, rows, data = results
    a, b, c, d = data["rows"]
    assert (a["best_call"], a["best_call_ms"], a["best_graph"], a["best_graph_ms"]) == ("flashinfer", 2.5, "fa3", 2.0)
    assert a["speedup_call"] == pytest.approx(1.25) and a["speedup_graph"] == pytest.approx(1.25)
    bound = SC.bound_for_gpu(rows[2], FAKE_GPU)
    assert a["ours_graph_rates"]["frac_bound"] == pytest.approx(bound.ms / 1.6)
    assert a["ours_graph_rates"]["gbps"] == pytest.approx(SC.min_bytes(rows[2]) / 1.6 / 1e6)
    assert b["speedup_call"] == pytest.approx(0.75) and b["best_graph"] is None and b["speedup_graph"] is None
    assert c["best_call"] is None and c["speedup_call"] is None


def test_markdown_reads_every_number_from_the_file(results):
    p, rows, _ = results
    meta, rs = SF.load(p)
    md = SF.markdown(meta, rs)
    lines = [ln for ln in md.splitlines() if ln.startswith(f"| {rows[2].name}")]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].split("|")]
    assert cells[5] == "2.000 / 1.600" and cells[7] == "flashinfer / fa3" and cells[9] == "1.250 / 1.250"
    bound = SC.bound_for_gpu(rows[2], FAKE_GPU)
    assert cells[10] == f"{100 * bound.ms / 1.6:.1f}" and cells[11].endswith("GB/s")
    assert "SYNTHETIC TEST FIXTURE" in md
    assert f"| {rows[4].name} |" in md and "0.750 / n/a" in md
    assert f"{rows[8].name} **failed: RuntimeError: made-up failure**" in md


def test_figure_has_one_bar_per_time(results):
    p, _, data = results
    meta, rs = SF.load(p)
    fig = SF.figure(meta, rs)
    left, right = fig.axes
    speedups = [v for r in rs for v in (r.get("speedup_call"), r.get("speedup_graph")) if v]
    assert sorted(round(x.get_width(), 6) for x in left.patches) == sorted(round(v, 6) for v in speedups)
    fracs = [r.get(k, {}).get("frac_bound") for r in rs for k in ("ours_call_rates", "ours_graph_rates", "best_graph_rates")]
    assert len(right.patches) == len([f for f in fracs if f])
    assert "SYNTHETIC TEST FIXTURE" in fig._suptitle.get_text()


def test_command_line_writes_png_and_table(results, tmp_path):
    p, _, _ = results
    png, md = tmp_path / "s.png", tmp_path / "s.md"
    tool = Path(__file__).resolve().parents[2] / "tools" / "serving_figures.py"
    r = subprocess.run([sys.executable, str(tool), str(p), "--png", str(png), "--md", str(md)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and md.read_text().count("\n| s0") == 4
    printed = subprocess.run([sys.executable, str(tool), str(p), "--png", str(png)], capture_output=True, text=True,
                             timeout=300)
    assert printed.stdout.strip() == md.read_text().strip()


def test_not_a_results_file(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{}")
    with pytest.raises(ValueError, match="not a serving results file"):
        SF.load(p)
