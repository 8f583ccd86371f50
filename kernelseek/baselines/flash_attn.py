"""FlashAttention-4 (flash_attn.cute) and FlashAttention-3 (flash_attn_interface) as baselines."""
from __future__ import annotations

import importlib
from pathlib import Path

from . import fa3_vllm
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

    def where(self):
        return str(getattr(self._mod(), "__file__", "") or "")

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
    """FlashAttention-3 itself: vLLM's prebuilt FA3 library (fa3_vllm) where it is staged, else a
    `flash_attn_interface` module that is verifiably FA3's (is_real_fa3). A module of that name that
    is not FA3 (our own kernelseek.attention exposed under it, say) is never taken for it."""
    name = "fa3"
    module = "flash_attn_interface"

    def _source(self) -> tuple[str, str]:
        """("vllm" | "interface" | "", why not)."""
        op, why = fa3_vllm.load()
        if op is not None:
            return "vllm", ""
        ok, why2 = is_real_fa3(self.module)
        return ("interface", "") if ok else ("", f"FA3 unavailable: {why}; {why2}")

    def available(self):
        src, why = self._source()
        return (True, "") if src else (False, why)

    def version(self):
        src, _ = self._source()
        if src == "vllm":
            return fa3_vllm.version()
        m = importlib.import_module(self.module)
        return f"flash_attn_interface {getattr(m, '__version__', 'unknown')} {getattr(m, '__file__', '?')}"

    def where(self):
        src, _ = self._source()
        if src == "vllm":
            return str(fa3_vllm.find())
        return str(getattr(importlib.import_module(self.module), "__file__", "")) if src else ""

    def supports(self, s):
        return common_limits(s, varlen=True, paged=True, window=True, softcap=True, sinks=True,
                             seqused=True, leftpad=True, fp8=True, dv_differs=True)

    def bind(self, s, inp):
        if self._source()[0] == "vllm":
            return Bound(*fa3_vllm.bind(s, inp))
        return _bind_interface(importlib.import_module(self.module), s, inp)


def is_real_fa3(module: str) -> tuple[bool, str]:
    """Whether `module` is importable AND is FlashAttention-3's: installed by a flash-attn-3
    distribution (importlib.metadata) that lists it with its hash and whose compiled extension it
    loaded, not from this checkout, with FA3's entry points and its forward op (_fa3_forward)."""
    try:
        m = importlib.import_module(module)
    except Exception as e:
        return False, f"{module} not importable ({type(e).__name__})"
    from importlib.metadata import packages_distributions

    from ..paths import REPO
    f = Path(getattr(m, "__file__", "") or "").resolve()
    if not f.name or REPO in f.parents:
        return False, f"{module} at {f} is not FlashAttention-3 (it comes from this checkout)"
    dists = packages_distributions().get(module.split(".")[0], [])
    fa3 = [d for d in dists if d.lower().replace("_", "-").startswith(("flash-attn-3", "flash-attn3", "flashattn-hopper"))]
    if not fa3:
        return False, f"{module} at {f} is not FlashAttention-3 (installed by {dists or 'no distribution'})"
    if not all(hasattr(m, n) for n in ("flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache")):
        return False, f"{module} at {f} lacks FA3's entry points"
    why = _backed_by(fa3[0], f) or _fa3_forward(fa3[0])
    return (False, f"{module} at {f} is not FlashAttention-3 ({why})") if why else (True, "")


def _fa3_forward(dist_name: str) -> str:
    """"" when FA3's forward entry is there: the op its extension registers (torch.ops.flash_attn_3.fwd), or,
    in older builds, `fwd` on a loaded extension module of the distribution (flash_attn_3_cuda,
    flashattn_hopper_cuda); else why not. Any compiled library that happens to load does not pass."""
    import sys
    from importlib.metadata import distribution
    try:
        import torch
        if torch.ops.flash_attn_3.fwd is not None:
            return ""
    except Exception:
        pass
    libs = {Path(e.locate()).resolve() for e in (distribution(dist_name).files or []) if str(e).endswith(".so")}
    for m in list(sys.modules.values()):
        f = str(getattr(m, "__file__", "") or "")
        if f.endswith(".so") and Path(f).resolve() in libs and callable(getattr(m, "fwd", None)):
            return ""
    return f"no FA3 forward op: neither torch.ops.flash_attn_3.fwd nor `fwd` on an extension of {dist_name}"


def _backed_by(dist_name: str, module_file) -> str:
    """"" when distribution `dist_name` installed `module_file` (listed in its RECORD with the file's own
    sha256) and ships a compiled extension that is loaded now (FA3's kernels: a .so of that distribution);
    else why not. A module dropped on sys.path beside a hand-written dist-info fails one of these."""
    import base64
    import hashlib
    import sys
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        files = distribution(dist_name).files or []
    except PackageNotFoundError:
        return f"distribution {dist_name} not found"
    own = [e for e in files if Path(e.locate()).resolve() == module_file]
    if not own or not own[0].hash or own[0].hash.mode != "sha256":
        return f"{dist_name}'s RECORD does not list it with a sha256"
    digest = base64.urlsafe_b64encode(hashlib.sha256(module_file.read_bytes()).digest()).rstrip(b"=").decode()
    if digest != own[0].hash.value:
        return f"its content differs from {dist_name}'s RECORD"
    libs = {Path(e.locate()).resolve() for e in files if str(e).endswith(".so")}
    loaded = {Path(getattr(m, "__file__", "") or "").resolve() for m in list(sys.modules.values())
              if str(getattr(m, "__file__", "") or "").endswith(".so")}
    try:                                              # or mapped another way (torch.ops.load_library)
        with open("/proc/self/maps") as f:
            loaded |= {Path(ln.split()[-1]).resolve() for ln in f if ln.rstrip().endswith(".so")}
    except OSError:
        pass
    if not libs & loaded:
        return f"no compiled extension of {dist_name} is loaded (FA3's kernels live in one)"
    return ""


def _bind_interface(m, s, inp):
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
