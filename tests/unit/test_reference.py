"""reference.py against an independent float64 computation: explicit loops over rows and keys.

The loop reference below reads q/k/v straight from the input layouts (its own page-table and
varlen indexing, its own mask condition written as distances) so it shares no code with the module.
"""
import dataclasses
import math

import numpy as np
import pytest
import torch

from kernelseek import reference
from kernelseek.inputs import make_inputs
from kernelseek.reference import attention_ref, mask_for
from kernelseek.scenarios import Scenario


def loop_attention(s: Scenario, inp) -> tuple[np.ndarray, np.ndarray]:
    """float64 attention by explicit loops; o and lse in the kernel layouts."""
    q, k, v = (x.float().double().numpy() for x in (inp.q, inp.k, inp.v))
    hq, hkv = s.heads_q, s.heads_kv
    qlens = list(s.seqlens_q) if s.seqlens_q else [s.seqlen_q] * s.batch
    klens = list(s.seqlens_k) if s.seqlens_k else [s.seqlen_k] * s.batch
    nb = len(qlens)
    qstart = np.concatenate([[0], np.cumsum(qlens)]).astype(int)
    kstart = np.concatenate([[0], np.cumsum(klens)]).astype(int)
    wl, wr = s.window
    if s.causal:
        wr = 0
    scale = s.scale if s.scale is not None else 1 / math.sqrt(s.head_dim)
    ones = np.ones((nb, hkv))
    qd, kd, vd = (ones if t is None else t.double().numpy() for t in (inp.q_descale, inp.k_descale, inp.v_descale))
    sinks = None if inp.sinks is None else inp.sinks.double().numpy()
    pt = None if inp.page_table is None else inp.page_table.numpy()
    dv = s.head_dim_v or s.head_dim
    if s.seqlens_q:
        o, lse = np.zeros((sum(qlens), hq, dv)), np.zeros((hq, sum(qlens)))
    else:
        o, lse = np.zeros((nb, s.seqlen_q, hq, dv)), np.zeros((nb, hq, s.seqlen_q))

    def key_row(b, j, hk):
        if pt is not None:
            return k[pt[b, j // s.page_size], j % s.page_size, hk], v[pt[b, j // s.page_size], j % s.page_size, hk]
        if s.seqlens_q:
            return k[kstart[b] + j, hk], v[kstart[b] + j, hk]
        return k[b, j, hk], v[b, j, hk]

    for b in range(nb):
        first = s.leftpad[b] if s.leftpad else 0
        end = s.cache_seqlens[b] if s.cache_seqlens else klens[b]
        n_keys = end - first
        for h in range(hq):
            hk = h // (hq // hkv)
            for i in range(qlens[b]):
                qi = (q[qstart[b] + i, h] if s.seqlens_q else q[b, i, h]) * qd[b, hk]
                me = i + n_keys - qlens[b]  # this query's position among the keys
                scores, vals = [], []
                for jp in range(n_keys):
                    if wl >= 0 and me - jp > wl:
                        continue
                    if wr >= 0 and jp - me > wr:
                        continue
                    if s.attention_chunk and me // s.attention_chunk != jp // s.attention_chunk:
                        continue  # Python's // floors, as kseek.h asks (me < 0: a chunk before every key)
                    kj, vj = key_row(b, first + jp, hk)
                    x = scale * float(np.dot(qi, kj * kd[b, hk]))
                    if s.softcap:
                        x = s.softcap * math.tanh(x / s.softcap)
                    scores.append(x)
                    vals.append(vj * vd[b, hk])
                if not scores:
                    out, l = np.zeros(dv), -math.inf
                else:
                    top = max(scores + ([sinks[h]] if sinks is not None else []))
                    w = [math.exp(x - top) for x in scores]
                    den = sum(w) + (math.exp(sinks[h] - top) if sinks is not None else 0.0)
                    out = sum(wj * vj for wj, vj in zip(w, vals)) / den
                    l = top + math.log(den)
                if s.seqlens_q:
                    o[qstart[b] + i, h], lse[h, qstart[b] + i] = out, l
                else:
                    o[b, i, h], lse[b, h, i] = out, l
    return o, lse


def sc(name, **kw):
    base = dict(name=name, heads_q=2, heads_kv=2, head_dim=16)
    base.update(kw)
    return Scenario(**base)


CASES = [
    sc("dense", batch=2, seqlen_q=5, seqlen_k=7),
    sc("varlen_causal_gqa", seqlens_q=(3, 0, 5, 4), seqlens_k=(4, 6, 2, 9), heads_q=4, causal=True),
    sc("paged_shuffled_mqa", batch=3, seqlen_q=2, seqlen_k=20, page_size=4, heads_q=4, heads_kv=1,
       cache_seqlens=(20, 9, 1)),
    sc("paged_leftpad_causal", batch=2, seqlen_q=3, seqlen_k=16, page_size=4, cache_seqlens=(14, 7),
       leftpad=(3, 5), causal=True),
    sc("leftpad_cache_seqlens", batch=2, seqlen_q=3, seqlen_k=12, cache_seqlens=(12, 7), leftpad=(2, 5),
       causal=True),
    sc("varlen_leftpad_seqused", seqlens_q=(2, 3), seqlens_k=(8, 6), cache_seqlens=(7, 6), leftpad=(1, 2)),
    sc("gqa3", batch=1, seqlen_q=4, seqlen_k=6, heads_q=6, heads_kv=2),
    sc("causal_sq2_sk5", batch=1, seqlen_q=2, seqlen_k=5, causal=True),
    sc("causal_sq5_sk2_empty_rows", batch=1, seqlen_q=5, seqlen_k=2, causal=True),
    sc("window_1_0", batch=1, seqlen_q=6, seqlen_k=6, window=(1, 0)),
    sc("window_2_1", batch=2, seqlen_q=4, seqlen_k=7, window=(2, 1)),
    sc("window_causal_sq_gt_sk", batch=1, seqlen_q=6, seqlen_k=3, window=(1, 0), causal=True, sinks=True),
    sc("softcap", batch=1, seqlen_q=4, seqlen_k=9, softcap=1.5, causal=True),
    sc("sinks", batch=2, seqlen_q=3, seqlen_k=5, sinks=True, heads_q=4),
    sc("sinks_empty_rows", batch=1, seqlen_q=5, seqlen_k=2, causal=True, sinks=True),
    sc("custom_scale", batch=1, seqlen_q=3, seqlen_k=4, scale=0.5),
    sc("dv_ne_d", batch=2, seqlen_q=3, seqlen_k=5, head_dim=32, head_dim_v=8, heads_q=4, heads_kv=1),
    sc("fp16", dtype="fp16", batch=1, seqlen_q=3, seqlen_k=4, causal=True),
    sc("fp8_gqa_causal", dtype="fp8", batch=2, seqlen_q=4, seqlen_k=6, heads_q=4, causal=True),
    sc("fp8_paged", dtype="fp8", batch=2, seqlen_q=2, seqlen_k=12, page_size=4, cache_seqlens=(12, 5),
       softcap=2.0, sinks=True),
    sc("fp8_varlen", dtype="fp8", seqlens_q=(2, 3), seqlens_k=(5, 3), heads_q=4, heads_kv=1),
    # ABI 3's attention_chunk: with causal, a window, leftpad/seqused over pages, and rows at p < 0
    sc("chunk3_causal", batch=2, seqlen_q=7, seqlen_k=9, causal=True, attention_chunk=3),
    sc("chunk4_noncausal_sq_gt_sk", batch=1, seqlen_q=9, seqlen_k=5, attention_chunk=4, sinks=True),
    sc("chunk2_window", batch=1, seqlen_q=6, seqlen_k=8, window=(3, 1), attention_chunk=2),
    sc("chunk_paged_leftpad", batch=2, seqlen_q=3, seqlen_k=12, page_size=4, cache_seqlens=(11, 6), leftpad=(2, 1),
       causal=True, attention_chunk=5),
    sc("chunk_varlen_gqa", seqlens_q=(4, 1), seqlens_k=(10, 7), heads_q=4, heads_kv=2, causal=True, attention_chunk=4),
]


def _compare(s, inp, o, lse):
    ow, lw = loop_attention(s, inp)
    assert o.dtype == torch.float32 and lse.dtype == torch.float32
    assert o.shape == ow.shape and lse.shape == lw.shape
    np.testing.assert_allclose(o.numpy(), ow, rtol=0, atol=2e-6)
    lw_empty = np.isneginf(lw)
    assert np.array_equal(np.isneginf(lse.numpy()), lw_empty)
    np.testing.assert_allclose(lse.numpy()[~lw_empty], lw[~lw_empty], rtol=1e-6, atol=1e-6)
    return ow, lw


@pytest.mark.parametrize("s", CASES, ids=lambda s: s.name)
def test_fp32_reference_matches_loops(s):
    inp = make_inputs(s, 11)
    o, lse = attention_ref(s, inp, "fp32")
    _compare(s, inp, o, lse)


def test_rows_without_keys_are_zero_and_neg_inf_even_with_sinks():
    for name in ("causal_sq5_sk2_empty_rows", "sinks_empty_rows"):
        s = next(c for c in CASES if c.name == name)
        inp = make_inputs(s, 3)
        for prec in ("fp32", "lowp"):
            o, lse = attention_ref(s, inp, prec)
            assert (o[0, :3] == 0).all() and torch.isneginf(lse[0, :, :3]).all()
            assert (o[0, 3:] != 0).any(dim=-1).all() and torch.isfinite(lse[0, :, 3:]).all()


def test_sinks_lower_output_and_raise_lse():
    with_s = next(c for c in CASES if c.name == "sinks")
    inp = make_inputs(with_s, 4)
    o1, l1 = attention_ref(with_s, inp)
    no_sink = sc("nosink", batch=2, seqlen_q=3, seqlen_k=5, heads_q=4)
    o0, l0 = attention_ref(no_sink, dataclasses.replace(inp, sinks=None))  # same q/k/v, no sinks
    ratio = o1 / o0  # sinks only scale each row's weights down: o1 = o0 * sum / (sum + exp(sink))
    assert torch.allclose(ratio, ratio[..., :1].expand_as(ratio), atol=1e-4)
    assert ((ratio > 0) & (ratio < 1)).all()
    assert (l1 > l0).all()


def test_masks_by_hand():
    t = lambda rows: torch.tensor(rows, dtype=torch.bool)
    # bottom-right causal, Sq < Sk: row i sees keys <= i + 3
    assert torch.equal(mask_for(2, 5, causal=True), t([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]))
    # Sq > Sk: the first three rows see nothing
    assert torch.equal(mask_for(5, 2, causal=True), t([[0, 0], [0, 0], [0, 0], [1, 0], [1, 1]]))
    assert torch.equal(mask_for(4, 4, 1, 0), t([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]))
    assert torch.equal(mask_for(3, 5, 2, 1), t([[1, 1, 1, 1, 0], [0, 1, 1, 1, 1], [0, 0, 1, 1, 1]]))
    # causal overrides a positive right window; the left window stays
    assert torch.equal(mask_for(3, 3, 1, 2, causal=True), t([[1, 0, 0], [1, 1, 0], [0, 1, 1]]))
    assert mask_for(3, 4).all()
    # attention_chunk 2, Sq = Sk = 5 causal: row i sees keys of its own pair only (floor(i/2) == floor(j/2))
    assert torch.equal(mask_for(5, 5, causal=True, chunk=2),
                       t([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]]))
    # non-causal, Sq 3 > Sk 2, chunk 2: row 0 sits at p = -1 (chunk -1: no key), rows 1-2 at p 0, 1 (chunk 0)
    assert torch.equal(mask_for(3, 2, chunk=2), t([[0, 0], [1, 1], [1, 1]]))


@pytest.mark.parametrize("budget", [7, 40, 100])
def test_chunking_over_rows_and_heads_gives_the_same_answer(monkeypatch, budget):
    # budget 7 < one row over all heads (forces KV-head chunks), 40 and 100: row chunks
    s = sc("chunked", batch=1, seqlen_q=9, seqlen_k=10, heads_q=4, heads_kv=2, causal=True, window=(4, 0),
           sinks=True)
    inp = make_inputs(s, 5)
    whole = attention_ref(s, inp)
    monkeypatch.setattr(reference, "SCORE_CHUNK_ELEMS", budget)
    parts = attention_ref(s, inp)
    assert torch.allclose(whole[0], parts[0], atol=1e-7, rtol=0)
    assert torch.equal(torch.isneginf(whole[1]), torch.isneginf(parts[1]))
    _compare(s, inp, *parts)


@pytest.mark.parametrize("name", ["dense", "varlen_causal_gqa", "paged_leftpad_causal", "softcap", "sinks"])
def test_lowp_bf16_error_is_small_but_nonzero(name):
    s = next(c for c in CASES if c.name == name)
    inp = make_inputs(s, 6)
    o32, l32 = attention_ref(s, inp, "fp32")
    olp, llp = attention_ref(s, inp, "lowp")
    assert olp.dtype == torch.bfloat16 and llp.dtype == torch.float32
    err = (olp.float() - o32).abs().max().item()
    assert 0 < err < 0.05
    fin = torch.isfinite(l32)
    assert torch.equal(fin, torch.isfinite(llp))
    assert (llp[fin] - l32[fin]).abs().max().item() < 0.05


def test_lowp_rounds_scores_to_input_dtype():
    # the lowp reference multiplies bf16 q*scale by bf16 k and gets bf16 scores: its error must
    # exceed what rounding only the output would give
    s = sc("round", batch=1, seqlen_q=16, seqlen_k=16, head_dim=64)
    inp = make_inputs(s, 2)
    o32, l32 = attention_ref(s, inp)
    olp, llp = attention_ref(s, inp, "lowp")
    out_rounding = (o32.to(torch.bfloat16).float() - o32).abs().max()
    assert (olp.float() - o32).abs().max() > out_rounding
    assert (llp - l32).abs().max() > 1e-4  # fp32 LSE from bf16 scores


def test_lowp_fp8_uses_dequantized_bf16_and_fp8_probabilities():
    s = next(c for c in CASES if c.name == "fp8_gqa_causal")
    inp = make_inputs(s, 9)
    o32, _ = attention_ref(s, inp)
    olp, _ = attention_ref(s, inp, "lowp")
    assert olp.dtype == torch.bfloat16
    err = (olp.float() - o32).abs().max().item()
    # P through e4m3 (3 mantissa bits) costs far more than bf16 rounding, yet stays a few percent
    assert 0.01 < err < 0.2


def test_fp16_lowp_outputs_fp16():
    s = next(c for c in CASES if c.name == "fp16")
    inp = make_inputs(s, 1)
    olp, _ = attention_ref(s, inp, "lowp")
    assert olp.dtype == torch.float16


def test_unknown_precision_is_rejected():
    s = CASES[0]
    with pytest.raises(ValueError, match="precision"):
        attention_ref(s, make_inputs(s, 0), "fp64")
