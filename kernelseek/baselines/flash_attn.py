"""FlashAttention-4 (flash_attn.cute) and FlashAttention-3 (flash_attn_interface) as baselines."""
from __future__ import annotations

import importlib

from .base import Baseline, Bound, common_limits


class FA4(Baseline):
    name = "fa4"
    module = "flash_attn.cute"

    def _mod(self):
        return importlib.import_module(self.module)

    def available(self):
        try:
            self._mod()
        except Exception as e:
            return False, f"{self.module} not importable ({type(e).__name__}: {str(e)[:80]})"
        import torch
        return (True, "") if torch.cuda.is_available() else (False, "no CUDA device")

    def version(self):
        try:
            from importlib.metadata import version
            return f"flash-attn-4 {version('flash-attn-4')}"
        except Exception:
            return getattr(self._mod(), "__version__", "unknown")

    def supports(self, s):
        return common_limits(s, varlen=True, paged=True, window=True, softcap=True, sinks=True,
                              seqused=True, dv_differs=True)

    def bind(self, s, inp):
        m = self._mod()
        left, right = s.effective_window
        win = (None if left < 0 else left, None if right < 0 else right)
        kw: dict = dict(softmax_scale=s.softmax_scale, causal=s.causal and s.window == (-1, -1),
                        window_size=win if s.window != (-1, -1) else (None, None),
                        softcap=s.softcap, return_lse=True)
        if inp.sinks is not None:
            kw["learnable_sink"] = inp.sinks
        if s.varlen or s.paged or inp.seqused_k is not None:
            fn = m.flash_attn_varlen_func
            if s.varlen:
                kw.update(cu_seqlens_q=inp.cu_seqlens_q, cu_seqlens_k=inp.cu_seqlens_k,
                          max_seqlen_q=max(s.seqlens_q), max_seqlen_k=max(s.seqlens_k))
            if s.paged:
                kw["page_table"] = inp.page_table
                kw["seqused_k"] = inp.seqused_k if inp.seqused_k is not None else _full_seqused(s, inp)
            elif inp.seqused_k is not None:
                kw["seqused_k"] = inp.seqused_k
        else:
            fn = m.flash_attn_func
        return Bound(lambda: fn(inp.q, inp.k, inp.v, **kw), _out_lse)


def _full_seqused(s, inp):
    import torch
    return torch.full((s.n_batch,), s.seqlen_k, dtype=torch.int32, device=inp.q.device)


def _out_lse(r):
    if isinstance(r, tuple):
        return r[0], (r[1] if len(r) > 1 else None)
    return r, None


class FA3(Baseline):
    """flash_attn_interface (FlashAttention-3). Not on the H200 image: reported unavailable there."""
    name = "fa3"
    module = "flash_attn_interface"

    def available(self):
        try:
            importlib.import_module(self.module)
        except Exception:
            return False, "FA3 unavailable (flash_attn_interface not importable)"
        return True, ""

    def version(self):
        m = importlib.import_module(self.module)
        return f"flash_attn_interface {getattr(m, '__version__', 'unknown')}"

    def supports(self, s):
        return common_limits(s, varlen=True, paged=True, window=True, softcap=True, sinks=True,
                              seqused=True, leftpad=True, fp8=True, dv_differs=True)

    def bind(self, s, inp):
        m = importlib.import_module(self.module)
        left, right = s.effective_window
        common = dict(softmax_scale=s.softmax_scale, causal=s.causal, window_size=(left, right),
                      softcap=s.softcap)
        if inp.sinks is not None:
            common["s_aux"] = inp.sinks
        if s.dtype == "fp8":
            common.update(q_descale=inp.q_descale, k_descale=inp.k_descale, v_descale=inp.v_descale)
        if s.paged or inp.seqused_k is not None or inp.leftpad_k is not None:
            kw = dict(common, cache_seqlens=inp.seqused_k if inp.seqused_k is not None else _full_seqused(s, inp),
                      page_table=inp.page_table, cache_leftpad=inp.leftpad_k, num_splits=s.num_splits,
                      return_softmax_lse=True)
            return Bound(lambda: m.flash_attn_with_kvcache(inp.q, inp.k, inp.v, **kw), _out_lse)
        if s.varlen:
            kw = dict(common, max_seqlen_q=max(s.seqlens_q), max_seqlen_k=max(s.seqlens_k), return_attn_probs=True)
            return Bound(lambda: m.flash_attn_varlen_func(inp.q, inp.k, inp.v, inp.cu_seqlens_q, inp.cu_seqlens_k, **kw),
                         _out_lse)
        kw = dict(common, return_attn_probs=True)
        return Bound(lambda: m.flash_attn_func(inp.q, inp.k, inp.v, **kw), _out_lse)
