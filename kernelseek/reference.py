"""Reference attention for every Scenario feature, in two precisions; semantics of kernels/kseek.h.

attention_ref(s, inp, "fp32"): the accurate answer. Operands are upcast (fp8 dequantized with its
    descales) and the whole computation runs in float64, then O and LSE are returned as float32.
    float64 is at least as accurate as fp32 with TF32 off, is never touched by the TF32 switches
    (whose legacy and new torch APIs refuse to be mixed), and so changes no global state. On an
    H100/H200 a float64 GEMM runs at about the fp32 non-tensor-core rate.
attention_ref(s, inp, "lowp"): FlashAttention-3's low-precision test reference, which measures
    the error a fair kernel may have: q*scale and QK^T in the input dtype (bf16/fp16 matmul,
    fp32 accumulate inside, scores rounded to the input dtype as torch returns them), softmax in
    fp32, normalized P cast to the input dtype before P@V, O in the output dtype. fp8: q/k/v are
    dequantized (fp8 value x descale) and held as bf16, and P is rounded through float8_e4m3fn.

Semantics: keys leftpad_b..end_b-1 (paged through the page table), bottom-right aligned masks
with the effective Sk_b = end_b - leftpad_b, causal = window_right 0, attention_chunk C: also
floor(p / C) == floor(j' / C) for the query at key position p (ABI 3), softcap tanh after the
scale, sinks in the softmax denominator only, lse = natural log including sinks, rows with no
visible key give O = 0 and lse = -inf (sinks or not).

Memory: one sequence at a time, in chunks of query rows (and KV heads when one row is too big) so
that a score chunk holds at most SCORE_CHUNK_ELEMS entries; for each row chunk only the key span
its mask can see is multiplied (causal and window halve the work). GQA/MQA reshape the query heads
of one KV head into extra rows, so K/V are never repeated.
"""
from __future__ import annotations

import torch

from .inputs import Inputs, seq_offsets, gather_kv
from .scenarios import Scenario

SCORE_CHUNK_ELEMS = 1 << 26  # score entries per chunk: 512 MB in float64, 256 MB in float32
PRECISIONS = ("fp32", "lowp")


# ---- masks ---------------------------------------------------------------------------------------
def _visible(rows: torch.Tensor, keys: torch.Tensor, sq: int, sk: int, wl: int, wr: int,
             chunk: int = 0) -> torch.Tensor:
    """Bool [len(rows), len(keys)]: query row i sees key j' (kseek.h, bottom-right aligned)."""
    diag = (rows + (sk - sq))[:, None]  # key position of each query row
    j = keys[None, :]
    vis = torch.ones(rows.numel(), keys.numel(), dtype=torch.bool, device=rows.device)
    if wl >= 0:
        vis &= j >= diag - wl
    if wr >= 0:
        vis &= j <= diag + wr
    if chunk > 0:  # the query's own chunk only (floor division: p < 0 is in a chunk before every key)
        vis &= torch.div(diag, chunk, rounding_mode="floor") == torch.div(j, chunk, rounding_mode="floor")
    return vis


def mask_for(sq: int, sk: int, window_left: int = -1, window_right: int = -1,
             causal: bool = False, device="cpu", chunk: int = 0) -> torch.Tensor:
    """Visible keys, bool [sq, sk]; causal means window_right = 0 (window_left as given)."""
    wr = 0 if causal else window_right
    return _visible(torch.arange(sq, device=device), torch.arange(sk, device=device), sq, sk, window_left, wr,
                    chunk)


