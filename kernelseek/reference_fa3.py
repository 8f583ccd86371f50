"""Reference for FlashAttention-3 *calls* (kernelseek.attention's semantics), brute force in float64.

reference.py answers one Scenario in the kernel's ABI (kernels/kseek.h); this module answers a whole
FlashAttention-3 interface call, with the features the ABI does not have, written from FA3's
documented semantics (hopper/flash_attn_interface.py and its test reference), row by row:

* keys of batch b: the cache row `cache_batch_idx[b]` (dense) or page-table row `cache_batch_idx[b]`
  (paged), else row b / pages of b / packed rows cu_seqlens_k[b]..; logical positions
  leftpad_k[b] <= j < end_b (end_b = seqused_k[b], else the capacity); j' = j - leftpad.
* queries of batch b: rows i < Sq_b, Sq_b = seqused_q[b] when given (varlen), else its length;
  rows at or past seqused_q give O = 0 and lse = -inf. Query i sits at key position
  p = i + Sk_b - Sq_b (bottom-right).
* visible keys: window (left, right), -1 unbounded, causal = right 0;
  attention_chunk C > 0 also requires floor(p / C) == floor(j' / C) (FA3's chunk mask: both sides).
* score = scale * (q.k [+ qv.v]); softcap; sinks (s_aux) in the denominator only; empty rows give
  O = 0, lse = -inf. fp8: q, k, v (and qv) dequantized by the [B, Hkv] descales first.
* appending (kvcache_ref): new k/v (rotary-embedded at positions rotary_seqlens[b] + j, default
  cache_seqlens) written at cache positions cache_seqlens[b] + j; q rotated at rotary_seqlens[b] + i
  when causal/local/chunked, else all rows at rotary_seqlens[b]; attention over cache_seqlens + new.
* combine_ref: the logsumexp merge of split partial results.
Default scale: (D + Dv_qv) ** -0.5, as FA3.
"""
from __future__ import annotations

import math

import torch

F64 = torch.float64


