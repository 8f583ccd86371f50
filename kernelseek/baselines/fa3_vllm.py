"""FlashAttention-3 itself, as vLLM ships it prebuilt: find, load and call `_vllm_fa3_C.fwd`.

vLLM's wheel carries FA3's Hopper kernels as one library, `_vllm_fa3_C.abi3.so`, built on torch's
stable ABI, so it loads with torch 2.11 although vLLM pins a newer torch (staged on the GPU machine
by `tools/fa3.sh stage`). That build is varlen-only: a dense call goes packed, the way vLLM calls it
(q [B*Sq,Hq,D] with uniform cu_seqlens), and its outputs are viewed back into the kernel's layout.

Where the library is looked for, in order: $KSEEK_FA3_LIB, /root/fa3/_vllm_fa3_C.abi3.so (the
staging script's place), <repo>/.fa3/_vllm_fa3_C.abi3.so. The path and the file's sha256 go into
the baseline's version string, so a run's meta says exactly which FA3 ran and from where.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

LIB_NAME = "_vllm_fa3_C.abi3.so"
ENV = "KSEEK_FA3_LIB"
VLLM_VERSION = "0.33.0"  # the wheel tools/fa3.sh prepare takes it from


def candidates() -> list[Path]:
    """Paths tried, in order."""
    from ..paths import REPO
    out = [Path(os.environ[ENV])] if os.environ.get(ENV) else []
    return out + [Path("/root/fa3") / LIB_NAME, REPO / ".fa3" / LIB_NAME]


def find() -> Path | None:
    return next((p for p in candidates() if p.is_file()), None)


@lru_cache(maxsize=None)
def _sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=None)
def load() -> tuple[object | None, str]:
    """(the `fwd` op, "") or (None, why not)."""
    path = find()
    if path is None:
        return None, f"FA3 library {LIB_NAME} not found (tried {', '.join(map(str, candidates()))})"
    import torch
    try:
        torch.ops.load_library(str(path))
        op = torch.ops._vllm_fa3_C.fwd
    except Exception as e:  # a library built for another torch ABI (or not a library) says so here
        return None, f"FA3 library {path} did not load ({type(e).__name__}: {str(e)[:120]})"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    return op, ""


def version() -> str:
    path = find()
    return f"FlashAttention-3 (vLLM {VLLM_VERSION} _vllm_fa3_C) {path} sha256 {_sha(str(path))[:12]}" if path else ""


def with_unset_optionals(op, kw: dict) -> dict:
    """kw plus None for every optional argument of the op's schema (`Tensor?`, `int?`, ...) that has
    no default and is not given: the library's schema declares them without defaults, and torch's
    dispatcher refuses a call that leaves one out."""
    try:
        args = op.default._schema.arguments
    except AttributeError:   # not a torch op (tests): nothing to fill
        return dict(kw)
    out = dict(kw)
    for a in args[3:]:       # q, k, v are passed positionally
        t = str(a.type)
        if a.name not in out and not a.has_default_value() and (t.endswith("?") or t.startswith("Optional[")):
            out[a.name] = None
    return out


def _uniform_cu(n_batch: int, seqlen: int, device):
    import torch
    return torch.arange(0, (n_batch + 1) * seqlen, seqlen, dtype=torch.int32, device=device)


def bind(s, inp):
    """(call, result) for one scenario: call() runs FA3 once; result(raw) -> (o, lse) in our layout.

    Everything that is not the attention itself (packing views, cu_seqlens) is made here, outside
    the timed call. o comes back [total_q,Hq,Dv] and lse [Hq,total_q]; dense rows view them as
    [B,Sq,Hq,Dv] and [B,Hq,Sq].
    """
    fwd, why = load()
    if fwd is None:
        raise RuntimeError(why)
    dev = inp.q.device
    left, right = s.effective_window
    kw = dict(softmax_scale=s.softmax_scale, is_causal=bool(s.causal and left < 0),
              window_size_left=left, window_size_right=right, softcap=float(s.softcap),
              is_rotary_interleaved=False, num_splits=int(s.num_splits), sm_margin=0,
              cp_world_size=1, cp_rank=0)
    if inp.sinks is not None:
        kw["s_aux"] = inp.sinks
    if s.dtype == "fp8":
        kw.update(q_descale=inp.q_descale, k_descale=inp.k_descale, v_descale=inp.v_descale)
    if inp.leftpad_k is not None:
        kw["leftpad_k"] = inp.leftpad_k
    q, k, v = inp.q, inp.k, inp.v
    if s.varlen:
        kw.update(cu_seqlens_q=inp.cu_seqlens_q, max_seqlen_q=max(s.seqlens_q), max_seqlen_k=max(s.seqlens_k))
        if not s.paged:
            kw["cu_seqlens_k"] = inp.cu_seqlens_k
    else:
        q = q.reshape(s.n_batch * s.seqlen_q, s.heads_q, s.head_dim)        # a view: q is contiguous
        kw.update(cu_seqlens_q=_uniform_cu(s.n_batch, s.seqlen_q, dev), max_seqlen_q=s.seqlen_q,
                  max_seqlen_k=s.seqlen_k)
        if not s.paged:
            k = k.reshape(s.n_batch * s.seqlen_k, s.heads_kv, s.head_dim)
            v = v.reshape(s.n_batch * s.seqlen_k, s.heads_kv, s.dv)
            kw["cu_seqlens_k"] = _uniform_cu(s.n_batch, s.seqlen_k, dev)
    if s.paged:
        kw["page_table"] = inp.page_table
        kw["max_seqlen_k"] = int(inp.page_table.shape[1]) * int(s.page_size)
    if inp.seqused_k is not None:
        kw["seqused_k"] = inp.seqused_k
    elif s.paged:
        import torch
        kw["seqused_k"] = torch.full((s.n_batch,), s.seqlen_k, dtype=torch.int32, device=dev)

    kw = with_unset_optionals(fwd, kw)

    def call():
        return fwd(q, k, v, **kw)

    def result(r):
        o, lse = r[0], r[1]
        if not s.varlen:
            o = o.view(s.n_batch, s.seqlen_q, s.heads_q, s.dv)
            lse = lse.view(s.heads_q, s.n_batch, s.seqlen_q).permute(1, 0, 2)
        return o, lse
    return call, result
