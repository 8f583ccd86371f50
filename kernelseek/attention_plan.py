"""From one FlashAttention-3 forward to kseek.h calls (attention_core.Core), by exact torch-side transforms.

The kernel's ABI has dense, varlen (packed) and paged layouts, seqused_k, leftpad_k, windows and the
rest; FA3's interface has more. `solve(Problem)` maps each extra onto the ABI without changing a
single score or weight (so the fast paths run them):

* attention_chunk C: passed to the kernel (kseek.h ABI 3: a query at key position p sees keys
  [floor(p/C) C, floor(p/C) C + C) only), on whatever route the call takes, like a window.
* seqused_q: each sequence becomes two varlen segments, its used rows with its keys and its unused
  rows with none (O = 0, lse = -inf), so no row moves (`_seqused_segments`).
* dense queries over a paged cache, in a shape the decode path or the prefill (16-bit or fp8) takes:
  one call; the kernel reads the pages in place or copies them into its workspace itself (since
  kernel v14: fp8, any page size, left padding; `_kernel_pages`).
* 16-bit varlen queries over a cache that the decode path takes (max_seqlen_q x Hq/Hkv <= 64): one
  call, the kernel's decode path reads the cache in place (before, the plan padded the queries).
* other 16-bit varlen queries over a paged cache (pages of a multiple of 8 rows, no leftpad) or a dense
  one: read in place (`_cache_in_place`; the kernel splits a varlen batch between its decode and
  prefill paths on the device).
* anything else over a KV cache: the keys become a packed varlen tensor (a dense cache is viewed, pages
  or a cache_batch_idx are gathered: one copy of the keys those sequences can reach).
* cache_batch_idx: on a dense cache a page table [B, 1] whose page is the whole cache row (page_size =
  Sk), no copy; on a paged cache its page-table rows.
* Dv > D (FA3 allows D <= 64 with Dv <= 512): q and k zero-padded to Dv (scores unchanged);
  Dv > 256: V split into column blocks of 256, one call each (same softmax, outputs concatenated).
* qv (score = q.k + qv.v), and D 64 with Dv 256 / 512 without it: kernels/qv_fwd when it takes the call
  (16-bit CUDA, no sinks or seqused_q: qv_attention.takes), path "qv"; otherwise, with qv, [q, qv] . [k, v]
  concatenated (step "qv-concat"), whose head dim D + Dv (320, 576) only the naive kernel's wide
  instantiation takes (16-bit), the step "wide-naive": correct, slow.
Nothing here reads a device value back to the host (no sync); lengths the host needs are bounds
(max_seqlen_q, the cache capacity).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from . import attention_core as core
from . import qv_attention, seqused_segments

DECODE_MAX_ROWS = 64                 # kernels/fa3_hopper/decode.cuh kMaxRows: Sq * Hq/Hkv per KV head
DECODE_DIMS = (64, 128, 256)         # decode.cuh `supported`: D == Dv in these (16-bit and, since v14, fp8)
DECODE_DV_SHAPE = (192, 128)         # and 16-bit D 192 with Dv 128 (v14, KSEEK_FA3_DECODE_DV)
FAST_SHAPES = {(64, 64), (96, 96), (128, 128), (192, 128), (192, 192), (256, 256)}  # prefill_host.cuh
MAX_DIM = 256                        # widest head dim of the fast paths and of naive_core.cuh's main kernel
MAX_WIDE_D, MAX_WIDE_DV = 576, 512   # naive_core.cuh naive_wide_kernel (16-bit only): FA3's qv at D 64, Dv 512


@dataclass
class Problem:
    """One forward. q dense [B,Sq,Hq,D] (cu_q None) or packed [T,Hq,D]; kv: "dense" [Bc,Sk,Hkv,*],
    "packed" [Tk,Hkv,*] with cu_k, or "paged" [pages,ps,Hkv,*] with page_table. max_q: bound of the
    query lengths; max_k: bound of the key capacity per sequence."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    kv: str
    batch: int
    max_q: int
    max_k: int
    scale: float
    cu_q: torch.Tensor | None = None
    seqused_q: torch.Tensor | None = None
    cu_k: torch.Tensor | None = None
    seqused_k: torch.Tensor | None = None
    leftpad: torch.Tensor | None = None
    page_table: torch.Tensor | None = None
    batch_idx: torch.Tensor | None = None
    causal: bool = False
    window: tuple = (-1, -1)
    chunk: int = 0
    softcap: float = 0.0
    sinks: torch.Tensor | None = None
    descales: tuple = (None, None, None)
    num_splits: int = 0
    qv: torch.Tensor | None = None   # FA3's qv, laid out like q with Dv columns