def _key_span(r0: int, r1: int, sq: int, sk: int, wl: int, wr: int, chunk: int = 0) -> tuple[int, int]:
    """[lo, hi): the keys that any of the query rows r0..r1-1 may see."""
    lo = 0 if wl < 0 else max(0, r0 + sk - sq - wl)
    hi = sk if wr < 0 else min(sk, r1 - 1 + sk - sq + wr + 1)
    if chunk > 0:  # from the first row's chunk to the end of the last row's
        lo = max(lo, (r0 + sk - sq) // chunk * chunk)
        hi = min(hi, ((r1 - 1 + sk - sq) // chunk + 1) * chunk)
    return lo, hi


# ---- operands ------------------------------------------------------------------------------------
def _dequant(x: torch.Tensor, descale: torch.Tensor | None, heads_per_scale: int, dtype: torch.dtype) -> torch.Tensor:
    """x [S, H, D] (fp8) times descale [Hkv] per head group -> dtype (computed in float32 or wider)."""
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    y = x.to(wide)
    if descale is not None:
        y = y * descale.to(wide).repeat_interleave(heads_per_scale)[None, :, None]
    return y.to(dtype)


def _operands(s: Scenario, inp: Inputs, b: int, q, k, v, precision: str):
    """One sequence's q [Sq,Hq,D], k [Sk,Hkv,D], v [Sk,Hkv,Dv] -> the compute dtype, head-major:
    q [Hkv, G, Sq, D], k [Hkv, Sk, D], v [Hkv, Sk, Dv]."""
    hkv, g = s.heads_kv, s.heads_q // s.heads_kv
    if precision == "fp32":
        dt = torch.float64
    else:
        dt = torch.bfloat16 if s.dtype == "fp8" else q.dtype
    if s.dtype == "fp8":
        pick = lambda t: None if t is None else t[b]  # [Hkv]
        q = _dequant(q, pick(inp.q_descale), g, dt)
        k = _dequant(k, pick(inp.k_descale), 1, dt)
        v = _dequant(v, pick(inp.v_descale), 1, dt)
    else:
        q, k, v = q.to(dt), k.to(dt), v.to(dt)
    qh = q.view(q.shape[0], hkv, g, q.shape[2]).permute(1, 2, 0, 3)
    return qh, k.permute(1, 0, 2), v.permute(1, 0, 2)


# ---- one chunk -------------------------------------------------------------------------------------
def _chunk(s: Scenario, q, k, v, vis, sink, lowp: bool):
    """q [h,G,r,D], k [h,n,D], v [h,n,Dv], vis bool [r,n], sink [h,G] or None
    -> o [h,G,r,Dv] (compute dtype), lse float32 [h,G,r]."""
    h, g, r, d = q.shape
    n = k.shape[1]
    scale, cap = s.softmax_scale, s.softcap
    acc = torch.float32 if lowp else torch.float64
    if lowp:
        q = q * scale  # FlashAttention-3's reference scales q in the input dtype
    sc = torch.matmul(q.reshape(h, g * r, d), k.transpose(1, 2)).view(h, g, r, n).to(acc)
    if not lowp:
        sc.mul_(scale)
    if cap > 0:
        sc = torch.tanh(sc.div_(cap)).mul_(cap)
    sc.masked_fill_(~vis, float("-inf"))
    m = sc.amax(dim=-1)  # [h,G,r]
    if sink is not None:
        sink = sink.to(acc)[:, :, None]  # [h,G,1]
        m = torch.maximum(m, sink)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # rows with no key and no sink
    p = sc.sub_(m[..., None]).exp_()  # unnormalized probabilities, in place of the scores
    den = p.sum(dim=-1)
    if sink is not None:
        den = den + torch.exp(sink - m)
    has = vis.any(dim=-1)  # [r]: the row sees at least one key
    lse = (m + torch.log(den)).masked_fill_(~has, float("-inf"))
    if lowp:
        pn = p.div_(den[..., None]).masked_fill_(~has[:, None], 0.0)
        if s.dtype == "fp8":
            pn = pn.to(torch.float8_e4m3fn)  # P rounded through fp8, as an fp8 kernel's P@V
        o = torch.matmul(pn.to(v.dtype).view(h, g * r, n), v)
    else:
        o = torch.matmul(p.view(h, g * r, n), v).view(h, g, r, -1).div_(den[..., None])
    o = o.view(h, g, r, -1).masked_fill(~has[:, None], 0.0)
    return o, lse.float()


def _sequence(s: Scenario, qh, kh, vh, sinks, lowp: bool, o_seq, lse_seq) -> None:
    """Attention of one sequence written into o_seq [Sq,Hq,Dv] and lse_seq [Hq,Sq] (views)."""
    hkv, g, sq, _ = qh.shape
    sk = kh.shape[1]
    wl, wr = s.effective_window
    per_row = hkv * g * max(sk, 1)  # score entries of one query row over all heads
    if per_row <= SCORE_CHUNK_ELEMS:
        hc, rc = hkv, max(1, SCORE_CHUNK_ELEMS // per_row)
    else:
        hc, rc = max(1, SCORE_CHUNK_ELEMS // (g * sk)), 1
    dev = qh.device
    for r0 in range(0, sq, rc):
        r1 = min(sq, r0 + rc)
        lo, hi = _key_span(r0, r1, sq, sk, wl, wr, s.attention_chunk)
        if hi <= lo:
            continue  # no row of this chunk sees a key: o stays 0, lse stays -inf
        vis = _visible(torch.arange(r0, r1, device=dev), torch.arange(lo, hi, device=dev), sq, sk, wl, wr,
                       s.attention_chunk)
        for h0 in range(0, hkv, hc):
            h1 = min(hkv, h0 + hc)
            sink = None if sinks is None else sinks[h0:h1]
            o, lse = _chunk(s, qh[h0:h1, :, r0:r1], kh[h0:h1, lo:hi], vh[h0:h1, lo:hi], vis, sink, lowp)
            o_seq[r0:r1, h0 * g:h1 * g] = o.permute(2, 0, 1, 3).reshape(r1 - r0, (h1 - h0) * g, -1)
            lse_seq[h0 * g:h1 * g, r0:r1] = lse.reshape((h1 - h0) * g, r1 - r0)


def attention_ref(s: Scenario, inp: Inputs, precision: str = "fp32") -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) in the kernel's layouts (see inputs.alloc_outputs), on the inputs' device.

    o is float32 for "fp32" and inp.out_dtype for "lowp"; lse is float32 either way.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    lowp = precision == "lowp"
    dev = inp.q.device
    hq, dv = s.heads_q, s.dv
    o_dtype = inp.out_dtype if lowp else torch.float32
    qlens = s.q_lens()
    if s.varlen:
        tq = sum(qlens)
        o = torch.zeros(tq, hq, dv, dtype=o_dtype, device=dev)
        lse = torch.full((hq, tq), float("-inf"), dtype=torch.float32, device=dev)
    else:
        o = torch.zeros(s.n_batch, s.seqlen_q, hq, dv, dtype=o_dtype, device=dev)
        lse = torch.full((s.n_batch, hq, s.seqlen_q), float("-inf"), dtype=torch.float32, device=dev)
    sinks = None if inp.sinks is None else inp.sinks.view(s.heads_kv, hq // s.heads_kv)  # [Hkv, G]
    qoff = seq_offsets(qlens)
    for b, (kb, vb) in enumerate(gather_kv(s, inp)):
        if qlens[b] == 0:
            continue
        if s.varlen:
            qb, o_seq, lse_seq = inp.q[qoff[b]:qoff[b + 1]], o[qoff[b]:qoff[b + 1]], lse[:, qoff[b]:qoff[b + 1]]
        else:
            qb, o_seq, lse_seq = inp.q[b], o[b], lse[b]
        qh, kh, vh = _operands(s, inp, b, qb, kb, vb, precision)
        _sequence(s, qh, kh, vh, sinks, lowp, o_seq, lse_seq)
    return o, lse
