"""Roofline bounds: the arithmetic against a hand computation, ceilings files, the grid fallback, CLI."""
import json
import math

import pytest

from kernelseek import bounds, results
from kernelseek.cli import main
from kernelseek.results import Row
from kernelseek.scenarios import load_grid

# a made-up ceilings dict (round numbers so the hand computation is easy; not a real GPU)
CEIL = {"gpu": "Test GPU 9000", "bf16_tflops": 800.0, "fp16_tflops": 700.0, "fp8_tflops": 1600.0,
        "read_gbps": 4000.0, "copy_gbps": 3500.0, "launch_us_events": 2.0, "launch_us_host": 5.0,
        "date": "2026-11-30T00:00:00Z"}


def _row(name, dtype, flops, nbytes, t, kt, b, bk, **kw):
    return Row(scenario=name, status="passed", features={"dtype": dtype}, flops=flops, min_bytes=nbytes,
               time_ms=t, kernel_ms=kt, baseline_ms=b, baseline_kernel_ms=bk, baseline_status="passed",
               speedup=b / t, **kw)


def test_bound_arithmetic_by_hand():
    rows = [
        # compute: 1e12 / 800e12 s = 1.25 ms; memory: 1e9 / 4000e9 s = 0.25 ms -> compute binds
        _row("prefill", "bf16", 1e12, 1e9, t=2.5, kt=2.4, b=2.0, bk=1.9),
        # fp8 uses the fp8 rate: 1e12 / 1600e12 = 0.625 ms; memory 2e9 / 4000e9 = 0.5 ms
        _row("fp8", "fp8", 1e12, 2e9, t=1.25, kt=1.0, b=0.625, bk=0.6),
        # decode: compute 1e10 / 700e12 = 0.0142857 ms; memory 4e8 / 4000e9 = 0.1 ms -> memory binds
        _row("decode", "fp16", 1e10, 4e8, t=0.2, kt=0.15, b=0.125, bk=0.12),
    ]
    df = bounds.bounds_table(rows, CEIL).set_index("scenario")
    p = df.loc["prefill"]
    assert p.t_compute_ms == pytest.approx(1.25) and p.t_memory_ms == pytest.approx(0.25)
    assert p.binds == "compute" and p.bound_ms == pytest.approx(1.25)
    assert p.sol_candidate == pytest.approx(0.5) and p.sol_baseline == pytest.approx(0.625)
    assert p.outside_candidate_ms == pytest.approx(0.1) and p.outside_baseline_ms == pytest.approx(0.1)
    f = df.loc["fp8"]
    assert f.t_compute_ms == pytest.approx(0.625) and f.binds == "compute"
    assert f.sol_candidate == pytest.approx(0.5) and f.sol_baseline == pytest.approx(1.0)
    assert f.outside_candidate_ms == pytest.approx(0.25)
    d = df.loc["decode"]
    assert d.t_compute_ms == pytest.approx(1e10 / 700e12 * 1e3)
    assert d.t_memory_ms == pytest.approx(0.1) and d.binds == "memory"
    assert d.sol_candidate == pytest.approx(0.5) and d.sol_baseline == pytest.approx(0.8)
    assert d.outside_candidate_ms == pytest.approx(0.05)
    text = bounds.format_bounds(df.reset_index(), CEIL)
    assert "Test GPU 9000" in text and "memory" in text and "compute" in text
    # every column is explained under the table; no row is negative outside the kernel, so no such note
    notes = " ".join(text.split("columns:")[1].split())
    for col in ("GFLOP, MB", "t_comp, t_mem", "binds", "SOL, SOLb", "out ms, out b"):
        assert col + " =" in notes
    assert "negative" not in text


def test_negative_outside_time_is_explained():
    """A profiler kernel time longer than the per-call median gives a negative `out ms`: the footnote
    names the row and says to read it as ~0."""
    rows = [_row("a", "bf16", 1e12, 1e9, t=2.0, kt=2.05, b=2.0, bk=1.9, row=7),
            _row("b", "bf16", 1e12, 1e9, t=2.0, kt=1.9, b=2.0, bk=1.9, row=8)]
    text = bounds.format_bounds(bounds.bounds_table(rows, CEIL), CEIL)
    assert "-0.0500" in text
    note = " ".join(text.split("negative out ms")[1].split())
    assert note.startswith("/ out b (rows 7):") and "read them as ~0" in note