def take(x: torch.Tensor, idx) -> torch.Tensor:
    """x[idx]; fp8 through a uint8 view (indexing kernels for float8 are not in every torch build)."""
    if x.element_size() == 1 and x.is_floating_point():
        return x.view(torch.uint8)[idx].view(x.dtype)
    return x[idx]


def _i32(t):
    return None if t is None else t.to(torch.int32)


def _decode_takes(p: Problem) -> bool:
    """Does the split-KV decode path take this call's shape with dense q, or with packed q (p.cu_q
    ignored: the kernel takes packed queries over a cache when the longest is short enough)?
    decode.cuh `supported` and fa3_hopper.cu `use_decode` since v14: 16-bit or fp8 with D == Dv in
    DECODE_DIMS, and 16-bit (192, 128); at most DECODE_MAX_ROWS query rows per KV head."""
    d, dv = p.q.shape[-1], p.v.shape[-1]
    g = p.q.shape[-2] // p.k.shape[-2]
    if p.max_q * g > DECODE_MAX_ROWS:
        return False
    if p.q.dtype in (torch.bfloat16, torch.float16):
        return (d == dv and d in DECODE_DIMS) or (d, dv) == DECODE_DV_SHAPE
    return p.q.element_size() == 1 and d == dv and d in DECODE_DIMS


def _pages_for_batch_idx(p: Problem) -> Problem:
    """cache_batch_idx folded into a page table, no copy: a dense cache's rows become pages of Sk rows
    (a table [B, 1]); a paged cache's table keeps the selected rows."""
    if p.batch_idx is None:
        return p
    if p.kv == "dense":
        core.step("batch-idx-as-pages")
        return replace(p, kv="paged", page_table=p.batch_idx.to(torch.int32).view(-1, 1), batch_idx=None)
    core.step("batch-idx-page-rows")
    return replace(p, page_table=p.page_table[p.batch_idx.long()], batch_idx=None)


# ---- head dims ------------------------------------------------------------------------------------
def solve(p: Problem):
    """(o [q.shape[:-1], Dv] in the out dtype, lse [B,Hq,Sq] or [Hq,T] float32) of the forward."""
    if qv_attention.takes(p.q, p.k, p.v, p.qv, sinks=p.sinks, descales=p.descales, seqused_q=p.seqused_q):
        return _solve_qv(p)      # qv, or D 64 with Dv 256 / 512: kernels/qv_fwd in one call
    if p.qv is not None:
        core.step("qv-concat")   # score = q.k + qv.v = [q, qv] . [k, v], one concatenated head dim
        p = replace(p, q=torch.cat((p.q, p.qv.to(p.q.dtype)), dim=-1), k=torch.cat((p.k, p.v), dim=-1), qv=None)
    dv = p.v.shape[-1]
    if dv > MAX_DIM and p.q.shape[-1] <= MAX_DIM:  # V in column blocks: the same softmax weights, each block's outputs
        core.step("dv-split")
        d = p.q.shape[-1]
        if dv % MAX_DIM == 0 and d < MAX_DIM:   # every part is (MAX_DIM, MAX_DIM): pad q/k once, not per part
            core.step(f"pad-d{d}-to-{MAX_DIM}")
            p = replace(p, q=F.pad(p.q, (0, MAX_DIM - d)), k=F.pad(p.k, (0, MAX_DIM - d)))
        # each part's V is a column view (the kernel takes V's strides; no copy)
        parts = [_solve_dims(replace(p, v=p.v[..., c:c + MAX_DIM])) for c in range(0, dv, MAX_DIM)]
        return torch.cat([o for o, _ in parts], dim=-1), parts[0][1]
    return _solve_dims(p)


def _solve_dims(p: Problem):
    d, dv = p.q.shape[-1], p.v.shape[-1]
    if (d, dv) not in FAST_SHAPES and d < dv and (dv, dv) in FAST_SHAPES:
        core.step(f"pad-d{d}-to-{dv}")  # zero columns add nothing to q.k
        p = replace(p, q=F.pad(p.q, (0, dv - d)), k=F.pad(p.k, (0, dv - d)))
    d = p.q.shape[-1]
    wide_ok = p.q.element_size() == 2 and d <= MAX_WIDE_D and dv <= MAX_WIDE_DV
    if max(d, dv) > MAX_DIM and not wide_ok:
        raise NotImplementedError(f"kernelseek.attention: head dim {d} (q/k) with {dv} (v) has no kernel path "
                                  f"(16-bit: at most {MAX_WIDE_D}/{MAX_WIDE_DV}, on the naive kernel; fp8: "
                                  f"{MAX_DIM}; qv adds Dv to the q/k head dim)")
    if max(d, dv) > MAX_DIM:
        core.step("wide-naive")  # only naive_wide_kernel takes it: correct, slow
    return _solve_layout(p)


