"""KV-cache updates of flash_attn_with_kvcache, as torch ops on the device (no host sync).

append_kv writes the new keys/values into the caches IN PLACE (as FlashAttention-3 does), at
positions cache_seqlens[b] + j of batch b (its cache row cache_batch_idx[b], or its page-table row),
rotary-embedding the keys at positions rotary_seqlens[b] + j first. rotate_q embeds the queries:
per row (rotary_seqlens[b] + i) when the call is causal, windowed or chunked, else every row of a
sequence at rotary_seqlens[b]. Rotation: the first 2 * cos.shape[1] dims, in float32, rounded back
to the tensor's dtype; interleaved pairs (0,1), (2,3)... or GPT-NeoX halves.
"""
from __future__ import annotations

import torch


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor, interleaved: bool):
    """x [n, H, D] with positions pos [n] (long, on x's device) -> a rotated copy."""
    rd = 2 * cos.shape[1]
    c = cos.float()[pos][:, None, :]  # [n, 1, rd/2]
    s = sin.float()[pos][:, None, :]
    r = x[..., :rd].float()
    if interleaved:
        a, b = r[..., 0::2], r[..., 1::2]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    else:
        a, b = r[..., :rd // 2], r[..., rd // 2:]
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)
    y = x.clone()
    y[..., :rd] = out.to(x.dtype)
    return y


def _rows(n_batch: int, cu: torch.Tensor | None, per_seq: int, device):
    """(batch [T], index within the sequence [T]) of T = rows of a packed (cu [B+1]) or dense
    (per_seq rows each) tensor."""
    if cu is None:
        t = torch.arange(n_batch * per_seq, device=device)
        return t // per_seq, t % per_seq
    t = torch.arange(per_seq, device=device)  # per_seq = total rows here
    b = torch.searchsorted(cu[1:].long(), t, right=True).clamp(max=n_batch - 1)
    return b, t - cu.long()[b]


def _check_rotary(cos, sin, d):
    if sin is None:
        raise ValueError("kernelseek.attention: rotary_cos is given but rotary_sin is not")
    rd = 2 * cos.shape[1]
    if rd > d or rd % 16:
        raise ValueError(f"kernelseek.attention: rotary dim {rd} must be a multiple of 16 and at most {d}")


def rotate_q(q, cos, sin, ro, cu_q, per_row: bool, interleaved: bool):
    """q dense [B,Sq,H,D] or packed [T,H,D] (cu_q) rotated at rotary_seqlens ro [B] (+ i per row)."""
    _check_rotary(cos, sin, q.shape[-1])
    nb = q.shape[0] if cu_q is None else cu_q.numel() - 1
    flat = q if cu_q is not None else q.reshape(-1, *q.shape[2:])
    b, i = _rows(nb, cu_q, flat.shape[0] if cu_q is not None else q.shape[1], q.device)
    pos = ro.long()[b] + (i if per_row else 0)
    return rotate(flat, cos, sin, pos, interleaved).view(q.shape)


def _put(cache: torch.Tensor, idx, rows: torch.Tensor) -> None:
    """cache[idx] = rows in place; fp8 through uint8 views (bit copies)."""
    rows = rows.to(cache.dtype)
    if cache.element_size() == 1 and cache.is_floating_point():
        cache.view(torch.uint8).index_put_(idx, rows.view(torch.uint8))
    else:
        cache.index_put_(idx, rows)


def append_kv(k_cache, v_cache, k, v, *, cache_seqlens, page_table=None, batch_idx=None, cu_new=None,
              cos=None, sin=None, ro=None, interleaved=True):
    """Write k/v (dense [B,Sn,Hkv,*] or packed [Tn,Hkv,*] with cu_new) into the caches in place;
    -> new_lens [B] (long). cos/sin: rotary for k at ro[b] + j."""
    nb = cache_seqlens.numel()
    kf = k if cu_new is not None else k.reshape(-1, *k.shape[2:])
    vf = v if cu_new is not None else v.reshape(-1, *v.shape[2:])
    b, j = _rows(nb, cu_new, kf.shape[0] if cu_new is not None else k.shape[1], k.device)
    if cos is not None:
        _check_rotary(cos, sin, k.shape[-1])
        kf = rotate(kf, cos, sin, ro.long()[b] + j, interleaved)
    pos = cache_seqlens.long()[b] + j
    src = batch_idx.long()[b] if batch_idx is not None else b
    if page_table is None:
        idx = (src, pos)
    else:
        ps = k_cache.shape[1]
        idx = (page_table.long()[src, pos // ps], pos % ps)
    _put(k_cache, idx, kf)
    _put(v_cache, idx, vf)
    if cu_new is not None:
        return (cu_new[1:] - cu_new[:-1]).long()
    return torch.full((nb,), k.shape[1], dtype=torch.long, device=k.device)


def combine(out_partial: torch.Tensor, lse_partial: torch.Tensor, out=None, out_dtype=None):
    """flash_attn_combine: out_partial [splits, ..., D] fp32, lse_partial [splits, ...] fp32 ->
    (out [..., D] in out_dtype (default fp32), lse [...] fp32); a split with lse -inf adds nothing."""
    if out_partial.dtype != torch.float32 or lse_partial.dtype != torch.float32:
        raise ValueError("flash_attn_combine: out_partial and lse_partial must be float32")
    if out_partial.shape[0] > 256:
        raise ValueError("flash_attn_combine: at most 256 splits")
    lse = torch.logsumexp(lse_partial, dim=0)
    w = torch.exp(lse_partial - lse)
    w = torch.where(torch.isfinite(w), w, torch.zeros((), dtype=w.dtype, device=w.device))
    o = torch.einsum("s...,s...d->...d", w, out_partial)
    o = o.to(out_dtype or out_partial.dtype)
    if out is not None:
        out.copy_(o)
        o = out
    return o, lse

