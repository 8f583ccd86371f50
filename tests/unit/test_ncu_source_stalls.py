"""tools/ncu_source_stalls.py on the committed Nsight Compute source pages of session 20 (ours and FA3's kernel
on the fa3api grid's dv512 row, H200): shares that add up, the kernel names, the instruction counts."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "data" / "fa3api" / "session20-e4e2b18"
TOOL = ROOT / "tools" / "ncu_source_stalls.py"


def _run(*args):
    r = subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_summaries_of_both_kernels():
    ours, fa3 = _run(RUN / "ncu_src_ours_dv512.csv.gz", "--ops"), _run(RUN / "ncu_src_fa3_dv512.csv.gz", "--ops")
    assert "qv_attn_ws" in ours.splitlines()[0] and "FlashAttnFwdSm90" in fa3.splitlines()[0]
    for text in (ours, fa3):
        reasons = re.search(r"stall reasons \(% of samples\): (.*)", text).group(1)
        shares = [float(x) for x in re.findall(r" ([0-9.]+)(?:,|$)", reasons)]
        assert 90 <= sum(shares) <= 100.5          # the reasons of >= 0.5% cover almost all samples
        by_op = re.search(r"samples by opcode \(%\): (.*)", text).group(1)
        assert 70 <= sum(float(x) for x in re.findall(r" ([0-9.]+)(?:,|$)", by_op)) <= 100.5   # the top 15
    n = [int(re.search(r"warp instructions executed: (\d+)", t).group(1)) for t in (ours, fa3)]
    assert n[0] > 1.5 * n[1]                       # session 20's finding: ours executed 1.75x FA3's instructions
    tops = [line for line in ours.splitlines() if re.match(r"^\s*[0-9a-f]+\s+[0-9.]+%  ", line)]
    assert len(tops) == 25                          # --top's default


def test_a_file_without_a_source_page_is_named(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("no table here\n")
    r = subprocess.run([sys.executable, str(TOOL), str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and str(bad) in (r.stderr + r.stdout)
