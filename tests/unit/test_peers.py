"""Issue 24 on the CPU: the peer baselines' plumbing, with no GPU.

- (FA3 impostors: tests/unit/test_fa3_impostors.py.)
- FlashInfer's adapter: the page table in FlashInfer's CSR form reads the same keys as the reference, and
  which scenarios it declines, and why; unavailable here, with a reason that says how to stage it.
- The graph measure: per-baseline graph times become baseline_graph_ms / graph_speedup (a stand-in never
  counts), the contract judges decode rows on it and prefill rows per call, a goal can choose, medians
  carry it, and evaluate records it and where each baseline was loaded from, through a stand-in worker.
- The peer table and the repeatability report from recorded runs; the production grid's rows, run
  through the reference at tiny sizes.
"""
import base64
import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import torch

from kernelseek import evaluate as E
from kernelseek import goal as G
from kernelseek import peers as P
from kernelseek import results as R
from kernelseek.baselines import fa3_vllm, flashinfer as FI, get
from kernelseek.baselines.flash_attn import is_real_fa3
from kernelseek.inputs import gather_kv, make_inputs
from kernelseek.reference import attention_ref
from kernelseek.scenarios import Scenario, load_grid

REPO = Path(__file__).resolve().parents[2]


# ---- FlashInfer's adapter on the CPU -------------------------------------------------------------------
def test_flashinfer_is_unavailable_here_with_how_to_stage_it():
    ok, why = get("flashinfer").available()
    assert not ok and "flashinfer" in why and "tools/flashinfer.sh" in why


def test_csr_pages_read_the_keys_the_reference_reads():
    s = Scenario(name="p", batch=3, seqlen_q=1, seqlen_k=80, heads_q=4, heads_kv=2, head_dim=64, page_size=16,
                 cache_seqlens=(80, 17, 16), kind="decode")
    inp = make_inputs(s, seed=3)
    ends = [e for _, e in s.k_ranges()]
    indptr, indices, last = FI.csr_pages(inp.page_table, ends, s.page_size)
    assert indptr.tolist() == [0, 5, 7, 8] and last.tolist() == [16, 1, 16]
    for b, (kref, _) in enumerate(gather_kv(s, inp)):
        pages = indices[indptr[b]:indptr[b + 1]].long()
        k = inp.k.index_select(0, pages).flatten(0, 1)[: (len(pages) - 1) * 16 + int(last[b])]
        assert torch.equal(k, kref)


@pytest.mark.parametrize("kw, why", [
    (dict(dtype="fp8"), "fp8"),
    (dict(window=(128, 64), causal=False), "right of the diagonal"),   # two-sided: FlashInfer has a left window only
    (dict(window=(128, -1), causal=False), "right of the diagonal"),
    (dict(head_dim=96), "head_dim 96"),
    (dict(batch=2, cache_seqlens=(0, 40), page_size=16, seqlen_q=1, kind="decode"), "zero keys"),
    (dict(batch=2, cache_seqlens=(10, 40)), "contiguous cache"),
])
def test_flashinfer_declines_what_it_cannot_compute(kw, why):
    base = dict(name="x", batch=1, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=2, head_dim=128, causal=True)
    s = Scenario(**{**base, **kw})
    ok, reason = FI.FlashInfer().supports(s)
    assert not ok and why in reason


def test_flashinfer_takes_bench26_except_head_dims_96_and_192():
    fi = FI.FlashInfer()
    declined = [s.row for s in load_grid("bench26") if not fi.supports(s)[0]]
    assert declined == [16, 17]


# ---- the graph measure ---------------------------------------------------------------------------------
def _reply(graph=0.4, **base):
    bl = {"fa3": {"status": "passed", "version": "FA3 v", "from": "/root/fa3/x.so", "time_ms": 1.0, "graph_ms": 0.5},
          "flashinfer": {"status": "passed", "version": "fi", "from": "/root/flashinfer/site/flashinfer",
                         "time_ms": 0.9, "graph_ms": 0.6},
          "cudnn-dense-standin": {"status": "passed", "version": "cudnn", "time_ms": 0.5, "graph_ms": 0.1},
          "cudnn": {"status": "failed", "reason": "bound", "time_ms": 0.1, "graph_ms": 0.05}}
    bl.update(base)
    return {"status": "passed", "time_ms": 1.0, "graph_ms": graph, "kernel_ms": 0.9, "baselines": bl}


