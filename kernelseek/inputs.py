"""Seeded inputs for one Scenario: q/k/v in the kernel's layouts, plus every side tensor.

`make_inputs(scenario, seed)` draws standard-normal q, k, v (as FlashAttention's tests do) and
builds what the scenario's features need: varlen `cu_seqlens`, `seqused_k` (= cache_seqlens),
`leftpad_k`, a paged K/V pool with a SHUFFLED page table (so a kernel that ignores the table reads
the wrong keys), one sink logit per query head, and fp8 e4m3 values with per (batch, KV head)
descales. `alloc_outputs` gives NaN-poisoned O and LSE buffers, so anything a kernel leaves
unwritten shows up in the check. `gather_kv` lists, per sequence, the keys/values a kernel must
attend to (after the page table, leftpad and seqused_k).

Reproducibility: every block of GEN_CHUNK elements of every tensor has its own torch.Generator
seeded from (seed, tensor, block), so the same seed gives the same tensors whatever the thread
count, and blocks are drawn in parallel threads on the CPU (a 256 x 2048-key paged pool is ~1G
values). By default values are drawn on the CPU and then moved, so CPU and GPU inputs are
bit-identical for one seed. `gen_device="cuda"` draws on the GPU instead (faster still); those
values differ from the CPU ones (deterministic per seed on one GPU software stack).
"""
from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from .scenarios import Scenario

FP8_MAX = 448.0  # largest finite float8_e4m3fn value
GEN_CHUNK = 1 << 22  # elements per generator block (fixed: values never depend on thread count)
_TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}
_STREAM = {"q": 0, "k": 1, "v": 2, "pages": 3, "sinks": 4}  # generator index per tensor


@dataclass
class Inputs:
    q: torch.Tensor   # dense [B,Sq,Hq,D]; varlen packed [total_q,Hq,D]
    k: torch.Tensor   # dense [B,Sk,Hkv,D]; varlen [total_k,Hkv,D]; paged [num_pages,page_size,Hkv,D]
    v: torch.Tensor   # like k with Dv
    cu_seqlens_q: torch.Tensor | None = None   # int32 [B+1] (varlen)
    cu_seqlens_k: torch.Tensor | None = None   # int32 [B+1] (varlen)
    seqused_k: torch.Tensor | None = None      # int32 [B] key end per sequence (cache_seqlens)
    leftpad_k: torch.Tensor | None = None      # int32 [B] first valid key per sequence
    page_table: torch.Tensor | None = None     # int32 [B, pages_per_seq], shuffled page ids
    sinks: torch.Tensor | None = None          # float32 [Hq]
    q_descale: torch.Tensor | None = None      # float32 [B, Hkv] (fp8 only)
    k_descale: torch.Tensor | None = None      # float32 [B, Hkv] (fp8 only)
    v_descale: torch.Tensor | None = None      # float32 [B, Hkv] (fp8 only)
    out_dtype: torch.dtype = torch.bfloat16    # bf16 for bf16 and fp8 inputs, fp16 for fp16

    def tensors(self) -> dict[str, torch.Tensor]:
        """The non-None tensors by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)}

    def to(self, device) -> "Inputs":
        return dataclasses.replace(self, **{n: t.to(device) for n, t in self.tensors().items()})


def torch_dtype(s: Scenario) -> torch.dtype:
    """The element type of q, k, v."""
    return _TORCH_DTYPE[s.dtype]


def out_dtype_for(s: Scenario) -> torch.dtype:
    """The element type of O: fp16 for fp16 inputs, bf16 for bf16 and fp8 inputs."""
    return torch.float16 if s.dtype == "fp16" else torch.bfloat16


def pages_per_seq(s: Scenario) -> int:
    """Page-table columns: enough pages for the largest key capacity (0 when not paged)."""
    return math.ceil(max(s.k_capacity()) / s.page_size) if s.paged else 0


def _generator(seed: int, stream: str, block: int, device: torch.device) -> torch.Generator:
    # One independent stream per (seed, tensor, block), hashed to 64 bits by numpy's SeedSequence.
    words = np.random.SeedSequence([int(seed), _STREAM[stream], block]).generate_state(2, dtype=np.uint32)
    g = torch.Generator(device=device)
    g.manual_seed(int(words[0]) | (int(words[1]) << 32))
    return g


def _randn(shape, dtype: torch.dtype, device: torch.device, seed: int, stream: str) -> torch.Tensor:
    """Standard normal values drawn directly in `dtype`, block by block (threads on the CPU)."""
    out = torch.empty(shape, dtype=dtype, device=device)
    flat = out.view(-1)
    blocks = range(-(-flat.numel() // GEN_CHUNK))

    def fill(c: int) -> None:
        flat[c * GEN_CHUNK:(c + 1) * GEN_CHUNK].normal_(generator=_generator(seed, stream, c, device))

    if device.type == "cpu" and len(blocks) > 1 and torch.get_num_threads() > 1:
        with ThreadPoolExecutor(torch.get_num_threads()) as pool:
            list(pool.map(fill, blocks))
    else:
        for c in blocks:
            fill(c)
    return out


def seq_offsets(lens: list[int]) -> list[int]:
    """[0, l0, l0+l1, ...]: the row offsets of packed sequences."""
    return [0] + list(np.cumsum(lens, dtype=np.int64).tolist())


def _int32(vals, device) -> torch.Tensor:
    return torch.tensor(list(vals), dtype=torch.int32, device=device)


def _descale_from_amax(amax: torch.Tensor) -> torch.Tensor:
    # descale = amax / 448 so the largest |value| lands on the fp8 maximum; 1 where amax is 0.
    d = amax.float() / FP8_MAX
    return torch.where(d > 0, d, torch.ones_like(d))


def _quantize(x: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
    """float32 x and a descale broadcastable to it -> float8_e4m3fn round(x / descale)."""
    return (x / descale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def _segment_amax(x: torch.Tensor, lens: list[int], hkv: int) -> torch.Tensor:
    """Packed x [total, H, D] -> amax per (segment, KV head) [n, hkv] (H = hkv * group)."""
    off = seq_offsets(lens)
    out = torch.zeros(len(lens), hkv, dtype=torch.float32, device=x.device)
    for b in range(len(lens)):
        seg = x[off[b]:off[b + 1]]
        if seg.shape[0]:
            out[b] = seg.reshape(seg.shape[0], hkv, -1).abs().amax(dim=(0, 2))
    return out


def _seq_index(lens: list[int], device) -> torch.Tensor:
    """For packed rows: the sequence each row belongs to, int64 [total]."""
    return torch.repeat_interleave(torch.arange(len(lens), device=device),
                                   torch.tensor(lens, device=device))


def _fp8_packed(x: torch.Tensor, lens: list[int], hkv: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed float32 [total, H, D] -> (fp8 values, descale [n, hkv])."""
    desc = _descale_from_amax(_segment_amax(x, lens, hkv))
    group = x.shape[1] // hkv
    per_row = desc[_seq_index(lens, x.device)]                     # [total, hkv]
    per_row = per_row.repeat_interleave(group, dim=1)[:, :, None]  # [total, H, 1]
    return _quantize(x, per_row), desc