def test_missing_counts_and_failed_rows():
    no_fp8 = dict(CEIL, fp8_tflops=None)
    r = _row("fp8", "fp8", 1e12, 2e9, t=1.0, kt=0.9, b=1.0, bk=0.9)
    d = bounds.bounds_table([r], no_fp8).iloc[0]
    assert math.isnan(d.t_compute_ms) and d.binds == "?" and math.isnan(d.sol_candidate)
    bad = Row(scenario="x", status="failed", features={"dtype": "bf16"}, flops=1e9, min_bytes=1e6,
              time_ms=1.0, baseline_status="n/a")
    d = bounds.bounds_table([bad], CEIL).iloc[0]
    assert d.binds == "compute" and math.isnan(d.sol_candidate) and math.isnan(d.sol_baseline)


def test_grid_fallback_matches_scenario_counts():
    grid = {s.name: s for s in load_grid("smoke")}
    rows = [Row(scenario=n, status="passed", time_ms=0.01) for n in ("fp8_gqa", "paged_decode")]
    df = bounds.bounds_table(rows, CEIL, {"grid": "smoke"}).set_index("scenario")
    s = grid["fp8_gqa"]
    assert df.loc["fp8_gqa", "flops"] == s.flops() and df.loc["fp8_gqa", "bytes"] == s.min_bytes()
    assert df.loc["fp8_gqa", "dtype"] == "fp8"
    assert df.loc["fp8_gqa", "t_compute_ms"] == pytest.approx(s.flops() / 1600e12 * 1e3)
    p = grid["paged_decode"]
    assert df.loc["paged_decode", "t_memory_ms"] == pytest.approx(p.min_bytes() / 4000e9 * 1e3)


def test_ceilings_files(tmp_path):
    assert bounds.gpu_slug("NVIDIA H200") == "NVIDIA_H200"
    assert bounds.gpu_slug("NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3"
    with pytest.raises(FileNotFoundError, match="NVIDIA_A100.json"):
        bounds.load_ceilings("NVIDIA A100", root=tmp_path)
    p = bounds.save_ceilings(dict(CEIL, slug="NVIDIA_H200"), tmp_path)
    assert p.name == "NVIDIA_H200.json"
    # an unknown GPU falls back to the H200 file
    assert bounds.load_ceilings("NVIDIA A100", root=tmp_path)["bf16_tflops"] == 800.0
    assert bounds.load_ceilings(path=p)["read_gbps"] == 4000.0
    # the run's GPU comes from meta['env']['gpu'] (as evaluate writes it)
    bounds.save_ceilings(dict(CEIL, bf16_tflops=123.0, slug=None), tmp_path)
    meta = {"env": {"gpu": "Test GPU 9000"}}
    assert bounds.load_ceilings(bounds._gpu_name(meta), root=tmp_path)["bf16_tflops"] == 123.0
    with pytest.raises(FileNotFoundError, match="nope.json"):
        bounds.load_ceilings(path=tmp_path / "nope.json")


def test_cli_bounds(tmp_path, capsys):
    d = results.new_run_dir(tmp_path, "r")
    results.save(d, [_row("prefill", "bf16", 1e12, 1e9, t=2.5, kt=2.4, b=2.0, bk=1.9)], {"env": {"gpu": "Test GPU 9000"}})
    cf = tmp_path / "c.json"
    cf.write_text(json.dumps(CEIL))
    out_csv = tmp_path / "b.csv"
    assert main(["bounds", str(d), "--ceilings", str(cf), "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "prefill" in out and "compute" in out and "0.500" in out
    assert "sol_candidate" in out_csv.read_text()
    assert main(["bounds", str(d), "--ceilings", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such ceilings file" in capsys.readouterr().err
