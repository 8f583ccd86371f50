"""FlashAttention-3-compatible Python API over our kernel (the kernel folder kernels/fa3_hopper/ by default).

    from kernelseek.attention import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
    from kernelseek.attention import flash_attn_combine, get_scheduler_metadata, flash_attn_qkvpacked_func

Argument names, shapes and semantics follow `flash_attn_interface` (FlashAttention-3, hopper/): q/k/v
[B, S, H, D] (varlen: [total, H, D] with cu_seqlens), window_size=(left, right) with -1 unbounded and
causal = right 0 (bottom-right aligned), attention_chunk, softcap, qv, fp8 q/k/v with q/k/v_descale
[B, Hkv], seqused_q/seqused_k, paged caches (page_table), cache_seqlens, cache_batch_idx,
cache_leftpad, varlen queries over a cache (cu_seqlens_q), new k/v appended to the cache in place
(rotary_cos/sin, interleaved or not, rotary_seqlens), the LSE [B, H, Sq] (varlen [H, total_q]).
Extras: s_aux (one sink logit per query head, as gpt-oss) and out= (the result is written there).
pack_gqa is a speed hint FA3 may ignore, and so do we; num_splits goes to the kernel (the decode
path honours it, the prefill ignores it; the answer is the same). scheduler_metadata is accepted
and not needed. Backward is not implemented: inputs that require grad give an output whose
backward raises NotImplementedError (the forward runs, as FA3's forward tests need with backward off).

How each feature reaches the kernel (exact transforms, no host sync): attention_plan.py. A call repeated
with the same layout and flags skips the plan (attention_fastpath.py; KSEEK_ATTENTION_FASTPATH=0: off). Which
kernel path each call took: attention_core.RECORD / PATH_COUNTS. CPU tensors are answered by the
float64 reference (for tests). The kernel is built once per process (KSEEK_ATTENTION_KERNEL
overrides the path: a .cu file or a kernel folder); docs/attention_dropin.md.
"""
from __future__ import annotations

import functools
import inspect

import torch

from . import attention_cache as cache
from . import attention_core as core
from . import attention_fastpath as fastpath
from . import kv_update
from .attention_core import _Call, _lib  # noqa: F401  (re-exported: tests, tools)
from .attention_plan import Problem, solve

DEFAULT_KERNEL = core.DEFAULT_KERNEL


class _ForwardOnly(torch.autograd.Function):
    """Ties an output computed without autograd to the inputs that require grad; backward refuses."""

    @staticmethod
    def forward(ctx, o, *inputs):
        return o.view_as(o)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("kernelseek.attention: backward is not supported (forward only)")


def _any_requires_grad(args, kwargs) -> bool:
    """Does any tensor argument require grad (named in _forward_only's list or not)?"""
    for x in args:
        if isinstance(x, torch.Tensor) and x.requires_grad:
            return True
    for x in kwargs.values():                        # a loop, not any(genexpr): ~3x cheaper per call
        if isinstance(x, torch.Tensor) and x.requires_grad:
            return True
    return False


def _forward_only(*names):
    """Run the entry point without autograd; where a named input requires grad (and grad mode is on),
    the output (the first of a tuple) carries a backward that raises NotImplementedError. Calls without
    grad go through attention_fastpath (a repeated one-kernel call skips the plan)."""
    def deco(fn):
        sig = inspect.signature(fn)
        params = tuple(sig.parameters)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            res = fastpath.call(fn, params, args, kwargs)   # None of its tensors requires grad (in grad mode)
            if res is not fastpath.PASS:
                return res
            if not (torch.is_grad_enabled() and _any_requires_grad(args, kwargs)):
                return fn(*args, **kwargs)     # the common case, without binding names (~10 us)
            bound = sig.bind_partial(*args, **kwargs).arguments
            grads = [bound[n] for n in names if isinstance(bound.get(n), torch.Tensor) and bound[n].requires_grad]
            if not (grads and torch.is_grad_enabled()):
                return fn(*args, **kwargs)
            with torch.no_grad():
                res = fn(*args, **kwargs)
            if isinstance(res, tuple):
                return (_ForwardOnly.apply(res[0], *grads),) + tuple(res[1:])
            return _ForwardOnly.apply(res, *grads)
        return wrapper
    return deco


