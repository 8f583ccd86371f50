"""SASS instruction mix on real cuobjdump/nvdisasm dumps (tests/fixtures/sass, see NOTE.md), PTX mix,
the ptxas table, and the ncu CSV parser on a HAND-MADE CSV in ncu's documented format."""
from pathlib import Path

import pytest

from kernelseek import profile
from kernelseek.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sass"


def _read(name):
    return (FIX / name).read_text()


def test_split_kernels_and_mix_per_kernel():
    text = _read("tiny.sass")
    assert sorted(profile.split_kernels(text)) == ["local_array", "scale_exp", "wmma_bf16"]
    m = profile.instruction_mix(text, "scale_exp")
    assert (m["FFMA"], m["MUFU"], m["LDG"], m["STG"]) == (2, 2, 1, 1)
    assert m["EXIT"] == 2                # "@P0 EXIT" and "EXIT": the predicate is stripped
    assert m["FMUL"] == 6 and m["HMMA"] == 0
    assert "NOP" not in m                # padding is not counted
    w = profile.instruction_mix(text, "wmma")   # a part of the name is enough
    assert (w["HMMA"], w["BAR"], w["STS"]) == (2, 1, 2)
    loc = profile.instruction_mix(text, "local_array")
    assert (loc["STL"], loc["LDL"]) == (16, 1)
    for fam in profile.FAMILIES:
        assert fam in m
    total = profile.instruction_mix(text)
    assert total["STL"] == 16 and total["HMMA"] == 2 and total["MUFU"] == 2
    with pytest.raises(KeyError, match="scale_exp"):
        profile.instruction_mix(text, "no_such_kernel")


def test_hopper_families_and_both_dump_formats():
    m = profile.instruction_mix(_read("hopper.sass"))
    assert (m["HGMMA"], m["QGMMA"], m["UTMALDG"], m["SYNCS"], m["BAR"]) == (1, 1, 1, 4, 1)
    assert m["WARPGROUP"] == 5 and m["HMMA"] == 0
    # nvdisasm -c names sections `.text.<kernel>:` and writes no encodings: the same mix
    nv = _read("hopper.nvdisasm.sass")
    assert list(profile.split_kernels(nv)) == ["hopper_ops"]
    assert profile.instruction_mix(nv) == m


def test_opcode_family_strips_predicates_and_modifiers():
    text = ("        Function : k\n"
            "        /*0100*/              @!UP0 HGMMA.64x128x16.F32.BF16 gdesc[UR4], RZ, !UPT ;\n"
            "        /*0110*/               @P1 LDG.E.128.CONSTANT R4, desc[UR6][R2.64] ;\n"
            "        /*0120*/                   MUFU.EX2 R0, R0 ;\n")
    m = profile.instruction_mix(text, "k")
    assert (m["HGMMA"], m["LDG"], m["MUFU"]) == (1, 1, 1)


def test_mix_diff_between_two_builds():
    a = profile.instruction_mix(_read("tiny.sass"), "scale_exp")
    b = profile.instruction_mix(_read("tiny_fastmath.sass"), "scale_exp")
    d = profile.mix_diff(a, b).set_index("family")
    assert list(d.index[:len(profile.FAMILIES)]) == list(profile.FAMILIES)
    assert d.loc["FMUL", "delta"] == -4 and d.loc["FSETP", "delta"] == -2   # fast math drops the range fix-ups
    assert d.loc["MUFU", "delta"] == 0 and d.loc["FFMA", "b"] == 2
    # the largest change comes first after the named families
    assert d.index[len(profile.FAMILIES)] == "FMUL"
    # text input works too
    assert profile.mix_diff(_read("tiny.sass"), _read("tiny.sass"))["delta"].abs().sum() == 0


def test_ptx_mix():
    m = profile.ptx_mix(_read("tiny.ptx"))
    assert m["ex2"] == 1 and m["rsqrt"] == 1 and m["wmma"] == 4 and m["st.local"] == 16
    assert m["ld.global"] > 0 and m["bar"] == 1


def test_ptxas_table_from_text_and_list():
    t = profile.ptxas_table(_read("tiny_ptxas_v.txt")).set_index("kernel")
    assert t.loc["local_array", "registers"] == 34 and t.loc["local_array", "stack_bytes"] == 256
    assert t.loc["wmma_bf16", "smem_bytes"] == 1024 and t.loc["scale_exp", "registers"] == 12
    assert (t["spill_stores_bytes"] == 0).all()
    same = profile.ptxas_table(t.reset_index().to_dict("records"))
    assert list(same["kernel"]) == list(t.index)


