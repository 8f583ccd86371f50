"""FlashInfer (flashinfer-python) as a baseline: what serving engines run for paged decode and prefill.

Which FlashInfer call computes which scenario (all in FlashInfer's "NHD" layout, the kernel's own):
- paged decode (one query per sequence): BatchDecodeWithPagedKVCacheWrapper, tensor cores when the
  GQA group is >= 4 (FlashInfer's advice for large groups; it then runs its FA2 prefill kernels);
- paged prefill (chunked prefill: several queries over a paged cache): BatchPrefillWithPagedKVCacheWrapper;
- dense and varlen prefill: BatchPrefillWithRaggedKVCacheWrapper over the packed sequences
  (dense q [B,Sq,Hq,D] is a view [B*Sq,Hq,D] with uniform indptr); backend "auto", which on Hopper
  picks FlashInfer's FA3 kernels for head dims 64/128/256.
Semantics checked against ours: causal is bottom-right aligned in both; a window (left, 0) is FlashInfer's
causal with window_left (a window with keys right of the diagonal is declined); softcap is logits_soft_cap
over scaled logits; sm_scale is ours. A page table becomes CSR (indptr over pages, the pages of each
sequence in order, last_page_len); a sequence of zero keys has no CSR form there, so it is declined.
plan() (host scheduling, once per batch shape in a serving engine, shared by all layers) runs in
bind(), outside the timed call, like FA3's cu_seqlens; the timed call is run(). The check compares O
only (FlashInfer's LSE is base 2). fp8, sinks, left padding and head dims 96/192 are declined here.

Where it is loaded from: an importable `flashinfer` (tools/flashinfer.sh stages the wheel on the GPU
machine into /root/flashinfer/site and prints the PYTHONPATH). Its version, file path and the JIT/AOT
module folder go into the baseline's version string and `where()`, so a run's meta says which ran.
Each new (dtype, head dim, window, softcap) combination is a JIT compile on first use (nvcc, minutes of
CPU); tools/flashinfer.sh stages prebuilt modules when they were carried; KSEEK_FLASHINFER_JIT=0 declines
a scenario whose module is not built (module_name, module_state).
"""
from __future__ import annotations

import importlib
import os

from .base import Baseline, Bound, common_limits

WORKSPACE_BYTES = 256 * 1024 * 1024     # FlashInfer's float workspace (split-KV partials); 128 MB advised
PREFILL_HEAD_DIMS = (64, 128, 256)      # FlashInfer's Hopper (FA3) prefill kernels; others fall to FA2
DECODE_HEAD_DIMS = (64, 128, 256)
TENSOR_CORE_GROUP = 4                    # decode with tensor cores from this GQA group size up
_WS: dict = {}                           # device -> the shared float workspace
JIT_ENV = "KSEEK_FLASHINFER_JIT"         # "0": decline scenarios whose module is neither prebuilt nor cached


def _import():
    return importlib.import_module("flashinfer")


def _workspace(device):
    import torch
    key = str(device)
    if key not in _WS:
        _WS[key] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _WS[key]


