"""The peer baselines on the GPU: FlashInfer and FA3 against the fp32 reference through the harness's own
check (layouts, scale, bottom-right causal, page tables, GQA), and every baseline captured in a CUDA graph.
Each adapter is skipped with its own reason where it is not staged (tools/flashinfer.sh, tools/fa3.sh)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import baselines, graph_timing  # noqa: E402
from kernelseek.check import check_output  # noqa: E402
from kernelseek.inputs import make_inputs  # noqa: E402
from kernelseek.reference import attention_ref  # noqa: E402
from kernelseek.scenarios import Scenario  # noqa: E402

CASES = {   # small versions of the bench26/production shapes, with awkward lengths
    "dense_causal_gqa": dict(batch=2, seqlen_q=300, seqlen_k=300, heads_q=8, heads_kv=2, head_dim=128, causal=True),
    "chunk_sq_lt_sk": dict(batch=2, seqlen_q=100, seqlen_k=517, heads_q=8, heads_kv=2, head_dim=128, causal=True),
    "dense_d64_full": dict(batch=3, seqlen_q=129, seqlen_k=257, heads_q=4, heads_kv=4, head_dim=64),
    "d256_softcap": dict(batch=2, seqlen_q=200, seqlen_k=200, heads_q=4, heads_kv=2, head_dim=256, causal=True,
                         softcap=50.0),
    "window_left": dict(batch=2, seqlen_q=400, seqlen_k=400, heads_q=8, heads_kv=2, head_dim=128, causal=True,
                        window=(64, 0)),
    "varlen_gqa7": dict(seqlens_q=(100, 7, 260), seqlens_k=(100, 7, 260), heads_q=28, heads_kv=4, head_dim=128,
                        causal=True),
    "paged_decode_gqa4": dict(batch=5, seqlen_q=1, seqlen_k=600, heads_q=32, heads_kv=8, head_dim=128, page_size=16,
                              kind="decode"),
    "paged_decode_mha_ragged": dict(batch=4, seqlen_q=1, seqlen_k=300, heads_q=4, heads_kv=4, head_dim=128,
                                    page_size=16, cache_seqlens=(300, 17, 16, 1), kind="decode"),
    "paged_chunked_prefill": dict(batch=2, seqlen_q=64, seqlen_k=500, heads_q=8, heads_kv=1, head_dim=128,
                                  page_size=16, causal=True, kind="prefill"),
}


def _adapter(name):
    b = baselines.get(name)
    ok, why = b.available()
    if not ok:
        pytest.skip(f"{name}: {why}")
    return b


@pytest.mark.parametrize("name", ["flashinfer", "fa3"])
@pytest.mark.parametrize("case", list(CASES))
def test_adapter_matches_reference(name, case):
    b = _adapter(name)
    s = Scenario(name=case, **CASES[case])
    ok, why = b.supports(s)
    if not ok:
        pytest.skip(f"{name} declines {case}: {why}")
    inp = make_inputs(s, seed=5, device="cuda", gen_device="cuda")
    bound = b.bind(s, inp)
    o, _ = bound.result(bound.call())
    torch.cuda.synchronize()
    c = check_output(s, o, None, attention_ref(s, inp, "fp32"), attention_ref(s, inp, "lowp"))
    assert c.passed, f"{name} on {case}: {c.reason}"
    assert "/" in b.where(), b.where()            # the run's meta can say where it was loaded from


@pytest.mark.parametrize("name", ["cudnn", "fa3", "flashinfer", "fa4"])
def test_baseline_graph_replay_matches_eager(name):
    b = _adapter(name)
    s = Scenario(name="g", **CASES["paged_decode_gqa4" if name in ("fa3", "flashinfer", "fa4") else "dense_causal_gqa"])
    if not b.supports(s)[0]:
        pytest.skip(f"{name} declines {s.name}")
    inp = make_inputs(s, seed=6, device="cuda", gen_device="cuda")
    bound = b.bind(s, inp)
    eager, _ = bound.result(bound.call())
    outs = []

    def make_call(_h):
        return lambda i: outs.append(bound.call())
    ms, p10, p90 = graph_timing.time_graph(make_call, 1, replays=3, name=name)
    assert 0 < p10 <= ms <= p90
    got, _ = bound.result(outs[-1])                # the captured call's output, after the last replay
    assert torch.allclose(got.float(), eager.float(), atol=2e-3, rtol=0), (got.float() - eager.float()).abs().max()


def test_eval_with_graph_times_every_capturable_baseline_and_records_their_sources(tmp_path):
    from pathlib import Path

    from kernelseek import evaluate as E
    grid = tmp_path / "g.yaml"
    grid.write_text("grid: g\nscenarios:\n"
                    "- {name: pre, batch: 2, seqlen_q: 256, seqlen_k: 256, heads_q: 8, heads_kv: 2, head_dim: 128, causal: true}\n"
                    "- {name: dec, batch: 8, seqlen_q: 1, seqlen_k: 1000, heads_q: 32, heads_kv: 8, head_dim: 128,"
                    " page_size: 16, kind: decode}\n")
    repo = Path(__file__).resolve().parents[2]
    run, rows, meta = E.evaluate(str(repo / "kernels" / "naive_fwd.cu"), str(grid), baseline="best", graph=True,
                                 budget_s=0.1, runs_dir=str(tmp_path / "runs"), progress=False)
    for r in rows:
        assert r.status == "passed", r.reason
        assert r.graph_ms and r.graph_ms > 0
        timed = {n: b for n, b in r.baselines.items() if b.get("status") == "passed"}
        assert timed, r.baselines
        for n, b in timed.items():
            assert b.get("graph_ms") or b.get("graph_note"), (r.scenario, n, b)
        if r.baseline_graph:
            assert r.graph_speedup == pytest.approx(r.baseline_graph_ms / r.graph_ms)
    assert rows[0].baselines["cudnn"]["graph_ms"] > 0                      # cuDNN is capturable
    assert all(v.get("from") for v in meta["baselines_ran"].values()), meta["baselines_ran"]
