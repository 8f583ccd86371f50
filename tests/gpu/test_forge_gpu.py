"""On the GPU: with the host-code gate switched off (the static checks patched out in this test
only), a candidate that forges the worker's reply and one that patches the harness's Python get
past loading and run; the layers behind the gate must still fail them:
  - forge_reply.cu writes a passed reply on every descriptor: the reply protocol (protocol.py)
    rejects the line without the request's nonce, kills the worker, and every row fails;
  - patch_python.cu divides the candidate's measured times by 10 inside the worker: the parent's
    clock on a burst of calls (corroborate.py) says otherwise, "timing not corroborated";
  - patch_graph.cu divides only its CUDA-graph time by 10 (eval --graph): the parent's graph burst
    says otherwise; graph_ms is moved out of the row and graph_speedup is None, the row passes.
And naive_fwd.cu, gate on, with --graph, is corroborated on every row, per call and in graph replay
(the slack is not a false alarm).
Run: `python -m pytest -q -m gpu tests/gpu/test_forge_gpu.py` (tools/gpu_trust.sh does)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from kernelseek import constraints
from kernelseek import evaluate as E

REPO = Path(__file__).resolve().parents[2]
ADV = REPO / "tests" / "adversarial"
GRID = str(ADV / "grid.yaml")
BASELINE = os.environ.get("KSEEK_ADV_BASELINE", "cudnn")
OUT = os.environ.get("KSEEK_FORGE_OUT")            # optional: rows as JSON, for the GPU run's record
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")]


def _eval(kernel: Path, tmp_path, gate: bool, monkeypatch, graph: bool = False):
    if not gate:                                   # this test's whole point: what stands behind the gate
        monkeypatch.setattr(constraints, "check_binary", lambda p: constraints.ConstraintResult(True))
        monkeypatch.setattr(constraints, "check_source", lambda p: constraints.ConstraintResult(True))
    run, rows, meta = E.evaluate(str(kernel), GRID, baseline=BASELINE, timeout_s=120, budget_s=0.2,
                                 runs_dir=str(tmp_path / "runs"), progress=False, command="test_forge_gpu",
                                 graph=graph)
    if OUT:
        Path(OUT).mkdir(parents=True, exist_ok=True)
        doc = {"kernel": kernel.name, "gate": gate, "rows": [r.__dict__ for r in rows],
               "protocol_violation": meta.get("protocol_violation")}
        (Path(OUT) / f"forge_{kernel.stem}.json").write_text(json.dumps(doc, indent=1, default=str))
    return rows, meta


def test_a_forged_reply_fails_every_row(tmp_path, monkeypatch):
    rows, meta = _eval(ADV / "forge_reply.cu", tmp_path, False, monkeypatch)
    assert rows and meta.get("protocol_violation", "").startswith("reply protocol violated"), meta
    for r in rows:
        assert r.status in ("failed", "error") and "reply protocol violated" in r.reason, (r.scenario, r.status, r.reason)
        assert r.speedup is None


def test_patched_python_timing_is_not_corroborated(tmp_path, monkeypatch):
    rows, _ = _eval(ADV / "patch_python.cu", tmp_path, False, monkeypatch)
    assert rows
    for r in rows:
        assert r.status == "failed" and "timing not corroborated" in r.reason, (r.scenario, r.status, r.reason)
        assert r.corroboration["ratio"] > 3, r.corroboration


def test_a_patched_graph_time_is_moved_out_of_the_row(tmp_path, monkeypatch):
    rows, _ = _eval(ADV / "patch_graph.cu", tmp_path, False, monkeypatch, graph=True)
    assert rows
    for r in rows:
        assert r.status == "passed", (r.scenario, r.reason)                 # its per-call time is true
        g = r.corroboration.get("graph") or {}
        assert r.graph_ms is None and r.graph_speedup is None, (r.scenario, r.graph_ms, g)
        assert "graph time not corroborated" in r.graph_note and g.get("ratio", 0) > 3, (r.scenario, g)


def test_an_honest_kernel_is_corroborated_on_every_row(tmp_path, monkeypatch):
    rows, _ = _eval(REPO / "kernels" / "naive_fwd.cu", tmp_path, True, monkeypatch, graph=True)
    for r in rows:
        assert r.status == "passed", (r.scenario, r.reason)
        c = r.corroboration
        # the ratio can be <= 0 on host-bound rows: the calibration subtracts the baseline's host cost
        # per call, which can exceed ours (H200, session 8: -0.85 on a 0.023 ms row; README)
        assert c["ok"] and c["baseline_calls"] and c["ratio"] <= 1.5, c
        g = c.get("graph") or {}                 # the graph burst: corroborated, graph_speedup kept
        assert g.get("ok") and g.get("sets") and r.graph_ms and r.graph_speedup, (r.scenario, r.graph_note, g)
