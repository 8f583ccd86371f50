"""FlashAttention-3-compatible Python API over our kernel (the kernel folder kernels/fa3_hopper/ by default).

    from kernelseek.attention import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

Argument names, shapes and semantics follow `flash_attn_interface` (FlashAttention-3):
q/k/v [B, S, H, D] (varlen: [total, H, D] with cu_seqlens), window_size=(left, right) with -1 for
unbounded and causal folding in right = 0 (bottom-right aligned), softcap, s_aux (one sink logit
per query head), fp8 q/k/v with q/k/v_descale [B, Hkv], paged caches through page_table,
cache_seqlens, cache_leftpad, num_splits, and the LSE [B, H, Sq] (varlen [H, total_q]).
What we do not implement (backward, rotary, appending new K/V, qv, attention_chunk, seqused_q,
cache_batch_idx) raises NotImplementedError before anything runs, never a wrong answer.
The kernel is built once per process (KSEEK_ATTENTION_KERNEL overrides the path: a .cu file or a
kernel folder).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .paths import KERNELS

DEFAULT_KERNEL = KERNELS / "fa3_hopper"
_LIBS: dict[str, object] = {}


@dataclass
class _Call:
    """What abi.make_params reads from a Scenario, for one call (no host copies of lengths)."""
    n_batch: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dv: int
    max_q: int
    max_k: int
    causal: bool
    window: tuple
    softcap: float
    softmax_scale: float
    num_splits: int
    name: str = "flash_attn call"

    def q_lens(self):
        return [self.max_q]

    def k_capacity(self):
        return [self.max_k]

    @property
    def effective_window(self):
        left, right = self.window
        if self.causal:
            right = 0 if right < 0 else min(right, 0)
        return left, right


def _unsupported(**named) -> None:
    for what, bad in named.items():
        if bad:
            raise NotImplementedError(f"kernelseek.attention: {what.replace('_', ' ')} is not supported")


def _lib(kernel: str | os.PathLike | None = None):
    from . import abi, build, constraints
    path = str(kernel or os.environ.get("KSEEK_ATTENTION_KERNEL") or DEFAULT_KERNEL)
    if path not in _LIBS:
        res = build.build(path)
        if not res.ok:
            raise RuntimeError(f"{path}: build failed:\n{res.log[-2000:]}")
        chk = constraints.check_binary(res.so_path)
        if not chk.ok:
            raise RuntimeError(f"{path}: refused by the constraint check: {'; '.join(chk.reasons)}")
        _LIBS[path] = abi.load(res.so_path)
    return _LIBS[path]


def _run(call: _Call, q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, leftpad_k=None,
         page_table=None, sinks=None, descales=(None, None, None), return_lse: bool):
    import torch
    from . import abi
    from .inputs import Inputs
    if any(t.requires_grad for t in (q, k, v)) and torch.is_grad_enabled():
        raise NotImplementedError("kernelseek.attention: backward is not supported (forward only)")
    if not q.is_cuda:
        raise ValueError("kernelseek.attention: tensors must be on a CUDA device")
    fp8 = q.dtype == getattr(torch, "float8_e4m3fn", None)
    out_dtype = torch.bfloat16 if fp8 else q.dtype
    i32 = (lambda t: None if t is None else t.to(device=q.device, dtype=torch.int32).contiguous())
    f32 = (lambda t: None if t is None else t.to(device=q.device, dtype=torch.float32).contiguous())
    qd, kd, vd = (f32(d) for d in descales)
    inp = Inputs(q=q, k=k, v=v, cu_seqlens_q=i32(cu_seqlens_q), cu_seqlens_k=i32(cu_seqlens_k),
                 seqused_k=i32(seqused_k), leftpad_k=i32(leftpad_k), page_table=i32(page_table), sinks=f32(sinks),
                 q_descale=qd, k_descale=kd, v_descale=vd, out_dtype=out_dtype)
    o = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=out_dtype, device=q.device)
    if q.dim() == 3:
        lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)      # [H, total_q]
    else:
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32, device=q.device)  # [B, H, Sq]
    try:
        abi.launch(_lib(), call, inp, o, lse)                # on q's device's current stream
    except abi.Unsupported as e:
        raise NotImplementedError(f"kernelseek.attention: the kernel does not support this combination "
                                  f"({call})") from e
    except abi.LaunchError as e:
        raise RuntimeError(f"kernelseek.attention: {e}") from e
    return (o, lse) if return_lse else o


def _scale(q, softmax_scale):
    return softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                    pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, s_aux=None):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D/Dv] -> out [B, Sq, Hq, Dv] (and lse [B, Hq, Sq])."""
    _unsupported(qv=qv is not None, attention_chunk=bool(attention_chunk))
    call = _Call(q.shape[0], q.shape[2], k.shape[2], q.shape[3], v.shape[3], q.shape[1], k.shape[1], bool(causal),
                 tuple(window_size), float(softcap or 0.0), _scale(q, softmax_scale), int(num_splits or 0))
    return _run(call, q, k, v, sinks=s_aux, descales=(q_descale, k_descale, v_descale), return_lse=return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, s_aux=None):
    """q [total_q, Hq, D], k/v [total_k, Hkv, D/Dv], cu_seqlens [B+1] -> out [total_q, Hq, Dv] (lse [Hq, total_q])."""
    _unsupported(qv=qv is not None, attention_chunk=bool(attention_chunk), seqused_q=seqused_q is not None)
    call = _Call(cu_seqlens_q.shape[0] - 1, q.shape[1], k.shape[1], q.shape[2], v.shape[2], int(max_seqlen_q),
                 int(max_seqlen_k), bool(causal), tuple(window_size), float(softcap or 0.0), _scale(q, softmax_scale),
                 int(num_splits or 0))
    return _run(call, q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k,
                sinks=s_aux, descales=(q_descale, k_descale, v_descale), return_lse=return_attn_probs)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False, s_aux=None):
    """q [B, Sq, Hq, D]; caches [B, Sk, Hkv, D] or paged [num_pages, page_size, Hkv, D] with
    page_table [B, pages]; cache_seqlens [B] (int or tensor) -> out [B, Sq, Hq, Dv] (lse)."""
    _unsupported(appending_new_k_v=k is not None or v is not None, qv=qv is not None,
                 rotary_embedding=rotary_cos is not None or rotary_sin is not None,
                 cache_batch_idx=cache_batch_idx is not None, varlen_queries_with_a_kv_cache=cu_seqlens_q is not None,
                 attention_chunk=bool(attention_chunk))
    import torch
    b = q.shape[0]
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((b,), cache_seqlens, dtype=torch.int32, device=q.device)
    if page_table is not None:
        max_k = page_table.shape[1] * k_cache.shape[1]
    else:
        max_k = k_cache.shape[1]
    call = _Call(b, q.shape[2], k_cache.shape[2], q.shape[3], v_cache.shape[3], q.shape[1], max_k, bool(causal),
                 tuple(window_size), float(softcap or 0.0), _scale(q, softmax_scale), int(num_splits or 0))
    if page_table is not None and cache_seqlens is None:
        cache_seqlens = torch.full((b,), max_k, dtype=torch.int32, device=q.device)
    return _run(call, q, k_cache, v_cache, seqused_k=cache_seqlens, leftpad_k=cache_leftpad, page_table=page_table,
                sinks=s_aux, descales=(q_descale, k_descale, v_descale), return_lse=return_softmax_lse)