def _scale(q, qv, softmax_scale):
    """FA3's default: 1 / sqrt(D + Dv of qv)."""
    if softmax_scale is not None:
        return float(softmax_scale)
    return (q.shape[-1] + (qv.shape[-1] if qv is not None else 0)) ** -0.5


def _window(ws) -> tuple[int, int]:
    return tuple(int(w) for w in ws)


def _finish(o, lse, out, return_lse: bool):
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def _common(causal, window_size, attention_chunk, softcap, s_aux, q_descale, k_descale, v_descale, num_splits):
    """The Problem fields every entry point passes the same way."""
    return dict(causal=bool(causal), window=_window(window_size), chunk=int(attention_chunk or 0),
                softcap=float(softcap or 0.0), sinks=s_aux, descales=(q_descale, k_descale, v_descale),
                num_splits=int(num_splits or 0))


@_forward_only("q", "k", "v", "qv")
def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                    pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, s_aux=None,
                    out=None):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D/Dv] -> out [B, Sq, Hq, Dv] (and lse [B, Hq, Sq])."""
    core.reset_record()
    scale = _scale(q, qv, softmax_scale)
    p = Problem(q=q, k=k, v=v, qv=qv, kv="dense", batch=q.shape[0], max_q=q.shape[1], max_k=k.shape[1], scale=scale,
                **_common(causal, window_size, attention_chunk, softcap, s_aux, q_descale, k_descale, v_descale,
                          num_splits))
    o, lse = solve(p)
    return _finish(o, lse, out, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, softmax_scale=None, causal=False, q_descale=None, k_descale=None,
                              v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                              deterministic=False, num_heads_q=None, sm_margin=0, return_attn_probs=False):
    """qkv [B, S, 3, H, D], or [B, S, Hq + 2 Hkv, D] with num_heads_q -> flash_attn_func."""
    if qkv.dim() == 5:
        q, k, v = qkv.unbind(dim=-3)
    else:
        if num_heads_q is None:
            raise ValueError("flash_attn_qkvpacked_func: a 4-D qkv needs num_heads_q")
        hk = (qkv.shape[2] - num_heads_q) // 2
        q, k, v = qkv.split([num_heads_q, hk, hk], dim=-2)
    return flash_attn_func(q, k, v, softmax_scale, causal, None, q_descale, k_descale, v_descale, window_size,
                           attention_chunk, softcap, return_attn_probs=return_attn_probs)


@_forward_only("q", "k", "v", "qv")
def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, s_aux=None,
                           out=None):
    """q [total_q, Hq, D], k/v [total_k, Hkv, D/Dv], cu_seqlens [B+1] -> out [total_q, Hq, Dv] (lse [Hq, total_q])."""
    core.reset_record()
    scale = _scale(q, qv, softmax_scale)
    p = Problem(q=q, k=k, v=v, qv=qv, kv="packed", batch=cu_seqlens_q.shape[0] - 1, max_q=int(max_seqlen_q),
                max_k=int(max_seqlen_k), scale=scale, cu_q=cu_seqlens_q, seqused_q=seqused_q, cu_k=cu_seqlens_k,
                seqused_k=seqused_k, **_common(causal, window_size, attention_chunk, softcap, s_aux, q_descale,
                                               k_descale, v_descale, num_splits))
    o, lse = solve(p)
    return _finish(o, lse, out, return_attn_probs)


def _update_cache(q, k_cache, v_cache, k, v, *, seqlens, page_table, cache_batch_idx, cu_seqlens_q,
                  cu_seqlens_k_new, rotary_cos, rotary_sin, rotary_seqlens, rotary_interleaved, per_row):
    """Append k/v (rotary) in place and rotate q: -> (q, key ends [B]). CUDA tensors the kv_update kernel
    takes go there (one launch); the rest (CPU tensors among them) take the torch ops of attention_cache."""
    if rotary_cos is not None and k is None:
        raise ValueError("kernelseek.attention: rotary_cos/sin need new k/v to append (as FlashAttention-3)")
    if (k is None) != (v is None):
        raise ValueError("kernelseek.attention: give both k and v to append, or neither")
    if k is None:
        return q, seqlens
    ro = seqlens if rotary_seqlens is None else rotary_seqlens
    fused = kv_update.update(q, k_cache, v_cache, k, v, seqlens=seqlens, page_table=page_table,
                             batch_idx=cache_batch_idx, cu_q=cu_seqlens_q, cu_new=cu_seqlens_k_new, cos=rotary_cos,
                             sin=rotary_sin, ro=ro, interleaved=rotary_interleaved, per_row=per_row)
    if fused is not None:            # one launch (kernels/kv_update.cu), bit for bit the torch ops below
        core.step("kv-update")
        return fused
    if rotary_cos is not None:
        core.step("rotary")
        q = cache.rotate_q(q, rotary_cos, rotary_sin, ro, cu_seqlens_q, per_row, rotary_interleaved)
    core.step("append-kv")
    new = cache.append_kv(k_cache, v_cache, k, v, cache_seqlens=seqlens, page_table=page_table,
                          batch_idx=cache_batch_idx, cu_new=cu_seqlens_k_new, cos=rotary_cos, sin=rotary_sin,
                          ro=ro, interleaved=rotary_interleaved)
    return q, (seqlens.long() + new).to(torch.int32)


@_forward_only("q", "k_cache", "v_cache", "k", "v", "qv")
def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False, s_aux=None, out=None):
    """q [B, Sq, Hq, D] (or packed [T, Hq, D] with cu_seqlens_q); caches [Bc, Sk, Hkv, D] or paged
    [num_pages, page_size, Hkv, D] with page_table [B, pages]; cache_seqlens [B] (int or tensor)
    -> out like q with Dv (lse [B, Hq, Sq] or [Hq, T]). New k/v are written into the caches in place."""
    core.reset_record()
    scale = _scale(q, qv, softmax_scale)
    b = q.shape[0] if cu_seqlens_q is None else cu_seqlens_q.shape[0] - 1
    cap = page_table.shape[1] * k_cache.shape[1] if page_table is not None else k_cache.shape[1]
    if cache_seqlens is None:
        cache_seqlens = cap
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((b,), cache_seqlens, dtype=torch.int32, device=q.device)
    window, chunk = _window(window_size), int(attention_chunk or 0)
    per_row = bool(causal) or chunk > 0 or window != (-1, -1)
    q, seqused = _update_cache(q, k_cache, v_cache, k, v, seqlens=cache_seqlens, page_table=page_table,
                               cache_batch_idx=cache_batch_idx, cu_seqlens_q=cu_seqlens_q,
                               cu_seqlens_k_new=cu_seqlens_k_new, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                               rotary_seqlens=rotary_seqlens, rotary_interleaved=rotary_interleaved,
                               per_row=per_row)
    max_q = int(max_seqlen_q) if max_seqlen_q is not None else (q.shape[1] if cu_seqlens_q is None else q.shape[0])
    p = Problem(q=q, k=k_cache, v=v_cache, qv=qv, kv="paged" if page_table is not None else "dense", batch=b, max_q=max_q,
                max_k=cap, scale=scale, cu_q=cu_seqlens_q, seqused_k=seqused, leftpad=cache_leftpad,
                page_table=page_table, batch_idx=cache_batch_idx,
                **_common(causal, window, chunk, softcap, s_aux, q_descale, k_descale, v_descale, num_splits))
    o, lse = solve(p)
    return _finish(o, lse, out, return_softmax_lse)


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    """Merge split results: out_partial [splits, ..., D] fp32, lse_partial [splits, ...] fp32 -> (out, lse)."""
    return cache.combine(out_partial, lse_partial, out, out_dtype)


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv, headdim,
                           cache_seqlens, qkv_dtype=torch.bfloat16, headdim_v=None, cu_seqlens_q=None,
                           cu_seqlens_k_new=None, cache_leftpad=None, page_size=None, max_seqlen_k_new=0,
                           causal=False, window_size=(-1, -1), attention_chunk=0, has_softcap=False,
                           num_splits=0, pack_gqa=None, sm_margin=0):
    """FA3 precomputes a tile schedule here; our kernels need none. Returns an empty int32 tensor on
    cache_seqlens' device, which flash_attn_with_kvcache accepts (and ignores) as scheduler_metadata."""
    return torch.empty(0, dtype=torch.int32, device=cache_seqlens.device)