DECODE = Scenario(name="dec", batch=4, seqlen_q=1, seqlen_k=4096, heads_q=32, heads_kv=8, head_dim=128,
                  page_size=16, kind="decode")
PREFILL = Scenario(name="pre", batch=1, seqlen_q=2048, seqlen_k=2048, heads_q=16, heads_kv=16, head_dim=128,
                   causal=True)


def test_each_measure_has_its_own_best_and_a_stand_in_or_failure_is_never_it():
    row = E.make_row(DECODE, "g", _reply())
    assert (row.baseline, row.baseline_ms, row.speedup) == ("flashinfer", 0.9, pytest.approx(0.9))
    assert (row.baseline_graph, row.baseline_graph_ms) == ("fa3", 0.5)
    assert row.graph_speedup == pytest.approx(1.25)
    assert row.stand_in["name"] == "cudnn-dense-standin"


def test_no_graph_time_means_no_graph_speedup():
    r = _reply(graph=None)
    row = E.make_row(DECODE, "g", r)
    assert row.graph_speedup is None and row.baseline_graph == "fa3"
    r = _reply(fa3={"status": "passed", "time_ms": 1.0, "graph_note": "could not be captured"},
               flashinfer={"status": "passed", "time_ms": 0.9})
    row = E.make_row(DECODE, "g", r)
    assert row.baseline_graph is None and row.graph_speedup is None


def test_the_contract_judges_decode_on_graph_and_prefill_per_call():
    dec, pre = E.make_row(DECODE, "g", _reply()), E.make_row(PREFILL, "g", _reply())
    assert R.judged_speedup(dec) == (pytest.approx(1.25), "graph")
    assert R.judged_speedup(pre) == (pytest.approx(0.9), "per_call")
    assert R.judged_speedup(dec, "per_call") == (pytest.approx(0.9), "per_call")
    assert R.judged_speedup(pre, "graph") == (pytest.approx(1.25), "graph")
    no_graph = E.make_row(DECODE, "g", _reply(graph=None))
    assert R.judged_speedup(no_graph) == (pytest.approx(0.9), "per_call")   # until the graph time exists
    with pytest.raises(ValueError, match="measure"):
        R.judged_speedup(dec, "wall")


def test_a_goal_chooses_its_measure_and_the_default_is_the_contract():
    dec = E.make_row(DECODE, "g", _reply())
    meta = {"kernel_sha256": "x"}
    v = G.judge([dec], meta, G.goal_from_dict({"min_speedup": 1.0, "geomean": 1.0}))
    assert v.rows[0].ok and v.rows[0].measure == "graph" and v.geomean == pytest.approx(1.25)
    assert "(graph)" in v.rows[0].line()
    v = G.judge([dec], meta, G.goal_from_dict({"min_speedup": 1.0, "measure": "per_call"}))
    assert not v.rows[0].ok and v.geomean == pytest.approx(0.9)
    with pytest.raises(G.GoalError, match="field 'measure'"):
        G.goal_from_dict({"measure": "fastest"}, "goals/x.yaml")


def test_median_of_runs_carries_the_graph_measure():
    a, b = E.make_row(DECODE, "g", _reply(graph=0.4)), E.make_row(DECODE, "g", _reply(graph=0.5))
    meta = {"kernel_sha256": "k"}
    med = G.median_rows([([a], meta, "A"), ([b], meta, "B")])
    assert med[0].graph_speedup == pytest.approx((1.25 + 1.0) / 2)


