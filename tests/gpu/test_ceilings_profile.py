"""On the GPU: ceilings measured (quick mode) and an Nsight Compute profile of a tiny torch op."""
import sys
import textwrap

import pytest
import torch

from kernelseek import bounds, profile

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")]


def test_measure_ceilings_quick(tmp_path):
    c = bounds.measure_ceilings(0, quick=True)
    assert c["gpu"] == torch.cuda.get_device_name(0) and c["quick"] is True
    assert 20 < c["bf16_tflops"] < 5000 and 20 < c["fp16_tflops"] < 5000
    assert c["fp8_tflops"] is None or c["fp8_tflops"] > c["bf16_tflops"] * 0.8, c["fp8_note"]
    assert 100 < c["read_gbps"] < 20000 and 100 < c["copy_gbps"] < 20000
    assert 0 < c["launch_us_events"] < 1000 and 0 < c["launch_us_host"] < 1000
    assert 0 < c["launch_us_graph"] <= c["launch_us_events"]
    p = bounds.save_ceilings(c, tmp_path)
    assert bounds.load_ceilings(c["gpu"], root=tmp_path)["bf16_tflops"] == c["bf16_tflops"]
    assert p.name == bounds.gpu_slug(c["gpu"]) + ".json"


def test_ncu_profile_of_a_torch_op(tmp_path):
    if profile.find_tool("ncu") is None:
        pytest.skip("ncu (Nsight Compute) is not installed on this machine")
    script = tmp_path / "op.py"
    script.write_text(textwrap.dedent("""
        import torch
        x = torch.randn(1 << 22, device="cuda")
        torch.cuda.synchronize()
        y = x * 2.0
        torch.cuda.synchronize()
    """))
    r = profile.run_ncu([sys.executable, str(script)], tmp_path / "prof", kernel_regex="elementwise_kernel",
                        launch_skip=0, launch_count=1)
    if "ERR_NVGPUCTRPERM" in r.stdout:
        pytest.skip("this machine does not allow access to the performance counters")
    assert r.returncode == 0, r.stdout[-3000:]
    assert r.ok and r.rep is not None and r.rep.exists()
    assert "--clock-control" in r.command and "none" in r.command
    assert (tmp_path / "prof" / "ncu_stdout.txt").read_text() == r.stdout
    raw = (tmp_path / "prof" / "raw.csv").read_text()
    assert '"ID"' in raw and (tmp_path / "prof" / "details.txt").stat().st_size > 0
    if profile.ncu_report_dir() is not None:
        assert r.source == "ncu_report"          # ncu's own Python reader, not the CSV fallback
    s = r.summary[0]
    assert 0 < s["duration_ms"] < 100 and s["sm_pct"] is not None and s["dram_pct"] is not None
    assert s["occupancy_achieved_pct"] is not None and s["cycles"] > 0
    # the CSV route reads the same report to the same duration
    by_csv = profile.summarize_ncu(profile.parse_ncu_csv(raw))[0]
    for key in ("duration_ms", "cycles", "sm_pct", "dram_pct", "occupancy_achieved_pct", "registers"):
        assert by_csv[key] == pytest.approx(s[key], rel=1e-3), key
    assert [k for k, _ in by_csv["top_stalls"]] == [k for k, _ in s["top_stalls"]]
    print(r.source, profile.format_summary(r.summary))