def _fp8_dense(x: torch.Tensor, hkv: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense float32 [B, S, H, D] -> (fp8 values, descale [B, hkv])."""
    b, sl, h, d = x.shape
    amax = x.view(b, sl, hkv, h // hkv, d).abs().amax(dim=(1, 3, 4))    # [B, hkv]
    desc = _descale_from_amax(amax)
    scale = desc.repeat_interleave(h // hkv, dim=1)[:, None, :, None]  # [B, 1, H, 1]
    return _quantize(x, scale), desc


def _fp8_paged(x: torch.Tensor, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Page pool float32 [P, ps, Hkv, D] and table [B, pps] -> (fp8 pool, descale [B, Hkv])."""
    page_amax = x.abs().amax(dim=(1, 3))                   # [P, Hkv]
    t = table.long()
    desc = _descale_from_amax(page_amax[t].amax(dim=1))    # [B, Hkv] over each sequence's pages
    owner = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
    owner[t.flatten()] = torch.arange(t.shape[0], device=x.device).repeat_interleave(t.shape[1])
    return _quantize(x, desc[owner][:, None, :, None]), desc


def make_inputs(s: Scenario, seed: int, device="cpu", gen_device: str | None = None) -> Inputs:
    """Fresh random inputs for scenario `s`, reproducible from `seed` (>= 0).

    gen_device: where values are drawn. None = "cpu" (identical values on every device for one
    seed); "cuda" (or the target device) draws there, which is fast but gives different values.
    """
    gdev = torch.device(gen_device or "cpu")
    dev = torch.device(device)
    hq, hkv, d, dv = s.heads_q, s.heads_kv, s.head_dim, s.dv
    nb = s.n_batch
    fp8 = s.dtype == "fp8"
    draw_dtype = torch.float32 if fp8 else torch_dtype(s)

    def randn(shape, stream):
        return _randn(shape, draw_dtype, gdev, seed, stream)

    inp_extra: dict = {}
    if s.varlen:
        lq, lk = s.q_lens(), s.k_capacity()
        tq, tk = sum(lq), sum(lk)
        q, k, v = randn((tq, hq, d), "q"), randn((tk, hkv, d), "k"), randn((tk, hkv, dv), "v")
        inp_extra["cu_seqlens_q"] = _int32(seq_offsets(lq), gdev)
        inp_extra["cu_seqlens_k"] = _int32(seq_offsets(lk), gdev)
        if fp8:
            q, qd = _fp8_packed(q, lq, hkv)
            k, kd = _fp8_packed(k, lk, hkv)
            v, vd = _fp8_packed(v, lk, hkv)
    else:
        q = randn((nb, s.seqlen_q, hq, d), "q")
        if s.paged:
            pps = pages_per_seq(s)
            num_pages = nb * pps
            perm = torch.randperm(num_pages, generator=_generator(seed, "pages", 0, gdev), device=gdev)
            table = perm.view(nb, pps).to(torch.int32)  # logical page p of sequence b -> pool page
            inp_extra["page_table"] = table
            k = randn((num_pages, s.page_size, hkv, d), "k")
            v = randn((num_pages, s.page_size, hkv, dv), "v")
        else:
            k, v = randn((nb, s.seqlen_k, hkv, d), "k"), randn((nb, s.seqlen_k, hkv, dv), "v")
        if fp8:
            q, qd = _fp8_dense(q, hkv)
            if s.paged:
                k, kd = _fp8_paged(k, inp_extra["page_table"])
                v, vd = _fp8_paged(v, inp_extra["page_table"])
            else:
                (k, kd), (v, vd) = _fp8_dense(k, hkv), _fp8_dense(v, hkv)
    if fp8:
        inp_extra.update(q_descale=qd, k_descale=kd, v_descale=vd)
    if s.cache_seqlens is not None:
        inp_extra["seqused_k"] = _int32(s.cache_seqlens, gdev)
    elif s.paged and s.seqlen_k % s.page_size:
        # the last page is partly filled: the kernel learns the true length from seqused_k
        inp_extra["seqused_k"] = _int32([s.seqlen_k] * nb, gdev)
    if s.leftpad is not None:
        inp_extra["leftpad_k"] = _int32(s.leftpad, gdev)
    if s.sinks:
        inp_extra["sinks"] = torch.randn(hq, dtype=torch.float32, device=gdev,
                                         generator=_generator(seed, "sinks", 0, gdev))
    inp = Inputs(q=q, k=k, v=v, out_dtype=out_dtype_for(s), **inp_extra)
    return inp.to(dev) if gdev != dev else inp


def alloc_outputs(s: Scenario, inp: Inputs, poison=float("nan")) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) filled with `poison` on the inputs' device.

    o: [B,Sq,Hq,Dv] (varlen [total_q,Hq,Dv]) in out_dtype; lse float32 [B,Hq,Sq] (varlen [Hq,total_q]).
    """
    dev = inp.q.device
    if s.varlen:
        tq = sum(s.q_lens())
        o_shape, lse_shape = (tq, s.heads_q, s.dv), (s.heads_q, tq)
    else:
        o_shape, lse_shape = (s.n_batch, s.seqlen_q, s.heads_q, s.dv), (s.n_batch, s.heads_q, s.seqlen_q)
    o = torch.full(o_shape, poison, dtype=inp.out_dtype, device=dev)
    lse = torch.full(lse_shape, poison, dtype=torch.float32, device=dev)
    return o, lse


def gather_kv(s: Scenario, inp: Inputs) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per sequence the keys and values a kernel attends to: ([Sk_b,Hkv,D], [Sk_b,Hkv,Dv]).

    Logical keys leftpad_b .. end_b-1 (end_b = cache_seqlens or the stored length), read through
    the page table when paged. Values stay in the stored dtype (fp8 is not dequantized). Lengths
    come from the scenario, so this does not synchronize with the GPU.
    """
    out = []
    koff = seq_offsets(s.k_capacity())
    for b, (start, end) in enumerate(s.k_ranges()):
        if s.paged:
            n = math.ceil(end / s.page_size)
            pages = inp.page_table[b, :n].long()
            kb = inp.k.index_select(0, pages).flatten(0, 1)   # [n*ps, Hkv, D] logical order
            vb = inp.v.index_select(0, pages).flatten(0, 1)
            out.append((kb[start:end], vb[start:end]))
        elif s.varlen:
            out.append((inp.k[koff[b] + start:koff[b] + end], inp.v[koff[b] + start:koff[b] + end]))
        else:
            out.append((inp.k[b, start:end], inp.v[b, start:end]))
    return out