# ---- layouts ------------------------------------------------------------------------------------
def _solve_layout(p: Problem):
    if p.seqused_q is None:
        if p.cu_q is None and p.kv == "dense" and p.batch_idx is None:
            return _direct(p)
        if p.cu_q is None and p.kv != "packed" and (_decode_takes(p) or _kernel_pages(replace(p, kv="paged"))):
            # a paged cache (or batch_idx rows as pages): the decode path reads it in place; the prefill
            # reads it in place or copies the pages it needs into its workspace (fa3_hopper v14,
            # page_gather.cuh: fp8, any page size, left padding)
            return _direct(_pages_for_batch_idx(p))
        if p.cu_q is not None and p.kv == "packed":
            return _direct(p)
        if p.cu_q is not None and p.q.element_size() == 2 and _decode_takes(p):
            # 16-bit packed queries over a cache, on the decode path (the path a serving step's decodes
            # take on the GPU since v13); fp8 packed queries keep the gather below: the fp8 decode with
            # cu_seqlens_q has not run on a GPU
            return _direct(_pages_for_batch_idx(p))
        if (p.kv == "paged" or p.cu_q is not None) and _cache_in_place(p):
            return _direct(_pages_for_batch_idx(p) if p.kv == "paged" else p)
    return _packed(p)


def _kernel_pages(p: Problem) -> bool:
    """Dense queries over a paged cache that a fast path of fa3_hopper takes from v14 on: 16-bit or fp8
    prefill shapes (FAST_SHAPES), whatever the page size, fp8 or left padding (page_gather.cuh)."""
    return (p.kv == "paged" and p.cu_q is None and (p.q.shape[-1], p.v.shape[-1]) in FAST_SHAPES
            and (p.q.dtype in (torch.bfloat16, torch.float16) or p.q.element_size() == 1))


def _cache_in_place(p: Problem) -> bool:
    """Does the kernel read this cache where it lies (no gather)? 16-bit prefill shapes over a paged cache
    (pages of a multiple of 8 rows, no leftpad: prefill_host.cuh `pages_ok`) or, for packed queries, a
    dense one (no cache_batch_idx). Packed queries over either run as one call: sequences short enough
    for the decode path there, the rest on the prefill (fa3_hopper.cu's mixed calls)."""
    if p.q.dtype not in (torch.bfloat16, torch.float16) or (p.q.shape[-1], p.v.shape[-1]) not in FAST_SHAPES:
        return False
    if p.kv == "paged":
        return p.k.shape[1] % 8 == 0 and p.leftpad is None
    return p.kv == "dense" and p.batch_idx is None


def _solve_qv(p: Problem):
    """One call of kernels/qv_fwd.cu: any K/V layout as given (cache_batch_idx as page-table rows)."""
    return qv_attention.run(_core(_pages_for_batch_idx(p)), p.qv)


def _direct(p: Problem):
    return core.run(_core(p))


def _core(p: Problem) -> core.Core:
    return core.Core(q=p.q, k=p.k, v=p.v, batch=p.batch, max_q=p.max_q,
                     max_k=p.page_table.shape[1] * p.k.shape[1] if p.kv == "paged" else p.max_k,
                     scale=p.scale, causal=p.causal, window=p.window, softcap=p.softcap, cu_seqlens_q=p.cu_q,
                     cu_seqlens_k=p.cu_k, seqused_k=p.seqused_k, leftpad_k=p.leftpad, page_table=p.page_table,
                     sinks=p.sinks, descales=p.descales, num_splits=p.num_splits, chunk=p.chunk)


