"""Write the shim that runs FlashAttention-3's own forward tests against kernelseek.attention.

    python3 tools/fa3tests_shim.py DIR

DIR (git-ignored, e.g. .fa3tests/) already holds FA3's public hopper/test_flash_attn.py, test_util.py
and padding.py, fetched for the run and never committed. This writes, into DIR only:
  flash_attn_interface.py   the module the tests import: kernelseek.attention under FA3's name
  flash_attn/layers/rotary.py  apply_rotary_emb for the tests' reference (our torch rotation,
                             kernelseek.attention_cache.rotate), so the rotary cases run
  pytest.ini                 makes DIR pytest's rootdir (the repository's settings stay out)
  conftest.py               a seeded sample of FA3_SAMPLE cases per test function (FA3_SEED), the
                             backward-only tests deselected, one JSON line per finished case in FA3_LOG
"""
from __future__ import annotations

import sys
from pathlib import Path

INTERFACE = '''"""Shim: FlashAttention-3's interface served by kernelseek.attention (written by tools/fa3tests_shim.py)."""
from kernelseek.attention import (flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache,  # noqa: F401
                                  flash_attn_combine, get_scheduler_metadata, flash_attn_qkvpacked_func)
'''

ROTARY = '''"""Shim: apply_rotary_emb for FA3's test reference, by kernelseek's torch rotation."""
import torch

from kernelseek.attention_cache import rotate


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None,
                     max_seqlen=None):
    """x [B, S, H, D] rotated at positions seqlen_offsets[b] + s (an int or a [B] tensor)."""
    assert cu_seqlens is None, "shim: packed x is not needed by the tests"
    b, s = x.shape[0], x.shape[1]
    off = torch.as_tensor(seqlen_offsets, device=x.device).long().expand(b)
    pos = (off[:, None] + torch.arange(s, device=x.device)[None, :]).reshape(-1)
    y = rotate(x.reshape(b * s, *x.shape[2:]), cos, sin, pos, interleaved).view(x.shape)
    if inplace:
        x.copy_(y)
        return x
    return y
'''

CONFTEST = '''"""Shim conftest (tools/fa3tests_shim.py): seeded sample per test function; JSON line per case."""
import json
import os
import random

DESELECT = {"test_flash_attn_race_condition": "runs backward (autograd.grad) on every case",
            "test_flash3_bw_compatibility": "checks the schema of FA3's compiled torch ops (torch.ops.flash_attn_3)"}


def pytest_collection_modifyitems(config, items):
    n, seed = int(os.environ.get("FA3_SAMPLE", "300")), int(os.environ.get("FA3_SEED", "25"))
    only = set(filter(None, os.environ.get("FA3_TESTS", "").split(",")))
    by_fn = {}
    for it in items:
        by_fn.setdefault(it.originalname or it.name, []).append(it)
    keep, dropped = [], []
    for fn, its in by_fn.items():
        if fn in DESELECT or (only and fn not in only):
            dropped += its
            continue
        pick = set(random.Random(f"{seed}:{fn}").sample(range(len(its)), min(n, len(its))))
        keep += [it for i, it in enumerate(its) if i in pick]
        dropped += [it for i, it in enumerate(its) if i not in pick]
    log = os.environ.get("FA3_LOG")
    if log:
        with open(log + ".collected.json", "w") as f:
            json.dump({fn: len(its) for fn, its in by_fn.items()}, f)
    items[:] = keep
    config.hook.pytest_deselected(items=dropped)


def pytest_runtest_teardown(item, nextitem):
    # Four test processes share one GPU (tools/gpu_fa3api.sh): give each case's cached blocks back, or one
    # process's caching allocator holds what the others need (session 14: 127 GiB held, 46 cases OOM).
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        import gc
        gc.collect()
        torch.cuda.empty_cache()


def pytest_collectreport(report):
    log = os.environ.get("FA3_LOG")
    if log and report.failed:  # the test file did not import: say so in the log, not only in pytest's output
        with open(log, "a") as f:
            f.write(json.dumps({"id": report.nodeid + "::<collection>", "outcome": "error",
                                "reason": str(report.longrepr).strip().splitlines()[-1][:300], "seconds": 0}) + "\\n")


def pytest_runtest_logreport(report):
    log = os.environ.get("FA3_LOG")
    if not log or not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
        return
    reason = ""
    if report.outcome != "passed":
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = crash.message if crash is not None else str(report.longrepr)[-300:]
        if isinstance(report.longrepr, tuple):  # skips: (file, line, message)
            reason = report.longrepr[2]
    with open(log, "a") as f:
        f.write(json.dumps({"id": report.nodeid, "outcome": report.outcome,
                            "reason": reason.splitlines()[0][:300] if reason else "",
                            "seconds": round(report.duration, 3)}) + "\\n")
'''


def main(argv) -> int:
    d = Path(argv[1])
    (d / "flash_attn" / "layers").mkdir(parents=True, exist_ok=True)
    (d / "flash_attn_interface.py").write_text(INTERFACE)
    (d / "flash_attn" / "__init__.py").write_text("")
    (d / "flash_attn" / "layers" / "__init__.py").write_text("")
    (d / "flash_attn" / "layers" / "rotary.py").write_text(ROTARY)
    (d / "conftest.py").write_text(CONFTEST)
    (d / "pytest.ini").write_text("[pytest]\n")  # rootdir here: the repository's pytest settings stay out
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
