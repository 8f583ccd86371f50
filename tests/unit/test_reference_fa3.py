"""reference_fa3 (FlashAttention-3 call semantics) against hand-computed cases and explicit loops."""
import itertools
import math

import pytest
import torch

from kernelseek import reference_fa3 as R


def test_two_keys_by_hand():
    # scale 1: scores 0 and ln 3 -> weights 1/4, 3/4; v = 1 and 5 -> o = 4; lse = ln 4
    d = 8
    q = torch.zeros(1, 1, 1, d, dtype=torch.float64)
    q[..., 0] = 1.0
    k = torch.zeros(1, 2, 1, d, dtype=torch.float64)
    k[0, 1, 0, 0] = math.log(3.0)
    v = torch.zeros(1, 2, 1, d, dtype=torch.float64)
    v[0, 0, 0, :] = 1.0
    v[0, 1, 0, :] = 5.0
    o, lse = R.attention_ref(q, k, v, softmax_scale=1.0)
    assert torch.allclose(o[0, 0, 0], torch.full((d,), 4.0, dtype=torch.float64))
    assert lse[0, 0, 0].item() == pytest.approx(math.log(4.0))


def test_chunk_mask_by_hand():
    # Sq = Sk = 5, chunk 2, causal: chunks {0,1} {2,3} {4}
    want = torch.tensor([[1, 0, 0, 0, 0],
                         [1, 1, 0, 0, 0],
                         [0, 0, 1, 0, 0],
                         [0, 0, 1, 1, 0],
                         [0, 0, 0, 0, 1]], dtype=torch.bool)
    assert torch.equal(R.mask_ref(5, 5, causal=True, chunk=2), want)
    # 2 queries over 5 keys, not causal: p = 3, 4 -> chunks {2,3} and {4}
    assert torch.equal(R.mask_ref(2, 5, chunk=2), torch.tensor([[0, 0, 1, 1, 0], [0, 0, 0, 0, 1]], dtype=torch.bool))
    # more queries than keys: rows at p < 0 see nothing under a chunk
    assert not R.mask_ref(4, 2, chunk=3)[:2].any()


@pytest.mark.parametrize("sq, sk", [(1, 1), (3, 9), (9, 3), (6, 6), (5, 13)])
def test_mask_matches_the_scalar_rule(sq, sk):
    for wl, wr, causal, chunk in itertools.product([-1, 0, 2], [-1, 0, 3], [False, True], [0, 1, 2, 4, 7]):
        m = R.mask_ref(sq, sk, (wl, wr), causal, chunk)
        for i, j in itertools.product(range(sq), range(sk)):
            assert bool(m[i, j]) == R.visible_ref(i, j, sq, sk, (wl, wr), causal, chunk), (wl, wr, causal, chunk, i, j)


def _loop(q, k, v, qv, scale, softcap, vis, qd, kd, vd):
    """One batch by explicit loops: q [Sq,Hq,D] ... -> o [Sq,Hq,Dv] (floats)."""
    sq, hq, _ = q.shape
    sk, hkv, dv = v.shape
    g = hq // hkv
    o = torch.zeros(sq, hq, dv, dtype=torch.float64)
    for h, i in itertools.product(range(hq), range(sq)):
        kh = h // g
        s = []
        for j in range(sk):
            x = sum(float(q[i, h, e]) * qd[kh] * float(k[j, kh, e]) * kd[kh] for e in range(q.shape[2]))
            if qv is not None:
                x += sum(float(qv[i, h, e]) * qd[kh] * float(v[j, kh, e]) * vd[kh] for e in range(dv))
            x *= scale
            if softcap:
                x = softcap * math.tanh(x / softcap)
            s.append(x if vis[i][j] else -math.inf)
        m = max(s)
        if m == -math.inf:
            continue
        w = [math.exp(x - m) for x in s]
        z = sum(w)
        for e in range(dv):
            o[i, h, e] = sum(w[j] * float(v[j, kh, e]) * vd[kh] for j in range(sk)) / z
    return o


