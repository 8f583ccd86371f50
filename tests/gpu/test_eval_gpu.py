"""`kernelseek eval` end to end on the GPU: naive_fwd on smoke against the best baseline."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]


def test_naive_on_smoke_passes_and_is_timed(tmp_path):
    from kernelseek.evaluate import evaluate, exit_code
    run, rows, meta = evaluate("kernels/naive_fwd.cu", "smoke", "best", runs_dir=str(tmp_path), budget_s=0.1,
                               progress=False)
    assert all(r.status == "passed" for r in rows), [(r.scenario, r.reason) for r in rows if r.status != "passed"]
    assert all(r.time_ms and r.time_ms > 0 and r.kernel_ms and r.host_ms for r in rows)
    assert all(r.err_ratio is not None and r.err_ratio <= 1 for r in rows)
    assert meta["env"]["gpu"] and meta["env"]["driver"] and meta["kernel_sha256"]
    assert not any(r.suspicious for r in rows), [(r.scenario, r.baseline, r.speedup, r.kernel_speedup, r.suspicious_reason)
                                                for r in rows if r.suspicious]
    timed = [r for r in rows if r.speedup]
    assert timed, "at least one smoke scenario has a baseline"
    assert exit_code(rows) in (0, 5)
    assert (run / "results.json").exists() and (run / "build" / "ptxas.json").exists()


def test_a_row_no_named_baseline_computes_is_na_with_each_reason(tmp_path):
    """hopper grid, 2026-12-01: with `--baseline cudnn,fa3,flashinfer`, every row that all three declined
    (sinks, say) came back "baseline worker: ValueError: max() iterable argument is empty" (the worker timed
    an empty set). Such a row is timed for the candidate only, n/a against a baseline, with each one's reason."""
    from kernelseek.evaluate import evaluate
    _run, rows, _meta = evaluate("kernels/naive_fwd.cu", "hopper", "cudnn", runs_dir=str(tmp_path), budget_s=0.05,
                                 progress=False, scenarios="dense_d96_fp8_full_mha_b2s1024_sinks")
    (r,) = rows
    assert r.status == "passed" and r.time_ms and r.speedup is None
    assert "cudnn" in r.baselines_declined and "baseline worker" not in r.baselines_declined, r.baselines_declined


def test_graph_rounds_alternate_and_replace_the_solo_graph_times(tmp_path):
    """--graph-rounds on the H200: the candidate's and each graphed baseline's kept graphs are replayed
    again in rounds; graph_ms is their median, the solo median stays as graph_solo_ms."""
    from kernelseek.evaluate import evaluate
    _run, rows, meta = evaluate("kernels/naive_fwd.cu", "smoke", "cudnn", runs_dir=str(tmp_path), budget_s=0.05,
                                progress=False, graph=True, graph_rounds=2)
    assert meta["graph_rounds"] == 2
    rounded = [r for r in rows if r.corroboration.get("graph_rounds", {}).get("replays")]
    assert rounded, [(r.scenario, r.graph_note, r.corroboration.get("graph_rounds")) for r in rows]
    for r in rounded:
        g = r.corroboration["graph_rounds"]
        assert g["rounds"] == 2 and g["order"][0] == "candidate" and r.graph_ms > 0
        assert g["solo_ms"]["candidate"] > 0 and r.baselines[g["order"][1]]["graph_solo_ms"] > 0
