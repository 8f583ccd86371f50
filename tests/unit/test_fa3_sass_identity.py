"""The kernel split of issue 19 changed no machine code: the SASS of every kernel the default build of
kernels/fa3_hopper dispatches, and of kernels/naive_fwd.cu, equals v12's (commit 346fdc1), up to symbol
names and addresses (kernelseek/sass_identity.py; the references were built from the v12 files with
the same nvcc and flags). Each build is the harness's own (kernelseek.build, sm_90a), about a minute
for the folder on two cores; the references only compare under the nvcc that made them.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek import build as kb, profile, sass_identity as si

REPO = Path(__file__).resolve().parents[2]
# Kernels added after v12 on purpose, beside v12's unchanged ones (issue 25): the naive kernel for head
# dims past 256 (FlashAttention-3's qv: [q, qv] . [k, v] at D + Dv = 576), 16-bit in x 16-bit out.
ADDED = r"naive_wide_kernel<"
N_ADDED = 4
CASES = {
    "fa3_hopper": (kb.REPO_KERNELS / "fa3_hopper" / "fa3_hopper.cu", kb.REPO_KERNELS / "fa3_hopper" / "sass_v12.json"),
    "naive_fwd": (kb.REPO_KERNELS / "naive_fwd.cu", kb.REPO_KERNELS / "naive_fwd_sass_v12.json"),
}

pytestmark = pytest.mark.skipif(profile.find_tool("cuobjdump") is None, reason="cuobjdump not installed")


def _nvcc_line() -> str:
    try:
        return kb.nvcc_version().splitlines()[-2].strip()   # "Cuda compilation tools, release 13.0, V13.0.88"
    except kb.NvccNotFound:
        return ""


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(name, the build, the reference document), built once per module in the session's cache."""
    src, ref_path = CASES[request.param]
    ref = json.loads(ref_path.read_text())
    if not _nvcc_line():
        pytest.skip("no nvcc")
    if _nvcc_line() != ref["nvcc"]:
        pytest.skip(f"the reference was built by {ref['nvcc']!r}, this nvcc is {_nvcc_line()!r}")
    r = kb.build(src, cache_dir=tmp_path_factory.getbasetemp() / "kseek-build-cache")
    assert r.ok, r.log[-3000:]
    return request.param, r, ref


def test_reference_was_built_with_the_harness_flags(case):
    _, r, ref = case
    assert " ".join(r.flags) == ref["flags"]


def test_every_default_kernel_has_v12_sass_and_nothing_else_is_built(case):
    name, r, ref = case
    rows = si.compare(ref["kernels"], si.records(r.so_path))
    added = [row for row in rows if row["status"] == "only new" and re.search(ADDED, row["key"])]
    bad = [row for row in rows if row["status"] != "same" and row not in added]
    assert not bad, f"{name}: SASS differs from v12:\n{si.table(bad)}"
    assert len(added) == N_ADDED
    assert len(rows) - N_ADDED == len(ref["kernels"]) == (52 if name == "fa3_hopper" else 6)


def test_cli_prints_the_table_and_exits_0(case):
    name, r, ref = case
    ref_file = CASES[name][1]
    p = subprocess.run([sys.executable, "tools/sass_identity.py", str(ref_file), str(r.so_path), "--added", ADDED],
                       capture_output=True, text=True, cwd=REPO, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stdout + p.stderr
    counts = set(p.stdout.strip().splitlines()[-1].split(", "))
    assert counts == {f"{len(ref['kernels'])} same", f"{N_ADDED} only new"}