def test_the_eval_table_shows_the_graph_columns_only_when_measured():
    with_graph = R.format_table([E.make_row(DECODE, "g", _reply())])
    assert "graph ms" in with_graph and "g.speedup" in with_graph and "graph geomean 1.250x" in with_graph
    plain = R.format_table([E.make_row(DECODE, "g", _reply(graph=None, **{
        "fa3": {"status": "passed", "time_ms": 1.0}, "flashinfer": {"status": "passed", "time_ms": 0.9},
        "cudnn-dense-standin": {"status": "passed", "time_ms": 0.5}, "cudnn": {"status": "failed"}}))])
    assert "graph ms" not in plain


WORKER = textwrap.dedent('''
    import json, os, sys
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for line in sys.stdin:
        req = json.loads(line)
        nonce = req.get("nonce")                      # kernelseek/protocol.py: every reply echoes it
        if req.get("op") == "meta":
            out.write(json.dumps({"status": "passed", "gpu": "StandIn GPU", "nonce": nonce,
                                  "baselines": {"flashinfer": "unavailable: not staged"}}) + "\\n")
            continue
        if req.get("op") == "graph":                  # a graph of m calls for the graph burst (worker.py)
            m = int(req.get("sets", 0))
            out.write(json.dumps({"status": "passed", "sets": m, "nonce": nonce}) + "\\n")
            continue
        if req.get("op") == "burst" and req.get("graph"):     # whole replays of m calls, really spent
            import time
            n = -(-int(req.get("calls", 0)) // m) * m
            time.sleep(n * (0.5 if req.get("impl") == "fa3" else 0.4) / 1e3)
            out.write(json.dumps({"status": "passed", "calls": n, "nonce": nonce}) + "\\n")
            continue
        if req.get("op") == "burst":                  # corroborate.py: the claimed time per call, really spent
            import time
            time.sleep(int(req.get("calls", 0)) * (1.1 if req.get("impl") == "fa3" else 1.0) / 1e3)
            out.write(json.dumps({"status": "passed", "calls": req.get("calls", 0), "nonce": nonce}) + "\\n")
            continue
        g = 0.4 if req.get("graph") else None
        out.write(json.dumps({"status": "passed", "nonce": nonce, "time_ms": 1.0, "graph_ms": g, "kernel_ms": 0.9, "host_ms": 0.01,
            "max_err": 0.001, "err_ratio": 0.1,
            "baselines": {"fa3": {"status": "passed", "version": "FA3 (vLLM) /root/fa3/lib.so", "from": "/root/fa3/lib.so",
                                  "time_ms": 1.1, "graph_ms": 0.5 if g else None}},
            "baselines_declined": {"cudnn": "no paged KV support"}, "phases_s": {"timing": 0.01}}) + "\\n")
''')


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "kseek-build-cache"


def test_evaluate_records_graph_speedups_and_where_baselines_came_from(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(shared_cache))
    grid = tmp_path / "g.yaml"
    grid.write_text("grid: g\nscenarios:\n- {name: dec, batch: 2, seqlen_q: 1, seqlen_k: 64, heads_q: 4, heads_kv: 2,"
                    " head_dim: 64, page_size: 16, kind: decode}\n")
    (tmp_path / "w.py").write_text(WORKER)
    run, rows, meta = E.evaluate(str(REPO / "kernels" / "naive_fwd.cu"), str(grid), baseline="fa3", graph=True,
                                 runs_dir=str(tmp_path / "runs"), progress=False, defence=False,
                                 worker_cmd=[sys.executable, str(tmp_path / "w.py")])
    assert rows[0].graph_speedup == pytest.approx(1.25) and rows[0].baseline_graph == "fa3"
    assert meta["baselines_ran"]["fa3"] == {"version": "FA3 (vLLM) /root/fa3/lib.so", "from": "/root/fa3/lib.so",
                                             "passed": 1, "other": 0}
    saved = json.loads((run / "results.json").read_text())
    assert saved["summary"]["geomean_graph_speedup"] == pytest.approx(1.25)
    table = P.peer_table(*R.load(run))
    assert "fa3: FA3 (vLLM) /root/fa3/lib.so; from /root/fa3/lib.so" in table
    assert "flashinfer: unavailable: not staged" in table
    # why the others did not run: on the row, in the meta, in the table
    assert rows[0].baselines_declined == {"cudnn": "no paged KV support"}
    assert meta["baselines_declined"] == {"cudnn": {"no paged KV support": ["dec"]}}
    assert saved["rows"][0]["baselines_declined"] == {"cudnn": "no paged KV support"}
    assert "- [1] cudnn, every row: no paged KV support" in table