def csr_pages(page_table, ends: list[int], page_size: int):
    """FlashInfer's paged-KV CSR from our page table: (indptr [B+1], indices [sum pages], last_page_len [B]),
    int32 on the table's device. Sequence b holds keys 0..ends[b]-1, i.e. ceil(ends[b]/page_size) pages,
    the last one filled to ends[b] - (pages-1)*page_size (1..page_size). ends[b] must be > 0."""
    import torch
    n = [-(-e // page_size) for e in ends]
    dev = page_table.device
    indptr = torch.tensor([0] + [sum(n[:i + 1]) for i in range(len(n))], dtype=torch.int32, device=dev)
    indices = torch.cat([page_table[b, :k] for b, k in enumerate(n)]).to(torch.int32).contiguous()
    last = torch.tensor([e - (k - 1) * page_size for e, k in zip(ends, n)], dtype=torch.int32, device=dev)
    return indptr, indices, last


def decline(s) -> str:
    """Why FlashInfer does not compute `s` (beyond common_limits), or ""."""
    if s.dtype not in ("bf16", "fp16"):
        return "fp8 is not wired up for FlashInfer here (per-head descales differ)"
    ends = [e for _, e in s.k_ranges()]
    if min(ends) <= 0:
        return "a sequence with zero keys has no paged-CSR/ragged form in FlashInfer"
    if min(s.q_lens()) <= 0:
        return "a sequence with zero queries"
    left, right = s.effective_window
    if right > 0 or (right < 0 and left >= 0):
        return "a window with keys right of the diagonal (FlashInfer: causal, with a left window or none)"
    if s.heads_q % s.heads_kv:
        return "heads_q not a multiple of heads_kv"
    dims = DECODE_HEAD_DIMS if _is_decode(s) else PREFILL_HEAD_DIMS
    if s.head_dim not in dims:
        return f"head_dim {s.head_dim} (FlashInfer's Hopper kernels here: {dims})"
    if not s.paged and not s.varlen and s.cache_seqlens is not None:
        return "cache_seqlens on a contiguous cache (the ragged layout needs packed keys)"
    if s.varlen and s.cache_seqlens is not None:
        return "cache_seqlens with varlen"
    return ""


def _is_decode(s) -> bool:
    return s.paged and max(s.q_lens()) == 1


class FlashInfer(Baseline):
    name = "flashinfer"

    def available(self):
        try:
            m = _import()
        except Exception as e:
            return False, (f"flashinfer not importable ({type(e).__name__}: {str(e)[:100]}); "
                           "stage it with tools/flashinfer.sh")
        import torch
        if not torch.cuda.is_available():
            return False, "no CUDA device"
        return (True, "") if hasattr(m, "BatchPrefillWithRaggedKVCacheWrapper") else (
            False, f"flashinfer at {getattr(m, '__file__', '?')} lacks BatchPrefillWithRaggedKVCacheWrapper")

    def version(self):
        m = _import()
        return f"flashinfer-python {getattr(m, '__version__', 'unknown')} {self.where()}"

    def where(self) -> str:
        m = _import()
        where = os.path.dirname(getattr(m, "__file__", "") or "?")
        try:
            from flashinfer.jit import env
            where += f" (JIT cache {env.FLASHINFER_JIT_DIR})"
        except Exception:
            pass
        return where

    def supports(self, s):
        ok, why = common_limits(s, varlen=True, paged=True, window=True, softcap=True, seqused=True)
        if not ok:
            return ok, why
        why = decline(s)
        return (False, why) if why else (True, "")

    def supports_now(self, s) -> tuple[bool, str]:
        """supports(), and with KSEEK_FLASHINFER_JIT=0 only where the module is already built (prebuilt
        in flashinfer/data/aot or in the JIT cache): a grid then costs no compile time on the GPU."""
        ok, why = self.supports(s)
        if not ok or os.environ.get(JIT_ENV, "1") != "0":
            return ok, why
        name, ready = module_state(s)
        return (True, "") if ready else (False, f"module {name} is not built and {JIT_ENV}=0")

    def bind(self, s, inp):
        if _is_decode(s):
            return _bind_decode(_import(), s, inp)
        if s.paged:
            return _bind_paged_prefill(_import(), s, inp)
        return _bind_ragged(_import(), s, inp)


def module_name(s, sm90: bool = True) -> str:
    """The FlashInfer JIT module a scenario runs on (its own naming, from flashinfer.jit)."""
    import torch
    from flashinfer.jit.attention.modules import get_batch_decode_uri, get_batch_prefill_uri
    dt, d = _torch_dtype(s), s.head_dim
    left, _ = s.effective_window
    swa, cap = left >= 0, s.softcap > 0
    if _is_decode(s) and s.heads_q // s.heads_kv < TENSOR_CORE_GROUP:
        return get_batch_decode_uri(dt, dt, dt, torch.int32, d, d, 0, swa, cap)
    backend = "fa2" if _is_decode(s) or not (sm90 and d in PREFILL_HEAD_DIMS and s.dv == d) else "fa3"
    return get_batch_prefill_uri(backend, dt, dt, dt, torch.int32, d, s.dv, 0, swa, cap, False)


def module_state(s) -> tuple[str, bool]:
    """(module name, whether it is built: prebuilt (AOT) or already in the JIT cache)."""
    from flashinfer.jit import env
    name = module_name(s)
    jit = env.FLASHINFER_JIT_DIR / name / f"{name}.so"
    return name, env.get_aot_path(name).exists() or jit.exists()


def _torch_dtype(s):
    import torch
    return torch.float16 if s.dtype == "fp16" else torch.bfloat16


def _causal(s) -> bool:
    """FlashInfer's causal flag: our effective window ends on the diagonal (causal, or a window (L, 0))."""
    return s.effective_window[1] == 0


def _common(s) -> dict:
    left, _ = s.effective_window
    return dict(window_left=left if left >= 0 else -1, logits_soft_cap=float(s.softcap) or None,
                sm_scale=s.softmax_scale, q_data_type=_torch_dtype(s), kv_data_type=_torch_dtype(s))


def _bind_decode(fi, s, inp) -> Bound:
    """q [B,1,Hq,D] -> FlashInfer's [B,Hq,D]; out [B,Hq,D] -> [B,1,Hq,D]."""
    ends = [e for _, e in s.k_ranges()]
    indptr, indices, last = csr_pages(inp.page_table, ends, s.page_size)
    tc = s.heads_q // s.heads_kv >= TENSOR_CORE_GROUP
    w = fi.BatchDecodeWithPagedKVCacheWrapper(_workspace(inp.q.device), "NHD", use_tensor_cores=tc)
    w.plan(indptr, indices, last, s.heads_q, s.heads_kv, s.head_dim, s.page_size, **_common(s))
    q = inp.q.view(s.n_batch, s.heads_q, s.head_dim)
    kv = (inp.k, inp.v)
    return Bound(lambda: w.run(q, kv), lambda o: (o.view(s.n_batch, 1, s.heads_q, s.dv), None))


def _bind_paged_prefill(fi, s, inp) -> Bound:
    """Several queries per sequence over a paged cache (chunked prefill), causal bottom-right."""
    import torch
    ends = [e for _, e in s.k_ranges()]
    indptr, indices, last = csr_pages(inp.page_table, ends, s.page_size)
    qo = torch.arange(0, (s.n_batch + 1) * s.seqlen_q, s.seqlen_q, dtype=torch.int32, device=inp.q.device)
    w = fi.BatchPrefillWithPagedKVCacheWrapper(_workspace(inp.q.device), "NHD")
    w.plan(qo, indptr, indices, last, s.heads_q, s.heads_kv, s.head_dim, s.page_size,
           head_dim_vo=s.dv, causal=_causal(s), **_common(s))
    q = inp.q.view(s.n_batch * s.seqlen_q, s.heads_q, s.head_dim)
    kv = (inp.k, inp.v)
    return Bound(lambda: w.run(q, kv), lambda o: (o.view(s.n_batch, s.seqlen_q, s.heads_q, s.dv), None))


def _bind_ragged(fi, s, inp) -> Bound:
    """Dense or varlen prefill on packed sequences: q [total_q,Hq,D], k/v [total_k,Hkv,D]."""
    import torch
    dev = inp.q.device
    if s.varlen:
        qo, kvp, q, k, v = inp.cu_seqlens_q, inp.cu_seqlens_k, inp.q, inp.k, inp.v
    else:
        b = s.n_batch
        qo = torch.arange(0, (b + 1) * s.seqlen_q, s.seqlen_q, dtype=torch.int32, device=dev)
        kvp = torch.arange(0, (b + 1) * s.seqlen_k, s.seqlen_k, dtype=torch.int32, device=dev)
        q = inp.q.view(b * s.seqlen_q, s.heads_q, s.head_dim)
        k = inp.k.view(b * s.seqlen_k, s.heads_kv, s.head_dim)
        v = inp.v.view(b * s.seqlen_k, s.heads_kv, s.dv)
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(_workspace(dev), "NHD")
    w.plan(qo, kvp, s.heads_q, s.heads_kv, s.head_dim, head_dim_vo=s.dv, causal=_causal(s), **_common(s))

    def result(o):
        return (o if s.varlen else o.view(s.n_batch, s.seqlen_q, s.heads_q, s.dv)), None
    return Bound(lambda: w.run(q, k, v), result)
