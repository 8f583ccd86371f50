"""Plots return matplotlib Figures with one bar per row (or per family and build)."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from kernelseek import plots, profile, results  # noqa: E402
from kernelseek.results import Row  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sass"
CEIL = {"gpu": "Test GPU", "bf16_tflops": 800.0, "fp16_tflops": 700.0, "fp8_tflops": 1600.0, "read_gbps": 4000.0}


def _rows():
    def r(name, s, **kw):
        return Row(scenario=name, status="passed", features={"dtype": "bf16"}, flops=1e12, min_bytes=1e9,
                   time_ms=2.0 / s, baseline_ms=2.0, baseline_status="passed", speedup=s, **kw)
    return [r("a", 0.5, row=1), r("b", 1.5, row=2), r("c", 1.0, row=3),
            Row(scenario="d", status="error", reason="illegal memory access", row=4),
            Row(scenario="e", status="passed", time_ms=1.0, baseline_status="n/a", row=5)]


def _bars(fig):
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


def test_speedup_bars_log_axis_parity_and_failure_marks(tmp_path):
    fig = plots.speedup_bars(_rows())
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    bars = _bars(fig)
    assert len(bars) == 3
    # bars start at parity and end at the speedup
    assert all(b.get_y() == 1.0 for b in bars)
    assert [round(b.get_y() + b.get_height(), 6) for b in bars] == [0.5, 1.5, 1.0]
    marks = [ln for ln in ax.lines if ln.get_marker() == "x"]
    assert len(marks) == 2                                       # the error row and the n/a row
    assert any(ln.get_ydata()[0] == 1.0 and ln.get_linestyle() == "--" for ln in ax.lines)   # parity
    # plain tick labels, rows named, axis labels, and a legend for colours and marks
    assert all("\\times" not in t.get_text() and "\u00d7" not in t.get_text() for t in ax.get_yticklabels())
    assert [t.get_text() for t in ax.get_xticklabels()][:2] == ["1 a", "2 b"]
    assert ax.get_xlabel() and "baseline ms / our ms" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "faster than the baseline" in legend and "slower than the baseline" in legend
    assert any(t.startswith("not timed") for t in legend)
    fig.savefig(tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000


def test_speedup_bars_caption_names_kernel_baseline_and_run():
    rows = _rows()
    rows[1].baseline, rows[1].suspicious = "fa4", True
    meta = {"kernel": "kernels/k.cu", "grid": "g", "baseline": "best", "env": {"gpu": "Test GPU"}}
    fig = plots.speedup_bars(rows, meta=meta, run="run-1")
    cap = fig.axes[0].get_title()
    assert cap == "kernel k.cu | grid g | baseline best (per row the fastest of: fa4) | run run-1 | Test GPU"
    assert any(ln.get_marker() == "*" for ln in fig.axes[0].lines)         # the flagged row's star
    assert any("FLAGGED" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_sol_bars_two_per_row():
    fig = plots.sol_bars(_rows(), CEIL)
    bars = _bars(fig)
    assert len(bars) == 2 * 5
    # row a: bound 1e12 / 800e12 = 1.25 ms; candidate 4 ms -> 0.3125, baseline 2 ms -> 0.625
    assert round(bars[0].get_height(), 6) == 0.3125 and round(bars[5].get_height(), 6) == 0.625
    # each tick names the row and the bound that binds it, in words (no c/m letters)
    assert fig.axes[0].get_xticklabels()[0].get_text() == "1 a | compute"
    assert "ceilings Test GPU" in fig.axes[0].get_title()


def test_timeline_plot(tmp_path):
    d = results.new_run_dir(tmp_path, "x")
    results.save(d, _rows(), {})
    fig = plots.timeline_plot([d, ("later", _rows()[:2])])
    ax = fig.axes[0]
    assert len(ax.lines[0].get_xdata()) == 2 and ax.get_yscale() == "log"


def test_mix_plot_bars_per_family_and_build():
    a = profile.instruction_mix((FIX / "tiny.sass").read_text())
    b = profile.instruction_mix((FIX / "hopper.sass").read_text())
    fig = plots.mix_plot({"tiny": a, "hopper": b})
    assert len(_bars(fig)) == 2 * len(profile.FAMILIES)
    fig = plots.mix_plot({"tiny": a}, families=["FFMA", "MUFU"])
    assert [round(p.get_height()) for p in _bars(fig)] == [a["FFMA"], a["MUFU"]]
