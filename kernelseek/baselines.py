"""Baselines: adapters that say whether they are available and which scenarios they compute.

Every adapter computes the scenario's attention in its own native layout and returns the output
in the kernel's layout for the check (a wrong baseline is not a bar). `bind(s, inp)` returns a
zero-argument callable for timing and a `result(raw)` converter. `choose(names, s)` lists the
adapters to try for a scenario; `--baseline best` times them all and keeps the fastest that passed.

Adapters: cudnn and fa2 (PyTorch SDPA backends), flash_op (PyTorch's internal FlashAttention-2 op,
varlen and window), flex (FlexAttention compiled per shape), fa4 (flash_attn.cute), fa3
(flash_attn_interface, absent on the H200 image), original (another kernel file through the ABI).
Nothing falls back silently: an adapter that cannot run a scenario declines it with a reason.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .scenarios import Scenario

_DT = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass
class Bound:
    call: Callable[[], Any]                       # runs the attention once (what is timed)
    result: Callable[[Any], tuple]                # raw -> (o in kernel layout, lse or None)


class Baseline:
    name = "?"
    stand_in = False                               # computes a dense stand-in, not the same work

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str:
        return ""

    def supports(self, s: Scenario) -> tuple[bool, str]:
        raise NotImplementedError

    def bind(self, s: Scenario, inp) -> Bound:
        raise NotImplementedError


def _common_limits(s: Scenario, *, varlen=False, paged=False, window=False, softcap=False,
                   sinks=False, leftpad=False, seqused=False, fp8=False, dv_differs=False,
                   causal_unequal=True) -> tuple[bool, str]:
    checks = [
        (s.varlen and not varlen, "varlen"), (s.paged and not paged, "paged KV"),
        (s.window != (-1, -1) and not window, "sliding window"), (s.softcap > 0 and not softcap, "softcap"),
        (s.sinks and not sinks, "attention sinks"), (s.leftpad is not None and not leftpad, "left padding"),
        (s.cache_seqlens is not None and not seqused, "cache_seqlens"),
        (s.dtype == "fp8" and not fp8, "fp8"), (s.dv != s.head_dim and not dv_differs, "head_dim_v != head_dim"),
        (s.causal and not causal_unequal and not s.varlen and s.seqlen_q != s.seqlen_k,
         "causal with Sq != Sk (top-left aligned is_causal)"),
    ]
    for bad, what in checks:
        if bad:
            return False, f"no {what} support"
    return True, ""


# ---- PyTorch SDPA (cuDNN, FlashAttention-2 backends) -----------------------------------------
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

    def supports(self, s):
        # GQA goes through enable_gqa; a backend that refuses it reports an error for that row
        return _common_limits(s, causal_unequal=False)

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
        return _common_limits(s, paged=True, seqused=True, causal_unequal=False)

    def bind(self, s, inp):
        import torch
        from .inputs import gather_kv
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
        return _common_limits(s, varlen=True, window="window_size_left" in args,
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


# ---- FlexAttention ----------------------------------------------------------------------------
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

    def supports(self, s):
        return _common_limits(s, window=True, softcap=True)

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


# ---- FlashAttention-4 (CuTe DSL) and FlashAttention-3 -----------------------------------------
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
        return _common_limits(s, varlen=True, paged=True, window=True, softcap=True, sinks=True,
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
        return _common_limits(s, varlen=True, paged=True, window=True, softcap=True, sinks=True,
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


PREBUILT_ENV = "KSEEK_PREBUILT"     # JSON {FILE.cu: built .so} for a worker that cannot run nvcc


def original_paths(spec: str) -> list[str]:
    """The kernel files a baseline spec names (original:FILE.cu or FILE.cu entries)."""
    names = [] if spec in ("best", "all") else spec.split(",")
    return [n.split(":", 1)[1] if n.startswith("original:") else n for n in names
            if n.startswith("original:") or n.endswith(".cu")]


class Original(Baseline):
    """Another kernel file through the ABI (e.g. the campaign's starting kernel)."""

    def __init__(self, path: str):
        self.path = path
        self.name = f"original:{path}"
        self._lib = None

    def _load(self):
        if self._lib is None:
            import json
            import os
            from . import abi, build
            prebuilt = json.loads(os.environ.get(PREBUILT_ENV) or "{}").get(self.path)
            if prebuilt:                     # a confined worker: built by the parent (evaluate.py)
                self._lib = abi.load(prebuilt)
                return self._lib
            res = build.build(self.path)
            if not res.ok:
                raise RuntimeError(f"baseline {self.path} failed to build:\n{res.log[-2000:]}")
            self._lib = abi.load(res.so_path)
        return self._lib

    def version(self):
        from .build import source_hash
        return f"sha256 {source_hash(self.path)[:12]}"

    def supports(self, s):
        return True, ""

    def bind(self, s, inp):
        import torch
        from . import abi
        from .inputs import alloc_outputs
        lib = self._load()
        o, lse = alloc_outputs(s, inp)
        ws_bytes = lib.workspace_bytes(abi.make_params(s, inp, o, lse))
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=inp.q.device)
        params = abi.make_params(s, inp, o, lse, ws)

        def call():
            rc = lib.fwd(params, torch.cuda.current_stream().cuda_stream)
            if rc != 0:
                raise RuntimeError(f"kernel returned status {rc}")
            return o, lse
        return Bound(call, lambda r: r)


REGISTRY: dict[str, Callable[[], Baseline]] = {
    "cudnn": lambda: Sdpa("cudnn"), "fa2": lambda: Sdpa("fa2"), "flash_op": FlashOp,
    "fa4": FA4, "fa3": FA3, "flex": Flex,
}
# `best` tries these; flex only where none of them computes the scenario (it was slower than FA4
# and cuDNN on every bench26 shape they share, ../shared/reference/, and compiling it per shape
# costs seconds). Name it explicitly (`--baseline flex` or `all`) to time it anyway.
BEST_ORDER = ("cudnn", "fa4", "fa3", "fa2", "flash_op")


def get(name: str) -> Baseline:
    if name.startswith("original:"):
        return Original(name.split(":", 1)[1])
    if name.endswith(".cu"):
        return Original(name)
    if name not in REGISTRY:
        raise ValueError(f"unknown baseline '{name}' (known: best, all, {', '.join(REGISTRY)}, original:FILE.cu)")
    return REGISTRY[name]()


def choose(spec: str, s: Scenario, cache: dict | None = None) -> tuple[list[Baseline], list[str]]:
    """Adapters to time for `spec` (best | all | name[,name] | FILE.cu) and why others were skipped."""
    cache = {} if cache is None else cache

    def inst(n):
        if n not in cache:
            cache[n] = get(n)
        return cache[n]
    names = list(BEST_ORDER) if spec == "best" else list(REGISTRY) if spec == "all" else spec.split(",")
    picked, skipped = [], []
    for n in names:
        b = inst(n)
        ok, why = b.available()
        if ok:
            ok, why = b.supports(s)
        (picked.append(b) if ok else skipped.append(f"{b.name}: {why}"))
    if spec == "best" and not picked:
        b = inst("flex")
        ok, why = b.available()
        if ok:
            ok, why = b.supports(s)
        (picked.append(b) if ok else skipped.append(f"flex: {why}"))
    return picked, skipped


def stand_in_for(s: Scenario) -> Baseline | None:
    """A labeled dense stand-in reported beside paged rows (cuDNN on gathered K/V)."""
    b = SdpaDenseStandIn()
    ok, _ = b.available()
    return b if ok and b.supports(s)[0] else None