# ---- the peer table and repeatability, from recorded runs --------------------------------------------
def _run(tmp_path, name, graph_dec=0.4, graph_pre=2.0) -> Path:
    failed = dict(_reply()["baselines"], cudnn={"status": "error", "reason": "boom"})
    rows = [E.make_row(dataclasses.replace(DECODE, row=1), "g", _reply(graph=graph_dec)),
            E.make_row(dataclasses.replace(PREFILL, row=2), "g", dict(_reply(graph=graph_pre), baselines=failed))]
    run = tmp_path / name
    R.save(run, rows, {"grid": "g", "kernel": "kernels/k.cu", "env": {"gpu": "H200"},
                       "baselines_ran": {"fa3": {"version": "FA3 v", "from": "/root/fa3/x.so", "passed": 2}}})
    return run


def test_peer_table_from_a_recorded_run(tmp_path):
    rows, meta = R.load(_run(tmp_path, "a"))
    t = P.peer_table(rows, meta)
    head = next(ln for ln in t.splitlines() if ln.startswith("| #"))
    assert head.split(" | ")[2:7] == ["ours", "cudnn", "fa3", "flashinfer", "cudnn-dense-standin (stand-in)"]
    dec = next(ln for ln in t.splitlines() if "| dec |" in ln).split(" | ")
    assert dec[2:7] == ["1.0000 / 0.4000", "x", "1.0000 / 0.5000", "0.9000 / 0.6000", "0.5000 / 0.1000"]
    assert dec[7:10] == ["0.900", "1.250", "flashinfer"]
    assert "# Peers: g on H200" in t and "- fa3: FA3 v; from /root/fa3/x.so (2 rows passed)" in t


