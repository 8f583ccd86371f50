"""tools/fa3tests_shim.py and tools/fa3tests_summary.py: the seeded per-function sample, the deselected
backward-only tests, the JSON lines, the summary, and the rotary shim against reference_fa3."""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import fa3tests_shim  # noqa: E402
import fa3tests_summary  # noqa: E402

FAKE = '''import pytest
@pytest.mark.parametrize("i", range(20))
def test_flash_attn_output(i):
    assert i % 4 != 1, f"wrong by {i}"
@pytest.mark.parametrize("i", range(5))
def test_flash_attn_combine(i):
    if i == 0:
        pytest.skip("not here")
def test_flash_attn_race_condition():
    raise AssertionError("must be deselected")
'''


def run(tmp_path, sample, seed=25):
    fa3tests_shim.main(["x", str(tmp_path)])
    (tmp_path / "test_flash_attn.py").write_text(FAKE)
    log = tmp_path / f"log{sample}_{seed}.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, "FA3_SAMPLE": str(sample), "FA3_SEED": str(seed), "FA3_LOG": str(log),
           "PYTHONPATH": f"{tmp_path}:{REPO}"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_flash_attn.py"],
                   cwd=tmp_path, env=env, capture_output=True, text=True)
    return [json.loads(x) for x in log.read_text().splitlines()], log


def test_sample_is_seeded_per_function_and_backward_tests_are_deselected(tmp_path):
    rows, log = run(tmp_path, 6)
    ids = [r["id"] for r in rows]
    assert sum("test_flash_attn_output" in i for i in ids) == 6
    assert sum("test_flash_attn_combine" in i for i in ids) == 5       # fewer cases than the sample: all
    assert not any("race_condition" in i for i in ids)
    again, _ = run(tmp_path, 6)
    assert [r["id"] for r in again] == ids                            # same seed, same sample
    other, _ = run(tmp_path, 6, seed=3)
    assert [r["id"] for r in other] != ids
    fails = [r for r in rows if r["outcome"] == "failed"]
    assert all(r["reason"].startswith("AssertionError: wrong by") for r in fails)
    assert any(r["outcome"] == "skipped" and r["reason"] == "Skipped: not here" for r in rows)
    md = fa3tests_summary.summary(rows)
    n_out = sum(1 for r in rows if "output" in r["id"])
    n_fail = len(fails)
    assert f"| test_flash_attn_output | {n_out} | {n_out - n_fail} | {n_fail} | 0 | 0 |" in md
    assert f"## failures ({n_fail}), by reason" in md


def test_rotary_shim_matches_the_reference(tmp_path):
    fa3tests_shim.main(["x", str(tmp_path)])
    sys.path.insert(0, str(tmp_path))
    try:
        from flash_attn.layers.rotary import apply_rotary_emb
    finally:
        sys.path.remove(str(tmp_path))
    from kernelseek.reference_fa3 import rotary_ref
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 2, 32, generator=g)
    ang = torch.rand(10, 8, generator=g) * 6
    off = torch.tensor([4, 1])
    for inter in (False, True):
        y = apply_rotary_emb(x, ang.cos(), ang.sin(), interleaved=inter, seqlen_offsets=off)
        for b in range(2):
            want = rotary_ref(x[b], ang.cos(), ang.sin(), off[b] + torch.arange(3), inter)
            assert torch.allclose(y[b], want, atol=1e-6)


def test_a_test_file_that_does_not_import_is_logged_as_an_error(tmp_path):
    fa3tests_shim.main(["x", str(tmp_path)])
    (tmp_path / "test_flash_attn.py").write_text("raise AssertionError('Torch not compiled with CUDA enabled')\n")
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "FA3_LOG": str(log), "PYTHONPATH": f"{tmp_path}:{REPO}"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "test_flash_attn.py"], cwd=tmp_path, env=env,
                   capture_output=True, text=True)
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert rows[0]["outcome"] == "error" and "CUDA" in rows[0]["reason"]
    assert "| 1 |" in fa3tests_summary.summary(rows) and "CUDA" in fa3tests_summary.summary(rows)
