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
a scenario whose module is not built, naming it. module_plan(s) says, without FlashInfer, which wrapper
the adapter binds and which module (FA3 or FA2 prefill template, or decode kernels; head dims, window,
softcap) FlashInfer's plan() then loads; module_name asks flashinfer.jit for that module's name (FA2's is
the "_kv_stride_equal" build in 0.7.x), module_spec for its build recipe (tools/flashinfer_aot.py).
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

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
    if _is_decode(s) and s.head_dim not in DECODE_HEAD_DIMS:
        return f"head_dim {s.head_dim}: FlashInfer's decode here takes {DECODE_HEAD_DIMS}"
    if not _is_decode(s) and s.head_dim not in PREFILL_HEAD_DIMS:
        return (f"head_dim {s.head_dim}: FlashInfer's Hopper (FA3) prefill takes 64/128/256 only; its FA2 "
                "prefill would JIT it but does not check head_dim (not safe to call here)")
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
        return (True, "") if ready else (False, not_built_reason(module_plan(s), name))

    def bind(self, s, inp):
        bind = {WRAPPERS["decode"]: _bind_decode, WRAPPERS["paged"]: _bind_paged_prefill,
                WRAPPERS["ragged"]: _bind_ragged}[module_plan(s).wrapper]
        return bind(_import(), s, inp)


FA3_PREFILL_DIMS = ((64, 64), (128, 128), (256, 256), (192, 128))   # (qk, vo) FlashInfer's Hopper prefill has
WRAPPERS = {"decode": "BatchDecodeWithPagedKVCacheWrapper", "paged": "BatchPrefillWithPagedKVCacheWrapper",
            "ragged": "BatchPrefillWithRaggedKVCacheWrapper"}


@dataclass(frozen=True)
class ModulePlan:
    """What the adapter asks FlashInfer for on one scenario, decided without FlashInfer (testable on a CPU):
    the wrapper it binds (WRAPPERS; layout always "NHD"), and the compiled module that wrapper then loads:
    kind "decode" (CUDA-core decode kernels) or "prefill" (FlashInfer's FA2 or FA3 prefill templates; the
    decode wrapper with tensor cores runs FA2's), its dtype, head dims and the window/softcap switches."""
    wrapper: str
    kind: str
    backend: str                 # "fa3" | "fa2" | "" (decode kernels)
    dtype: str                   # "bf16" | "fp16"
    head_dim_qk: int
    head_dim_vo: int
    swa: bool
    cap: bool
    tensor_cores: bool = False   # the decode wrapper's use_tensor_cores

    def describe(self) -> str:
        """Short words for a reason string: "FA3 prefill hd256 softcap", "decode hd128"."""
        d = f"hd{self.head_dim_qk}" + (f"/{self.head_dim_vo}" if self.head_dim_vo != self.head_dim_qk else "")
        what = f"{self.backend.upper()} prefill" if self.kind == "prefill" else "decode"
        return " ".join([what, d] + (["window"] if self.swa else []) + (["softcap"] if self.cap else []))


def module_plan(s, sm90: bool = True) -> ModulePlan:
    """The wrapper and module FlashInfer (0.7.x) uses for `s`, as its plan() picks them on Hopper (`sm90`):
    prefill wrappers with backend "auto" take FA3 for the (qk, vo) head dims in FA3_PREFILL_DIMS, else FA2;
    the decode wrapper with tensor cores (GQA group >= TENSOR_CORE_GROUP) takes FA2 for bf16/fp16."""
    left, _ = s.effective_window
    common = dict(dtype="fp16" if s.dtype == "fp16" else "bf16", head_dim_qk=s.head_dim, head_dim_vo=s.dv,
                  swa=left >= 0, cap=s.softcap > 0)
    if _is_decode(s):
        tc = s.heads_q // s.heads_kv >= TENSOR_CORE_GROUP
        return ModulePlan(WRAPPERS["decode"], "prefill" if tc else "decode", "fa2" if tc else "",
                          tensor_cores=tc, **common)
    fa3 = sm90 and (s.head_dim, s.dv) in FA3_PREFILL_DIMS
    return ModulePlan(WRAPPERS["paged" if s.paged else "ragged"], "prefill", "fa3" if fa3 else "fa2", **common)


def not_built_reason(p: ModulePlan, name: str) -> str:
    """Why a scenario FlashInfer computes is declined with compiling off: its module is not staged."""
    return f"{p.describe()} module not built and {JIT_ENV}=0 (not in flashinfer/data/aot or the JIT cache): {name}"


def _uri_args(p: ModulePlan) -> tuple:
    """flashinfer.jit's module arguments for `p`: dtypes q/kv/o, index dtype, head dims, posenc, window, cap."""
    import torch
    dt = torch.float16 if p.dtype == "fp16" else torch.bfloat16
    return (dt, dt, dt, torch.int32, p.head_dim_qk, p.head_dim_vo, 0, p.swa, p.cap)


def module_name(s_or_plan, sm90: bool = True) -> str:
    """The FlashInfer module a scenario (or a ModulePlan) runs on, named by flashinfer.jit itself. FA2's
    prefill module is the one FlashInfer 0.7.x builds for it (its "primary", with a "_kv_stride_equal"
    suffix) where that version has one: not the plain name, which no wrapper loads there."""
    from flashinfer.jit.attention import modules as M
    p = s_or_plan if isinstance(s_or_plan, ModulePlan) else module_plan(s_or_plan, sm90)
    args = _uri_args(p)
    if p.kind == "decode":
        return M.get_batch_decode_uri(*args)
    name = M.get_batch_prefill_uri(p.backend, *args, False)
    if p.backend == "fa2" and hasattr(M, "_gen_batch_prefill_primary_module"):
        name = M._get_batch_prefill_module_uri(name, "fa2", "equal", "full")
    return name


def module_spec(p: ModulePlan):
    """flashinfer.jit's JitSpec for plan `p` (the module that wrapper loads), to build it ahead of time."""
    from flashinfer.jit.attention import modules as M
    args = _uri_args(p)
    if p.kind == "decode":
        return M.gen_batch_decode_module(*args)
    gen = M._gen_batch_prefill_primary_module if p.backend == "fa2" and hasattr(
        M, "_gen_batch_prefill_primary_module") else M.gen_batch_prefill_module
    return gen(p.backend, *args, False)


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
    tc = module_plan(s).tensor_cores
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
