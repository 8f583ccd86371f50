"""The fa3api grid: every row loads, and (shrunk to CPU size) runs through the runner and matches
reference_fa3. The GPU run (tools/gpu_fa3api.sh, tests/gpu/test_fa3api_gpu.py) checks the paths."""
import math

import pytest
import yaml

from kernelseek import fa3api_grid as G
from kernelseek.paths import GRIDS

LENGTHS = ("seqlen_q", "seqlen_k", "attention_chunk", "new_kv")


def shrink(row: dict, f: int = 64) -> dict:
    """The row with every length divided by f (at least 1), still consistent (cache fits the appends)."""
    r = dict(row)
    s = lambda x: max(1, math.ceil(x / f))
    for k in LENGTHS + ("seqlens_q", "seqlens_k", "seqused_q", "seqused_k", "cache_seqlens"):
        if k in r:
            r[k] = [s(x) for x in r[k]] if isinstance(r[k], list) else s(r[k])
    if "page_size" in r:
        r["page_size"] = 4
    if "window" in r:
        r["window"] = [w if w < 0 else s(w) for w in r["window"]]
    new = r.get("new_kv", 0)
    if "cache_seqlens" in r:
        room = r["seqlen_k"] - (max(new) if isinstance(new, list) else new)
        r["cache_seqlens"] = [min(c, room) for c in r["cache_seqlens"]]
    if r.get("heads_q", 0) > 4:
        r["heads_q"], r["heads_kv"] = 4, min(r["heads_kv"], 2) if r["heads_kv"] > 1 else 1
    return r


ROWS = G.load_rows()


def test_grid_rows_load_and_cover_the_features():
    feats = {r["feature"] for r in ROWS}
    assert {"attention_chunk", "seqused_q", "cache_batch_idx", "varlen_q_cache", "append_rotary", "append", "qv",
            "fp8_paged", "head_dim_v", "num_splits"} <= feats
    assert len({r["name"] for r in ROWS}) == len(ROWS)


def test_a_bad_row_is_named(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text(yaml.safe_dump({"rows": [{"name": "x", "seqlen": 3}]}))
    with pytest.raises(ValueError, match=r"row 0 \(x\).*seqlen"):
        G.load_rows(p)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_row_runs_and_matches_the_reference_on_cpu(row):
    r = shrink(row)
    call = G.make_call(r, device="cpu")
    res = G.check(call)
    assert res["ok"], res
    assert res["paths"] and set(res["paths"]) == {"reference"}


def test_runner_times_each_row_against_the_call_without_its_feature_when_fa3_is_absent(capsys):
    rows = [shrink(r) for r in ROWS if r["name"] in ("chunk_varlen", "batch_idx_prefill", "append_rotary_decode")]
    res = G.run_rows(rows, check_only=False, reps=1, device="cpu")
    for r in res:
        assert r["ok"] and r["ours_ms"] > 0 and r["base_ms"] > 0, r
        assert r["base"].startswith(f"ours without {r['feature']}")
        assert r["speed"] == pytest.approx(r["base_ms"] / r["ours_ms"])
    out = capsys.readouterr().out
    assert "chunk_varlen" in G.table(res) and out.count("{") >= 3


# ---- graph timing (DESIGN.md, "Measurement contract": decode rows judged on graph time) ----------
BY_NAME = {r["name"]: r for r in ROWS}
DECODE = {"chunk_decode", "batch_idx_decode", "varlen_q_paged_decode", "append_rotary_decode", "qv_mla_decode",
          "fp8_paged_decode", "splits_decode"}


def test_decode_shaped_rows_of_the_grid():
    assert {n for n, r in BY_NAME.items() if G.decode_shaped(r)} == DECODE
    assert not G.decode_shaped(BY_NAME["varlen_q_paged"])        # mostly 1s, two prefills: per call
    assert not G.decode_shaped(BY_NAME["append_plain_varlen"])   # [3, 1, 130]
    assert G.decode_shaped(BY_NAME["varlen_q_paged_decode"])     # every query length <= 4


def test_runner_on_cpu_records_no_graph_time_and_judges_by_shape():
    names = ("append_rotary_decode", "batch_idx_prefill")
    res = {r["name"]: r for r in G.run_rows([shrink(BY_NAME[n]) for n in names], check_only=False, reps=1,
                                            device="cpu")}
    for n, r in res.items():
        assert r["ok"] and r["ours_ms"] > 0 and r["base_ms"] > 0 and "speed" in r and "ratio" not in r, r
        assert r["ours_graph_ms"] is None and r["base_graph_ms"] is None, r
        assert r["ours_graph_error"] == "no CUDA" and r["base_graph_error"] == "no CUDA", r
        assert r["graph_speed"] is None
        assert r["judged"] == ("graph" if G.decode_shaped(BY_NAME[n]) else "per_call")
    assert res["append_rotary_decode"]["judged"] == "graph" and res["append_rotary_decode"]["judged_speed"] is None
    p = res["batch_idx_prefill"]
    assert p["judged"] == "per_call" and p["judged_speed"] == p["speed"]
    t = G.table(list(res.values()))
    assert "ours_gr" in t and "judged" in t and "graph capture failed" not in t
    assert max(len(line) for line in t.splitlines()) <= 150, t


def test_table_marks_a_capture_failure_and_lists_its_reason():
    rows = [{"name": "d", "ok": True, "fast": True, "ours_ms": 0.05, "base_ms": 0.04, "ours_graph_ms": None,
             "ours_graph_error": "RuntimeError: operation not permitted when stream is capturing",
             "base_graph_ms": 0.02, "speed": 0.8, "graph_speed": None, "judged": "graph", "base": "fa3"},
            {"name": "p", "ok": True, "fast": True, "ours_ms": 1.0, "base_ms": 1.1, "ours_graph_ms": 0.9,
             "base_graph_ms": 1.0, "speed": 1.1, "graph_speed": 1.11, "judged": "per_call", "base": "fa3"}]
    lines = G.table(rows).splitlines()
    assert "fail" in lines[1] and "0.020" in lines[1] and "graph" in lines[1]
    assert "0.900" in lines[2] and "1.11" in lines[2] and "call" in lines[2] and "fail" not in lines[2]
    assert lines[3] == "graph capture failed:" and lines[4].startswith("  d ours: RuntimeError: operation not")


def test_matching_yields_the_named_rows_with_their_calls_in_grid_order():
    got = list(G.matching(r"^varlen_q_(paged|dense)$", device="cpu"))
    assert [r["name"] for r, _ in got] == ["varlen_q_paged", "varlen_q_dense"]
    row, call = got[1]
    assert call.row is row and call.t["q"].device.type == "cpu"
    o, lse = call.bound()()                           # one bound call: its caches made once, with the arguments
    assert o.shape[0] == sum(row["seqlens_q"]) and bool(lse.isfinite().any())
    assert list(G.matching("^no such row$", device="cpu")) == []