def rotary_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor,
               interleaved: bool) -> torch.Tensor:
    """x [n, H, D] rows at positions pos [n]; rotates the first 2 * cos.shape[1] dims, in float64,
    returned in x's dtype. interleaved: pairs (0,1), (2,3)...; else halves (GPT-NeoX)."""
    rd = 2 * cos.shape[1]
    w = torch.complex(cos.to(F64)[pos.long()], sin.to(F64)[pos.long()])[:, None, :]  # e^{i angle} [n, 1, rd/2]
    xf = x.to(F64)
    r = xf[..., :rd]
    if interleaved:  # pairs (0,1), (2,3)... as complex numbers, rotated by multiplication
        out = torch.view_as_real(torch.view_as_complex(r.reshape(*r.shape[:-1], rd // 2, 2).contiguous()) * w)
        out = out.flatten(-2)
    else:  # halves as real and imaginary parts
        z = torch.complex(r[..., :rd // 2], r[..., rd // 2:]) * w
        out = torch.cat((z.real, z.imag), dim=-1)
    return torch.cat((out, xf[..., rd:]), dim=-1).to(x.dtype)


def visible_ref(i: int, j: int, sq: int, sk: int, window=(-1, -1), causal=False, chunk=0) -> bool:
    """Query row i sees key j' (FA3 semantics, written as distances)."""
    wl, wr = window
    if causal:
        wr = 0
    p = i + sk - sq
    if wl >= 0 and j < p - wl:
        return False
    if wr >= 0 and j > p + wr:
        return False
    if chunk > 0 and math.floor(p / chunk) != math.floor(j / chunk):
        return False
    return 0 <= j < sk


def mask_ref(sq: int, sk: int, window=(-1, -1), causal=False, chunk=0, device="cpu") -> torch.Tensor:
    """bool [sq, sk]: visible_ref for every (i, j'), vectorised."""
    wl, wr = window
    wr = 0 if causal else wr
    p = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if wl >= 0:
        vis &= j >= p - wl
    if wr >= 0:
        vis &= j <= p + wr
    if chunk > 0:
        vis &= torch.div(p, chunk, rounding_mode="floor") == torch.div(j, chunk, rounding_mode="floor")
    return vis


def _seq_keys(b, k, v, *, cu_seqlens_k, seqused_k, leftpad_k, page_table, cache_batch_idx):
    """(k [Sk_b, Hkv, D], v [Sk_b, Hkv, Dv]) of batch b after batch index, pages, leftpad, seqused."""
    src = int(cache_batch_idx[b]) if cache_batch_idx is not None else b
    if page_table is not None:
        ps = k.shape[1]
        pages = page_table[src].long()
        kb, vb = k[pages].flatten(0, 1), v[pages].flatten(0, 1)
    elif cu_seqlens_k is not None:
        lo, hi = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        kb, vb = k[lo:hi], v[lo:hi]
    else:
        kb, vb = k[src], v[src]
    end = int(seqused_k[b]) if seqused_k is not None else kb.shape[0]
    lp = int(leftpad_k[b]) if leftpad_k is not None else 0
    return kb[lp:end], vb[lp:end]


def _deq(x, ds, b, per):
    """x [n, H, D] as float64, times descale [B, Hkv] of batch b (each KV head's scale covers `per` heads)."""
    y = x.to(F64)
    if ds is not None:
        y = y * ds[b].to(F64).repeat_interleave(per)[None, :, None]
    return y


def _one(qb, kb, vb, qvb, *, scale, causal, window, chunk, softcap, sinks):
    """One sequence, float64: qb [Sq, Hq, D], kb [Sk, Hkv, D] -> o [Sq, Hq, Dv], lse [Hq, Sq]."""
    sq, hq = qb.shape[0], qb.shape[1]
    sk, hkv = kb.shape[0], kb.shape[1]
    g = hq // hkv
    if sq == 0 or sk == 0:  # no rows, or no key: O = 0, lse = -inf
        dev = qb.device
        return (torch.zeros(sq, hq, vb.shape[-1], dtype=F64, device=dev),
                torch.full((hq, sq), float("-inf"), dtype=F64, device=dev))
    kr, vr = kb.repeat_interleave(g, dim=1), vb.repeat_interleave(g, dim=1)  # [Sk, Hq, *]
    s = torch.einsum("ihd,jhd->hij", qb, kr)
    if qvb is not None:
        s = s + torch.einsum("ihd,jhd->hij", qvb, vr)
    s = s * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    vis = mask_ref(sq, sk, window, causal, chunk, device=qb.device)
    s = s.masked_fill(~vis, float("-inf"))
    m = s.amax(-1)  # [Hq, Sq]
    if sinks is not None:
        m = torch.maximum(m, sinks.to(F64)[:, None])
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m[..., None])
    den = e.sum(-1) + (torch.exp(sinks.to(F64)[:, None] - m) if sinks is not None else 0)
    has = vis.any(-1)[None, :].expand(hq, sq)
    o = torch.einsum("hij,jhd->ihd", e / den[..., None], vr)
    o = o.masked_fill(~has.T[..., None], 0.0)
    lse = (m + torch.log(den)).masked_fill(~has, float("-inf"))
    return o, lse


def attention_ref(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None,
                  leftpad_k=None, page_table=None, cache_batch_idx=None, qv=None, softmax_scale=None,
                  causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0, s_aux=None,
                  q_descale=None, k_descale=None, v_descale=None):
    """(o float64, lse float64) of one FA3 forward call: o like q with Dv ([B,Sq,Hq,Dv] or [T,Hq,Dv]),
    lse [B,Hq,Sq] or [Hq,T]. q dense [B,Sq,Hq,D] or packed [T,Hq,D] with cu_seqlens_q; k/v dense
    [Bc,Sk,Hkv,*], packed with cu_seqlens_k, or paged [pages,page_size,Hkv,*] with page_table."""
    varlen = cu_seqlens_q is not None
    nb = cu_seqlens_q.numel() - 1 if varlen else q.shape[0]
    hq, hkv, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    g = hq // hkv
    if softmax_scale is None:
        softmax_scale = (q.shape[-1] + (qv.shape[-1] if qv is not None else 0)) ** -0.5
    o = torch.zeros(q.shape[:-1] + (dv,), dtype=F64, device=q.device)
    lse = torch.full((hq, q.shape[0]) if varlen else (nb, hq, q.shape[1]), float("-inf"), dtype=F64, device=q.device)
    window = tuple(int(w) for w in window_size)
    for b in range(nb):
        r0, n = (int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1] - cu_seqlens_q[b])) if varlen else (0, q.shape[1])
        if seqused_q is not None:
            n = min(n, int(seqused_q[b]))
        rows = slice(r0, r0 + n)
        qb = q[rows] if varlen else q[b, :n]
        qvb = None if qv is None else (qv[rows] if varlen else qv[b, :n])
        kb, vb = _seq_keys(b, k, v, cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k, leftpad_k=leftpad_k,
                           page_table=page_table, cache_batch_idx=cache_batch_idx)
        ob, lb = _one(_deq(qb, q_descale, b, g), _deq(kb, k_descale, b, 1), _deq(vb, v_descale, b, 1),
                      None if qvb is None else _deq(qvb, q_descale, b, g), scale=softmax_scale, causal=causal,
                      window=window, chunk=int(attention_chunk or 0), softcap=float(softcap or 0.0), sinks=s_aux)
        if varlen:
            o[rows], lse[:, rows] = ob, lb
        else:
            o[b, :n], lse[b, :, :n] = ob, lb
    return o, lse


def _cache_rows(b, n, k_cache, page_table, cache_batch_idx, start):
    """Index tuples into the cache for positions start..start+n-1 of batch b (dense or paged)."""
    src = int(cache_batch_idx[b]) if cache_batch_idx is not None else b
    pos = torch.arange(start, start + n, device=k_cache.device)
    if page_table is None:
        return (torch.full((n,), src, device=k_cache.device), pos)
    ps = k_cache.shape[1]
    return (page_table[src].long()[pos // ps], pos % ps)


def kvcache_ref(q, k_cache, v_cache, k=None, v=None, *, cache_seqlens=None, cache_batch_idx=None,
                page_table=None, cu_seqlens_q=None, cu_seqlens_k_new=None, rotary_cos=None, rotary_sin=None,
                rotary_seqlens=None, rotary_interleaved=True, causal=False, window_size=(-1, -1),
                attention_chunk=0, **kw):
    """flash_attn_with_kvcache by the rules in the module docstring, on CLONES of the caches:
    (o, lse, k_cache_after, v_cache_after)."""
    nb = cu_seqlens_q.numel() - 1 if cu_seqlens_q is not None else q.shape[0]
    kc, vc = k_cache.clone(), v_cache.clone()
    cap = page_table.shape[1] * kc.shape[1] if page_table is not None else kc.shape[1]
    dev = q.device
    seqlens = (torch.full((nb,), cap, dtype=torch.int32, device=dev) if cache_seqlens is None
               else torch.as_tensor(cache_seqlens, dtype=torch.int32, device=dev).expand(nb).clone())
    ro = seqlens if rotary_seqlens is None else rotary_seqlens
    q = q.clone()
    if rotary_cos is not None:
        per_row = causal or attention_chunk or any(int(w) >= 0 for w in window_size)
        for b in range(nb):
            r0, n = ((int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1] - cu_seqlens_q[b])) if cu_seqlens_q is not None
                     else (0, q.shape[1]))
            pos = int(ro[b]) + (torch.arange(n, device=dev) if per_row else torch.zeros(n, dtype=torch.long, device=dev))
            if cu_seqlens_q is not None:
                q[r0:r0 + n] = rotary_ref(q[r0:r0 + n], rotary_cos, rotary_sin, pos, rotary_interleaved)
            else:
                q[b] = rotary_ref(q[b], rotary_cos, rotary_sin, pos, rotary_interleaved)
    new = torch.zeros(nb, dtype=torch.int32, device=dev)
    if k is not None:
        for b in range(nb):
            if cu_seqlens_k_new is not None:
                kb = k[int(cu_seqlens_k_new[b]):int(cu_seqlens_k_new[b + 1])]
                vb = v[int(cu_seqlens_k_new[b]):int(cu_seqlens_k_new[b + 1])]
            else:
                kb, vb = k[b], v[b]
            n = kb.shape[0]
            if rotary_cos is not None:
                kb = rotary_ref(kb, rotary_cos, rotary_sin, int(ro[b]) + torch.arange(n, device=dev),
                                rotary_interleaved)
            idx = _cache_rows(b, n, kc, page_table, cache_batch_idx, int(seqlens[b]))
            kc[idx], vc[idx] = kb.to(kc.dtype), vb.to(vc.dtype)
            new[b] = n
    o, lse = attention_ref(q, kc, vc, cu_seqlens_q=cu_seqlens_q, seqused_k=seqlens + new, page_table=page_table,
                           cache_batch_idx=cache_batch_idx, causal=causal, window_size=window_size,
                           attention_chunk=attention_chunk, **kw)
    return o, lse, kc, vc


def combine_ref(out_partial: torch.Tensor, lse_partial: torch.Tensor):
    """out_partial [splits, ..., D] and lse_partial [splits, ...] -> (out float64 [..., D], lse [...]):
    lse = logsumexp over splits; out = sum_s exp(lse_s - lse) out_s (a split with lse -inf adds 0)."""
    lp = lse_partial.to(F64)
    lse = torch.logsumexp(lp, dim=0)
    w = torch.exp(lp - lse)
    w = torch.where(torch.isfinite(w), w, torch.zeros_like(w))
    return (w[..., None] * out_partial.to(F64)).sum(0), lse
