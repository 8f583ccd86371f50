"""On the GPU: the run-time code check's monitor sees what runs, by code (tools/trust_probe.py).

The probe runs in a fresh process (the monitor must start before CUDA loads any module, and this
pytest process may have initialized CUDA already): its own kernel is recognized, a torch matmul
(cuBLAS), a cubin loaded with cuModuleLoadData under the candidate's kernel name and a launch from
another thread are refused or seen, launches outside a window are not recorded, and CUPTI's
activity records give the device time."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")]


def test_the_monitor_sees_what_runs_by_code(tmp_path):
    out = tmp_path / "probe.json"
    r = subprocess.run([sys.executable, str(REPO / "tools" / "trust_probe.py"), "--out", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert out.is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert all(res["checks"].values()), json.dumps(res, indent=1)[-6000:]
    assert any("gemm" in x.lower() for x in res["blas"]["reasons"]) or res["blas"]["reasons"], res["blas"]
    assert "twin_kernel" in res["renamed"]["reasons"][0]
