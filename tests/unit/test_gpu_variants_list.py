"""tools/gpu_variants.sh names the build variants its GPU call A/B-runs: each experiment's define must be
one variants.cuh documents, with a value it lists, and its rows must select scenarios of its grid, so a
typo is found here and not in a GPU call (the script's own --list, run for real)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from kernelseek.scenarios import load_grid, select

REPO = Path(__file__).resolve().parents[2]


def _experiments():
    r = subprocess.run(["bash", str(REPO / "tools" / "gpu_variants.sh"), "--list"], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split(" ", 4) for line in r.stdout.strip().splitlines()]


def test_every_experiment_names_a_documented_variant_value_and_real_rows():
    exps = _experiments()
    assert {e[0] for e in exps} >= {"warp", "ragged", "bn176", "gather"}
    doc = (REPO / "kernels" / "fa3_hopper" / "variants.cuh").read_text()
    for name, define, grid, rows in exps:
        flag, value = define.split("=", 1)
        m = re.search(rf"-D{flag}=(\S+)", doc)
        assert m, f"{name}: {flag} is not a variant variants.cuh documents"
        assert value in re.split(r"[|]", m.group(1)) or m.group(1).isdigit(), f"{name}: {flag}={value} not in {m.group(1)}"
        picked = select(load_grid(grid), rows)
        assert picked, f"{name}: rows {rows} select nothing in {grid}"
        if name == "gather":                       # named rows: every one of them must exist
            assert len(picked) == len(rows.split(","))
        if name == "raggedh":                      # decode rows that pass cache_seqlens
            assert all(s.name.startswith("decode_") for s in picked)


def test_each_experiments_gpu_test_names_exactly_one_test():
    """TESTS=1 runs `pytest -k EXPR` per experiment (gputest in the script): EXPR must pick one test."""
    text = (REPO / "tools" / "gpu_variants.sh").read_text()
    body = text[text.index("gputest() {"):text.index("ALL=")]
    pairs = re.findall(r"(\w+)\) echo (\w+) ;;", body)
    names = {e[0] for e in _experiments()}
    tests = re.findall(r"^def (test_\w+)", (REPO / "tests" / "gpu" / "test_variants_gpu.py").read_text(), re.M)
    assert {n for n, _ in pairs} == {"fp8dec", "dv", "gather", "gather2"} <= names
    for name, k in pairs:
        assert len([t for t in tests if k in t]) == 1, (name, k, tests)