def _packed_kv(p: Problem):
    """(k [Tk,Hkv,D], v, cu_k [B+1] int32, used [B] int32: each sequence's key end, seqused_k or else
    all the rows it owns in k; None for packed keys without seqused_k: all the rows cu_k gives each
    sequence, `_rows(cu_k)`, which `_packed` passes the kernel as seqused_k, as before)."""
    dev = p.q.device
    if p.kv == "packed":
        k, v, cu, s = p.k, p.v, _i32(p.cu_k), None
    else:
        if p.kv == "paged":
            table = p.page_table if p.batch_idx is None else p.page_table[p.batch_idx.long()]
            core.step("gather-pages")
            k, v = take(p.k, table.long()), take(p.v, table.long())  # [B, pages, ps, Hkv, *]
            k, v = k.flatten(1, 2), v.flatten(1, 2)
        elif p.batch_idx is not None:
            core.step("gather-batch-idx")
            k, v = take(p.k, p.batch_idx.long()), take(p.v, p.batch_idx.long())
        else:
            k, v = p.k, p.v
        s = k.shape[1]
        k, v = k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:])
        cu = torch.arange(p.batch + 1, device=dev, dtype=torch.int32) * s
    if p.seqused_k is not None:
        used = _i32(p.seqused_k)
    else:
        used = None if s is None else torch.full((p.batch,), s, device=dev, dtype=torch.int32)
    return k, v, cu, used


def _rows(cu):
    """[B] int32: the rows each sequence of cu [B+1] owns."""
    return cu[1:] - cu[:-1]


def _packed_q(p: Problem):
    """(q [T,Hq,D], cu_q [B+1] int32): dense q viewed as B sequences of Sq rows."""
    if p.cu_q is not None:
        return p.q, _i32(p.cu_q)
    b, sq = p.q.shape[0], p.q.shape[1]
    return p.q.reshape(b * sq, *p.q.shape[2:]), torch.arange(b + 1, device=p.q.device, dtype=torch.int32) * sq


def _seqused_segments(p: Problem, cu_q, cu_k, used_k):
    """seqused_q in place, as 2B varlen segments: sequence b becomes its first used rows (its keys, as
    before: FA3 aligns a causal mask to the used length) and the rest of its rows with no key, which
    kseek.h answers with O = 0 and lse = -inf. No row moves, so nothing is gathered or scattered.
    used_k None: all of each sequence's rows in cu_k (the segments kernel reads them from cu_k itself, so
    with int32 arguments a call is this one launch and kseek_fwd: attention_fastpath replays the pair).
    -> (cu_q [2B+1], cu_k [2B+1], seqused_k [2B], descales with each sequence's row twice)."""
    desc = tuple(None if d is None else d.repeat_interleave(2, dim=0) for d in p.descales)
    fused = seqused_segments.segments(cu_q, _i32(p.seqused_q), cu_k, used_k)   # CUDA: one launch
    if fused is not None:
        return (*fused, desc)
    if used_k is None:
        used_k = _rows(cu_k)
    starts = cu_q[:-1]
    mid = starts + torch.minimum(_i32(p.seqused_q), cu_q[1:] - starts).clamp(min=0)
    pair = lambda a, b: torch.stack((a, b), 1).flatten()                     # noqa: E731  [a0, b0, a1, b1...]
    cu_q2 = torch.cat((pair(starts, mid), cu_q[-1:]))
    cu_k2 = torch.cat((pair(cu_k[:-1], cu_k[1:]), cu_k[-1:]))
    used2 = pair(used_k, torch.zeros_like(used_k))
    return cu_q2, cu_k2, used2, desc


def _packed(p: Problem):
    """The general path: packed q, packed keys (seqused_q as segments); back to p's layout."""
    core.step("packed")
    q, cu_q = _packed_q(p)
    k, v, cu_k, used = _packed_kv(p)
    batch, descales = p.batch, p.descales
    if p.seqused_q is not None:
        core.step("seqused-q-segments")
        cu_q, cu_k, used, descales = _seqused_segments(p, cu_q, cu_k, used)
        batch = 2 * p.batch
    elif used is None:
        used = _rows(cu_k)
    c = core.Core(q=q, k=k, v=v, batch=batch, max_q=p.max_q, max_k=p.max_k, scale=p.scale, causal=p.causal,
                  window=p.window, softcap=p.softcap, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                  seqused_k=used, leftpad_k=_i32(p.leftpad), sinks=p.sinks, descales=descales,
                  num_splits=p.num_splits, chunk=p.chunk)
    return _unpack(p, core.run(c))


def _unpack(p: Problem, out):
    """(o, lse) of a packed call back in p's layout (dense q reshaped)."""
    o, lse = out
    if p.cu_q is None:
        b, sq, hq = p.q.shape[0], p.q.shape[1], p.q.shape[2]
        o = o.view(b, sq, hq, -1)
        lse = lse.view(hq, b, sq).permute(1, 0, 2).contiguous()
    return o, lse
