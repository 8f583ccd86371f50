"""PyTorch's own attention as baselines: the SDPA backends (cuDNN, FlashAttention-2), its internal
FlashAttention-2 op (varlen and window), and the labeled dense stand-in for paged rows."""
from __future__ import annotations

from .base import Baseline, Bound, common_limits


class Sdpa(Baseline):
    def __init__(self, backend: str):
        self.backend = backend                     # "cudnn" | "fa2"
        self.name = backend

    def available(self):
        import torch
        if not torch.cuda.is_available():
            return False, "no CUDA device"
        return True, ""

    def version(self):
        import torch
        v = f"torch {torch.__version__}"
        if self.backend == "cudnn":
            v += f", cuDNN {torch.backends.cudnn.version()}"
        return v

    def where(self):
        return torch_where()

    def supports(self, s):
        # GQA goes through enable_gqa; a backend that refuses it reports an error for that row
        return common_limits(s, causal_unequal=False)

    def bind(self, s, inp):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F
        backend = SDPBackend.CUDNN_ATTENTION if self.backend == "cudnn" else SDPBackend.FLASH_ATTENTION
        q, k, v = (t.transpose(1, 2) for t in (inp.q, inp.k, inp.v))   # [B,H,S,D] views
        gqa = s.heads_q != s.heads_kv
        causal = s.causal

        def call():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=s.softmax_scale,
                                                      enable_gqa=gqa)
        return Bound(call, lambda o: (o.transpose(1, 2), None))


class SdpaDenseStandIn(Sdpa):
    """cuDNN on K/V already gathered into dense tensors: skips the paging, so NOT the same work."""
    stand_in = True

    def __init__(self):
        super().__init__("cudnn")
        self.name = "cudnn-dense-standin"

    def supports(self, s):
        if not (s.paged or s.varlen):
            return False, "only a stand-in for paged or varlen scenarios"
        if s.varlen:
            return False, "no dense stand-in for varlen"
        lens = {k1 - k0 for k0, k1 in s.k_ranges()}
        if len(lens) != 1:
            return False, "sequences of different lengths"
        return common_limits(s, paged=True, seqused=True, causal_unequal=False)

    def bind(self, s, inp):
        import torch
        from ..inputs import gather_kv
        kv = gather_kv(s, inp)
        k = torch.stack([a for a, _ in kv]).contiguous()       # [B, Sk, Hkv, D]
        v = torch.stack([b for _, b in kv]).contiguous()
        dense = type(inp)(**{**inp.__dict__, "k": k, "v": v, "page_table": None, "seqused_k": None})
        return super().bind(s, dense)


# ---- PyTorch's internal FlashAttention-2 op ---------------------------------------------------
class FlashOp(Baseline):
    name = "flash_op"

    def _op(self):
        import torch
        return getattr(torch.ops.aten, "_flash_attention_forward", None)

    def available(self):
        import torch
        if not torch.cuda.is_available():
            return False, "no CUDA device"
        if self._op() is None:
            return False, "torch has no aten::_flash_attention_forward"
        return True, ""

    def version(self):
        import torch
        return f"torch {torch.__version__} aten::_flash_attention_forward"

    def _schema_args(self) -> set:
        try:
            return {a.name for a in self._op().default._schema.arguments}
        except Exception:
            return set()

    def supports(self, s):
        args = self._schema_args()
        return common_limits(s, varlen=True, window="window_size_left" in args,
                              seqused=("seqused_k" in args) and s.leftpad is None)

    def bind(self, s, inp):
        op = self._op()
        left, right = s.effective_window
        kw = {"scale": s.softmax_scale}
        if "window_size_left" in self._schema_args():
            kw.update(window_size_left=left, window_size_right=right)
        if inp.seqused_k is not None:
            kw["seqused_k"] = inp.seqused_k
        causal = s.causal                          # FA2 folds causal into window_right = 0
        if s.varlen:
            args = (inp.q, inp.k, inp.v, inp.cu_seqlens_q, inp.cu_seqlens_k, max(s.seqlens_q), max(s.seqlens_k))
        else:
            args = (inp.q, inp.k, inp.v, None, None, s.seqlen_q, s.seqlen_k)
        return Bound(lambda: op(*args, 0.0, causal, False, **kw), lambda r: (r[0], None))


def torch_where() -> str:
    """torch's package folder (and, for cuDNN, the libcudnn torch loaded where it can be found)."""
    import os

    import torch
    out = os.path.dirname(torch.__file__)
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({ln.split()[-1] for ln in f if "libcudnn" in ln and ln.split()[-1].startswith("/")})
        if libs:
            out += "; " + libs[0]
    except OSError:
        pass
    return out
