"""The split-KV decode's wide form (kernels/fa3_hopper/decode.cuh splitkv_deep: 8 warps, each with its own
cp.async ring) on the GPU: it runs where the decode grid has at most one CTA per SM (an explicit num_splits, a
few sequences), so every call here is sized to take it. Each is checked against reference_fa3 (float64), LSE and its
-inf pattern included, across what its key slices and merge must get right: ragged and empty sequences, a split past a
sequence's keys, page tables with odd lengths, leftpad, cache_batch_idx, appends, windows, chunks, softcap,
GQA packing, varlen queries, hd64 / hd128, bf16 / fp16."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run through the device tool)")]

from kernelseek import fa3api_grid as G  # noqa: E402

BASE = dict(fn="kvcache", dtype="bf16", heads_q=16, heads_kv=8, head_dim=128, causal=True, seqlen_q=1)
ROWS = {
    "ragged_splits3": dict(batch=4, seqlen_k=8001, num_splits=3, cache_seqlens=[8001, 17, 1, 4095]),
    "paged16_hd64_fp16": dict(dtype="fp16", head_dim=64, heads_q=8, heads_kv=2, batch=3, seqlen_k=3000,
                              page_size=16, num_splits=5, cache_seqlens=[3000, 1, 2047]),
    "paged64_splits_past_keys": dict(batch=2, seqlen_k=4096, page_size=64, num_splits=7, cache_seqlens=[70, 4096]),
    "leftpad": dict(batch=3, seqlen_k=2000, num_splits=4, cache_seqlens=[2000, 1500, 900], leftpad=[0, 5, 100]),
    "window_softcap": dict(batch=2, seqlen_k=5000, num_splits=4, window=[300, 0], softcap=30.0,
                           cache_seqlens=[5000, 2222]),
    "chunk_rows3": dict(batch=2, seqlen_q=3, seqlen_k=4000, num_splits=2, attention_chunk=512,
                        cache_seqlens=[4000, 1025]),
    "noncausal_rows2_fp16": dict(dtype="fp16", causal=False, batch=2, seqlen_q=2, seqlen_k=3333, num_splits=3,
                                 cache_seqlens=[3333, 10]),
    "gqa16_hd64": dict(head_dim=64, heads_q=32, heads_kv=2, batch=2, seqlen_k=6000, num_splits=8,
                       cache_seqlens=[6000, 4999]),
    "batch_idx": dict(batch=4, cache_batch=9, seqlen_k=3001, num_splits=2, cache_seqlens=[3001, 1, 2000, 17]),
    "varlen_q_paged": dict(seqlens_q=[1, 3, 2], seqlen_k=4096, page_size=16, num_splits=3,
                           cache_seqlens=[4000, 17, 999]),
    "append": dict(batch=2, seqlen_k=3000, num_splits=3, new_kv=1, cache_seqlens=[2000, 77]),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_wide_decode_matches_the_reference(name):
    row = {**BASE, **ROWS[name]}
    if "seqlens_q" in row:
        row.pop("seqlen_q")
    res = G.check(G.make_call(row, seed=22))
    assert res["ok"], res
    assert res["fast"] and "decode" in res["paths"], res["paths"]
