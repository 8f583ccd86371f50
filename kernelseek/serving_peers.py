"""The native baselines that compute a serving row's call (serving_grid.Call), bound once, run many times.

    for p in peers(call): p.fn() -> o [T, Hq, Dv]   (p.fn None: p.why says why it does not run here)

- fa3: FlashAttention-3 as vLLM ships it (baselines/fa3_vllm.py): q packed with cu_seqlens_q, the paged
  caches with page_table and seqused_k, is_causal, q_v for the MLA row: the call vLLM's FA3 backend makes.
- flashinfer: BatchPrefillWithPagedKVCacheWrapper over the whole batch (decodes are sequences of one
  query): plan() on the host once per step, outside the timed call, as engines do; run() is timed.
  The MLA row is declined (FlashInfer runs MLA in BatchMLAPagedAttentionWrapper, another cache layout).
- fa4: flash_attn.cute's flash_attn_varlen_func with page_table and seqused_k, where it is staged; no qv.
attention_chunk rows: a baseline without the feature (this FA3 build, FlashInfer, FA4) runs vLLM's method
for chunked-local attention: each (sequence, chunk) its own virtual sequence (virtual_batches), made on
the host before timing. The queries stay where they are (a chunk's queries are contiguous rows of q), so
the output is the same tensor layout. Which way each baseline ran is in its `how`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class Peer:
    name: str
    fn: Callable[[], torch.Tensor] | None    # one run of the step -> o [T, Hq, Dv]
    how: str = ""                             # what ran: library, version, the call's form
    why: str = ""                             # fn None: why it does not run


@dataclass
class Batch:
    """The step's sequences as a baseline receives them: per-sequence lengths (host lists) and the
    device tensors cu_seqlens_q [B+1], seqused_k [B], page_table [B, W] int32."""
    q_lens: list
    k_lens: list
    cu_q: torch.Tensor
    seqused: torch.Tensor
    table: torch.Tensor
    virtual: bool = False


def virtual_batches(q_lens, k_lens, table: torch.Tensor, page_size: int, chunk: int) -> Batch:
    """attention_chunk C as plain causal sequences (vLLM's local virtual batches): sequence b's query at
    position p sees keys [C floor(p/C), p] only, so each chunk c that holds queries becomes one sequence:
    its queries (positions max(Sk - Sq, cC) .. min(Sk, cC + C) - 1, contiguous rows of q) over its keys
    cC .. min(Sk, cC + C) - 1, whose pages are table[b, cC/ps ...] (C a multiple of the page size)."""
    if chunk % page_size:
        raise ValueError(f"virtual_batches: attention_chunk {chunk} is not a multiple of page size {page_size}")
    qv, kv, rows = [], [], []
    for b, (sq, sk) in enumerate(zip(q_lens, k_lens)):
        for c in range((sk - sq) // chunk, (sk - 1) // chunk + 1):
            lo, hi = c * chunk, min(sk, (c + 1) * chunk)
            qv.append(hi - max(sk - sq, lo))
            kv.append(hi - lo)
            rows.append((b, lo // page_size))
    width = chunk // page_size
    dev = table.device
    b_idx = torch.tensor([b for b, _ in rows], device=dev, dtype=torch.long)
    cols = torch.tensor([o for _, o in rows], device=dev, dtype=torch.long)[:, None] + torch.arange(width, device=dev)
    ok = cols < table.shape[1]
    vt = torch.where(ok, table[b_idx[:, None], cols.clamp(max=table.shape[1] - 1)], torch.zeros((), dtype=table.dtype, device=dev))
    cu = torch.tensor([0] + [sum(qv[:i + 1]) for i in range(len(qv))], dtype=torch.int32, device=dev)
    return Batch(qv, kv, cu, torch.tensor(kv, dtype=torch.int32, device=dev), vt.to(torch.int32).contiguous(), True)


def batch_of(call, need_chunk_free: bool) -> Batch:
    """The call's own batch, or its virtual batches when the baseline has no attention_chunk."""
    r, t = call.row, call.t
    if r.attention_chunk and need_chunk_free:
        return virtual_batches(r.q_lens(), r.k_lens(), t["table"], r.page_size, r.attention_chunk)
    return Batch(r.q_lens(), r.k_lens(), t["cu_q"], t["seqlens"], t["table"])


def _form(b: Batch) -> str:
    return "on local virtual batches (vLLM's chunked-local method)" if b.virtual else "one call"


def fa3(call) -> Peer:
    from .baselines import fa3_vllm
    op, why = fa3_vllm.load()
    if op is None:
        return Peer("fa3", None, why=why)
    r, t = call.row, call.t
    names = {a.name for a in op.default._schema.arguments}
    native = "attention_chunk" in names
    b = batch_of(call, need_chunk_free=not native)
    kw = dict(cu_seqlens_q=b.cu_q, max_seqlen_q=max(b.q_lens), seqused_k=b.seqused, page_table=b.table,
              max_seqlen_k=b.table.shape[1] * r.page_size, softmax_scale=r.softmax_scale, is_causal=r.causal,
              window_size_left=-1, window_size_right=0 if r.causal else -1, softcap=0.0, q_v=t.get("qv"),
              num_splits=0, sm_margin=0, cp_world_size=1, cp_rank=0, is_rotary_interleaved=False)
    if native and r.attention_chunk:
        kw["attention_chunk"] = r.attention_chunk
    kw = fa3_vllm.with_unset_optionals(op, {n: x for n, x in kw.items() if n in names})
    q, kc, vc = t["q"], t["kc"], t["vc"]
    return Peer("fa3", lambda: op(q, kc, vc, **kw)[0], how=f"{fa3_vllm.version()}, {_form(b)}")


def _fi_module_ready(r) -> tuple[bool, str]:
    """With KSEEK_FLASHINFER_JIT=0: whether the paged prefill module this row needs is built."""
    from .baselines import flashinfer as FIB
    from .scenarios import Scenario
    if os.environ.get(FIB.JIT_ENV, "1") != "0":
        return True, ""
    s = Scenario(name=r.name, heads_q=r.heads_q, heads_kv=r.heads_kv, head_dim=r.head_dim, head_dim_v=r.head_dim_v,
                 batch=1, seqlen_q=2, seqlen_k=r.page_size, page_size=r.page_size, causal=r.causal, dtype=r.dtype)
    name, ready = FIB.module_state(s)
    return ready, f"module {name} is not built and {FIB.JIT_ENV}=0"


def flashinfer(call) -> Peer:
    from .baselines import flashinfer as FIB
    ok, why = FIB.FlashInfer().available()
    r, t = call.row, call.t
    if ok and r.qv:
        ok, why = False, "MLA (qv) runs in FlashInfer's BatchMLAPagedAttentionWrapper, a different call: not wired here"
    if ok and r.head_dim not in FIB.PREFILL_HEAD_DIMS:
        ok, why = False, f"head_dim {r.head_dim} (FlashInfer's Hopper prefill kernels: {FIB.PREFILL_HEAD_DIMS})"
    if ok:
        ok, why = _fi_module_ready(r)
    if not ok:
        return Peer("flashinfer", None, why=why)
    fi = FIB._import()
    b = batch_of(call, need_chunk_free=True)
    indptr, indices, last = FIB.csr_pages(b.table, b.k_lens, r.page_size)
    w = fi.BatchPrefillWithPagedKVCacheWrapper(FIB._workspace(t["q"].device), "NHD")
    dt = t["q"].dtype
    w.plan(b.cu_q, indptr, indices, last, r.heads_q, r.heads_kv, r.head_dim, r.page_size, head_dim_vo=r.dv,
           causal=r.causal, sm_scale=r.softmax_scale, q_data_type=dt, kv_data_type=dt)
    q, kv = t["q"], (t["kc"], t["vc"])
    return Peer("flashinfer", lambda: w.run(q, kv), how=f"{FIB.FlashInfer().version()}, paged prefill wrapper, {_form(b)}")


def fa4(call) -> Peer:
    from .baselines.flash_attn import FA4
    b4 = FA4()
    ok, why = b4.available()
    r, t = call.row, call.t
    if ok and r.qv:
        ok, why = False, "FA4's interface has no qv"
    if not ok:
        return Peer("fa4", None, why=why)
    m = b4._mod()
    b = batch_of(call, need_chunk_free=True)
    kw = dict(cu_seqlens_q=b.cu_q, max_seqlen_q=max(b.q_lens), seqused_k=b.seqused, page_table=b.table,
              softmax_scale=r.softmax_scale, causal=r.causal)
    q, kc, vc = t["q"], t["kc"], t["vc"]

    def run():
        res = m.flash_attn_varlen_func(q, kc, vc, **kw)
        return res[0] if isinstance(res, tuple) else res
    return Peer("fa4", run, how=f"{b4.version()}, paged varlen, {_form(b)}")


BINDERS = {"fa3": fa3, "flashinfer": flashinfer, "fa4": fa4}


def peers(call, names=("fa3", "flashinfer", "fa4")) -> list[Peer]:
    """Each named baseline bound to the call, or unbound with the reason (a binding that raises too)."""
    out = []
    for n in names:
        try:
            out.append(BINDERS[n](call))
        except Exception as e:  # a library that refuses the call at bind time: recorded, the others still run
            out.append(Peer(n, None, why=f"bind failed: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"))
    return out