def test_sass_with_the_real_tool_if_present():
    if profile.find_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed here (pip install nvidia-cuda-cuobjdump provides it)")
    assert profile.instruction_mix(profile.sass(FIX / "hopper.cubin")) == profile.instruction_mix(_read("hopper.sass"))


def test_cli_sass_on_dumps(capsys):
    assert main(["sass", str(FIX / "tiny.sass"), str(FIX / "tiny_fastmath.sass"), "--kernel", "scale_exp",
                 "--ptxas", str(FIX / "tiny_ptxas_v.txt")]) == 0
    out = capsys.readouterr().out
    assert "FMUL" in out and "-4" in out and "local_array" in out


# HAND-MADE, not captured from ncu: the layout of `ncu --import R --csv --page raw` (a header, a
# units row, one row per launch; numbers with thousands separators). Replace with a real H200
# export when one is committed.
RAW_CSV = '''==PROF== Disconnected from process 1234
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","sm__cycles_elapsed.avg","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","sm__maximum_warps_per_active_cycle_pct","launch__registers_per_thread","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_not_issued_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","usecond","cycle","%","%","%","%","register/thread","inst","inst","inst","inst","%"
"0","1234","python3","host","kseek_fwd(Params)","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","1,234.56","2,185,000","71.2","12.5","23.4","25","168","0.9","2.5","9.9","0.4","64.1"
"1","1234","python3","host","reduce_kernel","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","3.2","5,000","1.1","0.2","6.2","100","32","","0.1","","0.3",""
'''

# HAND-MADE: the long form of the details page (`--csv` without `--page raw`).
DETAILS_CSV = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1234","python3","host","kseek_fwd(Params)","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","msecond","1.23"
"0","1234","python3","host","kseek_fwd(Params)","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","71.20"
"0","1234","python3","host","kseek_fwd(Params)","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Occupancy","Achieved Occupancy","%","23.40"
'''


def test_parse_raw_csv_and_summary():
    df = profile.parse_ncu_csv(RAW_CSV)
    assert len(df) == 2 and df.loc[0, "Kernel Name"] == "kseek_fwd(Params)"
    assert df.loc[0, "gpu__time_duration.sum"] == 1234.56          # thousands separator removed
    assert df.attrs["units"]["gpu__time_duration.sum"] == "usecond"
    s = profile.summarize_ncu(df)
    k = s[0]
    assert k["duration_ms"] == pytest.approx(1.23456)
    assert k["cycles"] == 2185000 and k["sm_clock_ghz"] == pytest.approx(2185000 / 1234560)
    assert (k["sm_pct"], k["dram_pct"], k["occupancy_achieved_pct"], k["registers"]) == (71.2, 12.5, 23.4, 168)
    assert [name for name, _ in k["top_stalls"]] == ["long_scoreboard", "barrier", "wait"]   # not_issued dropped
    assert k["tensor_pipe_pct"] == 64.1
    assert s[1]["tensor_pipe_pct"] is None and s[1]["top_stalls"] == [("wait", 0.3), ("long_scoreboard", 0.1)]
    assert "kseek_fwd" in profile.format_summary(s)


def test_parse_details_csv_long_form():
    df = profile.parse_ncu_csv(DETAILS_CSV)
    assert len(df) == 1
    s = profile.summarize_ncu(df)[0]
    assert s["duration_ms"] == pytest.approx(1.23) and s["sm_pct"] == 71.2
    assert s["occupancy_achieved_pct"] == 23.4 and s["dram_pct"] is None


def test_parse_rejects_non_csv():
    with pytest.raises(ValueError, match="ID"):
        profile.parse_ncu_csv("==ERROR== the profiler could not connect")


def test_run_ncu_without_ncu_names_the_tool():
    if profile.find_tool("ncu"):
        pytest.skip("ncu is installed here; tests/gpu covers the real run")
    with pytest.raises(FileNotFoundError, match="ncu"):
        profile.run_ncu(["true"], "/tmp/kseek-no-ncu")


def test_parse_real_h200_ncu_raw_csv():
    """The raw page exported by ncu on the H200 (tests/fixtures/ncu/NOTE.md) parses and summarizes."""
    from kernelseek.profile import parse_ncu_csv, summarize_ncu
    text = (Path(__file__).parent.parent / "fixtures" / "ncu" / "h200_raw.csv").read_text()
    table = parse_ncu_csv(text)
    assert len(table) == 1
    assert "distribution_elementwise" in str(table.iloc[0]["Kernel Name"])
    summ = summarize_ncu(table)
    assert len(summ) == 1
    vals = summ[0]
    numeric = {k: v for k, v in vals.items() if isinstance(v, (int, float))}
    assert any("duration" in k and v > 0 for k, v in numeric.items()), vals
