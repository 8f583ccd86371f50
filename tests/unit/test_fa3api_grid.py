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