@pytest.mark.parametrize("has_qv, softcap, fp8", [(False, 0.0, False), (True, 0.0, False), (False, 5.0, True)])
def test_gqa_qv_softcap_descales_match_loops(has_qv, softcap, fp8):
    g = torch.Generator().manual_seed(3)
    sq, sk, hq, hkv, d, dv = 3, 5, 4, 2, 8, 16
    q, k = torch.randn(1, sq, hq, d, generator=g), torch.randn(1, sk, hkv, d, generator=g)
    v = torch.randn(1, sk, hkv, dv, generator=g)
    qv = torch.randn(1, sq, hq, dv, generator=g) if has_qv else None
    ds = [torch.rand(1, hkv, generator=g) + 0.5 for _ in range(3)] if fp8 else [None] * 3
    o, _ = R.attention_ref(q, k, v, qv=qv, causal=True, attention_chunk=3, softcap=softcap,
                           q_descale=ds[0], k_descale=ds[1], v_descale=ds[2])
    vis = [[R.visible_ref(i, j, sq, sk, causal=True, chunk=3) for j in range(sk)] for i in range(sq)]
    one = [1.0] * hkv
    qd, kd, vd = ((one if t is None else t[0].tolist()) for t in ds)
    scale = (d + (dv if has_qv else 0)) ** -0.5
    want = _loop(q[0], k[0], v[0], None if qv is None else qv[0], scale, softcap, vis, qd, kd, vd)
    assert torch.allclose(o[0], want, atol=1e-10)


def test_rotary_quarter_turn_by_hand():
    # angle pi/2 at position 1: a pair (a, b) -> (-b, a); dims past the rotary dim unchanged
    x = torch.arange(1.0, 25.0, dtype=torch.float64).view(1, 1, 24)
    cos = torch.stack([torch.ones(8), torch.zeros(8)]).double()
    sin = torch.stack([torch.zeros(8), torch.ones(8)]).double()
    pos = torch.tensor([1])
    y = R.rotary_ref(x, cos, sin, pos, interleaved=True)[0, 0]
    assert y[:4].tolist() == [-2.0, 1.0, -4.0, 3.0] and torch.equal(y[16:], x[0, 0, 16:])
    y = R.rotary_ref(x, cos, sin, pos, interleaved=False)[0, 0]
    assert y[0].item() == -9.0 and y[8].item() == 1.0 and torch.equal(y[16:], x[0, 0, 16:])
    assert torch.equal(R.rotary_ref(x, cos, sin, torch.tensor([0]), True), x)  # angle 0


def test_combine_of_two_key_halves_is_the_whole():
    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(2, 3, 2, 8, generator=g), torch.randn(2, 10, 2, 8, generator=g), torch.randn(2, 10, 2, 8,
                                                                                                        generator=g)
    whole, lse = R.attention_ref(q, k, v)
    parts = [R.attention_ref(q, k[:, a:b], v[:, a:b]) for a, b in ((0, 4), (4, 10))]
    o_p = torch.stack([o for o, _ in parts])                        # [2, B, Sq, H, D]
    l_p = torch.stack([l.transpose(1, 2) for _, l in parts])        # [2, B, Sq, H]
    o, l = R.combine_ref(o_p, l_p)
    assert torch.allclose(o, whole) and torch.allclose(l, lse.transpose(1, 2))
    l_p[1] = float("-inf")                                          # an empty split adds nothing
    o, _ = R.combine_ref(o_p, l_p)
    assert torch.allclose(o, o_p[0])


def test_kvcache_append_writes_at_cache_seqlens_with_batch_idx_and_pages():
    g = torch.Generator().manual_seed(7)
    ps, hkv, d = 4, 1, 8
    kc, vc = torch.randn(6, ps, hkv, d, generator=g), torch.randn(6, ps, hkv, d, generator=g)
    table = torch.tensor([[5, 0], [2, 3], [1, 4]])
    knew, vnew = torch.randn(2, 3, hkv, d, generator=g), torch.randn(2, 3, hkv, d, generator=g)
    q = torch.randn(2, 1, 2, d, generator=g)
    o, _, kc2, vc2 = R.kvcache_ref(q, kc, vc, knew, vnew, cache_seqlens=torch.tensor([2, 5]), page_table=table,
                                   cache_batch_idx=torch.tensor([2, 0]))
    # batch 0 -> table row 2 ([1, 4]): positions 2, 3, 4 = page 1 slots 2, 3 and page 4 slot 0
    assert torch.equal(kc2[1, 2], knew[0, 0]) and torch.equal(kc2[4, 0], knew[0, 2])
    # batch 1 -> table row 0 ([5, 0]): positions 5, 6, 7 = page 0 slots 1, 2, 3
    assert torch.equal(vc2[0, 1:4], vnew[1])
    untouched = torch.ones(6, ps, dtype=torch.bool)
    untouched[1, 2:] = untouched[4, 0] = False
    untouched[0, 1:] = False
    assert torch.equal(kc2[untouched], kc[untouched])
    # attention of batch 1 sees keys 0..7 of table row 0
    keys = torch.cat([kc2[5], kc2[0]])[:8]
    vals = torch.cat([vc2[5], vc2[0]])[:8]
    want, _ = R.attention_ref(q[1:], keys[None], vals[None])
    assert torch.allclose(o[1:], want)
