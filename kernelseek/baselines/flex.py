"""FlexAttention (torch.compile per shape) as a baseline: windows and softcap through mask and score mods."""
from __future__ import annotations

from .base import Baseline, Bound, common_limits


class Flex(Baseline):
    name = "flex"
    _compiled = None

    def available(self):
        try:
            import torch
            from torch.nn.attention import flex_attention  # noqa: F401  (availability check)
        except Exception as e:
            return False, f"FlexAttention not importable: {e}"
        if not torch.cuda.is_available():
            return False, "no CUDA device"
        return True, ""

    def version(self):
        import torch
        return f"torch {torch.__version__} flex_attention (compiled)"

    def where(self):
        from .torch_native import torch_where
        return torch_where().split(";")[0]

    def supports(self, s):
        return common_limits(s, window=True, softcap=True)

    def bind(self, s, inp):
        import torch
        import torch._dynamo
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), 4096))
        torch._dynamo.config.suppress_errors = False     # a failed compile raises, never falls back
        if Flex._compiled is None:
            Flex._compiled = torch.compile(flex_attention, dynamic=False, fullgraph=True)
        sq, sk = s.seqlen_q, s.seqlen_k
        off = sk - sq
        left, right = s.effective_window

        def mask_mod(b, h, qi, kj):
            ok = kj >= 0
            if right >= 0:
                ok = ok & (kj <= qi + off + right)
            if left >= 0:
                ok = ok & (kj >= qi + off - left)
            return ok
        block_mask = None
        if (left, right) != (-1, -1):
            block_mask = create_block_mask(mask_mod, None, None, sq, sk, device=inp.q.device)
        cap = s.softcap
        score_mod = (lambda score, b, h, qi, kj: cap * torch.tanh(score / cap)) if cap > 0 else None
        q, k, v = (t.transpose(1, 2) for t in (inp.q, inp.k, inp.v))
        gqa = s.heads_q != s.heads_kv
        fn = Flex._compiled
        return Bound(lambda: fn(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=s.softmax_scale,
                                enable_gqa=gqa),
                     lambda o: (o.transpose(1, 2), None))