def test_peers_command_prints_and_writes_a_recorded_runs_table(tmp_path):
    run = _run(tmp_path, "a")
    out = tmp_path / "peers.md"
    r = subprocess.run([sys.executable, "-m", "kernelseek", "peers", "--from", str(run), "--out", str(out)],
                       capture_output=True, text=True, cwd=REPO, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    assert out.read_text().strip() == P.peer_table(*R.load(run)).strip()
    r = subprocess.run([sys.executable, "-m", "kernelseek", "peers", "--from", str(tmp_path / "nope")],
                       capture_output=True, text=True, cwd=REPO, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr


def test_repeatability_on_the_graph_measure(tmp_path):
    from kernelseek import compare as C
    a, _ = R.load(_run(tmp_path, "a", graph_dec=0.40, graph_pre=2.00))
    b, _ = R.load(_run(tmp_path, "b", graph_dec=0.404, graph_pre=2.10))   # graph speedups move 1.0% and 5.0%
    assert C.graph_speedups(a) == {"dec": pytest.approx(1.25), "pre": pytest.approx(0.25)}
    rep = C.repeatability([("a", a), ("b", b)]).iloc[0]
    assert rep.graph_rows == 2 and rep.over_tol == 0                        # per call: nothing moved
    assert [k for k, _ in rep.graph_over] == ["pre"] and rep.graph_max_move == pytest.approx(2.1 / 2.0 - 1)   # |log|: either way
    text = C.format_repeatability(C.repeatability([("a", a), ("b", b)]))
    assert "on the CUDA-graph measure: 1 of 2 rows over 3%; largest move 5.0% (pre)" in text


# ---- the production grid ---------------------------------------------------------------------------------
def test_production_grid_names_its_models_and_states_each_shape():
    grid = load_grid("production")
    assert len(grid) >= 15 and [s.row for s in grid] == list(range(1, len(grid) + 1))
    models = ("Llama-3-8B", "Llama-3.1-8B", "Llama-3-70B", "Qwen2.5-7B", "Qwen2.5-72B", "Mistral-7B", "Gemma-2-9B")
    for s in grid:
        assert any(m in s.note for m in models), s.name
        assert f"{s.heads_q}/{s.heads_kv} heads" in s.note and f"head dim {s.head_dim}" in s.note, s.name
    decode = [s for s in grid if s.group == "decode"]
    assert len(decode) >= 6 and all(s.paged and s.seqlen_q == 1 for s in decode)
    assert any(s.paged and s.group == "prefill" for s in grid)                  # chunked prefill on a paged cache
    assert {s.heads_q // s.heads_kv for s in grid} >= {2, 4, 7, 8}


def _tiny(s: Scenario) -> Scenario:
    """The same features at a few dozen keys (lengths / 128, at least 1; batch at most 3)."""
    def sh(n):
        return max(1, n // 128)
    if s.varlen:
        return dataclasses.replace(s, seqlens_q=tuple(map(sh, s.seqlens_q)), seqlens_k=tuple(map(sh, s.seqlens_k)))
    b = min(s.batch, 3)
    kw = dict(batch=b, seqlen_q=s.seqlen_q if s.seqlen_q == 1 else sh(s.seqlen_q), seqlen_k=sh(s.seqlen_k) + 5)
    if s.cache_seqlens is not None:
        kw["cache_seqlens"] = tuple(min(kw["seqlen_k"], sh(c) + 1) for c in s.cache_seqlens[:b])
    if s.window != (-1, -1):
        kw["window"] = (sh(s.window[0]), s.window[1])
    return dataclasses.replace(s, **kw)


@pytest.mark.parametrize("s", load_grid("production"), ids=lambda s: s.name)
def test_production_rows_run_through_the_reference_at_tiny_size(s):
    t = _tiny(s)
    from kernelseek.scenarios import validate
    validate(t, "tiny " + s.name)
    inp = make_inputs(t, seed=1)
    o32, lse32 = attention_ref(t, inp, "fp32")
    olp, _ = attention_ref(t, inp, "lowp")
    assert torch.isfinite(o32).all() and torch.isfinite(lse32).all()      # every query sees a key
    assert (olp.float() - o32).abs().max() < 0.05                          # the two references agree


def test_repeatability_on_graph_p10_times(tmp_path):
    """Session 11: on row 12 every library's median graph time moved ~3% between runs while the
    fastest replays held; rows that record graph p10 times (since then) are compared on them too."""
    from kernelseek import compare as C

    def run(name, med, p10):
        rep = _reply(graph=med)
        rep["graph_p10_ms"] = p10
        rep["baselines"]["fa3"] = dict(rep["baselines"]["fa3"], graph_p10_ms=0.48)
        rows = [E.make_row(dataclasses.replace(DECODE, row=1), "g", rep)]
        R.save(tmp_path / name, rows, {"grid": "g", "kernel": "kernels/k.cu"})
        return R.load(tmp_path / name)[0]
    a, b = run("a", 0.40, 0.38), run("b", 0.42, 0.381)          # medians 4.8% apart, p10s 0.3%
    assert a[0].graph_p10_ms == 0.38 and C.graph_speedups(a, p10=True) == {"dec": pytest.approx(0.48 / 0.38)}
    rep = C.repeatability([("a", a), ("b", b)]).iloc[0]
    assert len(rep.graph_over) == 1 and rep.graph_p10_over_tol == 0
    assert rep.graph_p10_max_move == pytest.approx(0.381 / 0.38 - 1)
    text = C.format_repeatability(C.repeatability([("a", a), ("b", b)]))
    assert "on graph p10 times: 0 rows over 3%, largest move 0.3%" in text
    old, _ = R.load(_run(tmp_path, "c"))                           # runs without p10: no such line
    assert C.graph_speedups(old, p10=True) == {}
    assert "graph p10" not in C.format_repeatability(C.repeatability([("c", old), ("c2", old)]))
