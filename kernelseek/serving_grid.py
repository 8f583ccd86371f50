"""The serving grid (kernelseek/grids/serving.yaml): one mixed chunked-prefill + decode step over a paged
KV cache per row, as a serving engine makes it: ONE flash_attn_with_kvcache call (kernelseek.attention).

    rows = load_rows()                       # validated; a bad field names the file, the row and the field
    call = make_call(rows[0], device="cuda") # seeded tensors of the step
    o = ours(call)                           # our call; reference(call) float64 (reference_fa3);
    independent(call)                        # a second answer: torch SDPA per sequence on gathered pages

A row's batch: `decode.count` sequences of one query each (contexts spread over decode.context, see
decode_contexts), then one sequence per `prefill` entry [chunk, context]: a chunk of `chunk` new tokens
whose last one sits at position context - 1 (the chunk's tokens are already in the cache, as an engine
writes them before attention; cache_seqlens = context). Decodes come first, as vLLM orders its batch.
Counts (bytes, FLOPs, the bound) are in serving_counts.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
import yaml

from .paths import GRIDS

GOLDEN = 0.6180339887498949   # decode contexts: lo + (hi - lo) * frac((i + 1) * GOLDEN), spread, unsorted
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
ROW_KEYS = {"name", "model", "heads_q", "heads_kv", "head_dim", "head_dim_v", "qv", "page_size", "prefill",
            "decode", "attention_chunk", "causal", "dtype", "scale", "note"}
REQUIRED = ("name", "model", "heads_q", "heads_kv", "head_dim", "page_size", "prefill", "decode")


@dataclass(frozen=True)
class Row:
    """One serving step. Head dims: q/k `head_dim`, v `head_dim_v` (0 = head_dim); qv rows add a
    [T, Hq, head_dim_v] qv term (MLA absorbed: score = q.k + qv.v)."""
    name: str
    model: str
    heads_q: int
    heads_kv: int
    head_dim: int
    page_size: int
    prefill: tuple            # ((chunk tokens, context after the chunk), ...)
    decode_count: int
    decode_context: tuple     # (lo, hi) context of the decoding sequences
    head_dim_v: int = 0
    qv: bool = False
    attention_chunk: int = 0
    causal: bool = True
    dtype: str = "bf16"
    scale: float | None = None
    note: str = ""

    @property
    def dv(self) -> int:
        return self.head_dim_v or self.head_dim

    @property
    def dqk(self) -> int:
        """The score's head dim: q.k (+ qv.v)."""
        return self.head_dim + (self.dv if self.qv else 0)

    @property
    def softmax_scale(self) -> float:
        return self.scale if self.scale is not None else self.dqk ** -0.5

    @property
    def group(self) -> int:
        return self.heads_q // self.heads_kv

    def decode_contexts(self) -> list[int]:
        lo, hi = self.decode_context
        return [lo + int((hi - lo) * math.modf((i + 1) * GOLDEN)[0]) for i in range(self.decode_count)]

    def q_lens(self) -> list[int]:
        """Query rows per sequence: the decodes (1 each), then the prefill chunks."""
        return [1] * self.decode_count + [c for c, _ in self.prefill]

    def k_lens(self) -> list[int]:
        """Keys in the cache per sequence (cache_seqlens), the current tokens included."""
        return self.decode_contexts() + [k for _, k in self.prefill]

    def mix(self) -> str:
        pre = "+".join(str(c) for c, _ in self.prefill)
        lo, hi = min(self.k_lens()), max(self.k_lens())
        return f"prefill {pre} + {self.decode_count} decodes, ctx {lo}-{hi}, page {self.page_size}"


class GridError(ValueError):
    """A serving grid that cannot be used; the message names the file, the row and the field."""


def _posint(where, key, v, zero_ok=False):
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if zero_ok else 1):
        raise GridError(f"{where}: field '{key}' must be a {'non-negative' if zero_ok else 'positive'} integer, got {v!r}")
    return v


def _row(raw: dict, where: str) -> Row:
    bad = sorted(set(raw) - ROW_KEYS)
    if bad:
        raise GridError(f"{where}: unknown field '{bad[0]}' (known: {', '.join(sorted(ROW_KEYS))})")
    for key in REQUIRED:
        if key not in raw:
            raise GridError(f"{where}: missing field '{key}'")
    for key in ("heads_q", "heads_kv", "head_dim", "page_size"):
        _posint(where, key, raw[key])
    for key in ("head_dim_v", "attention_chunk"):
        _posint(where, key, raw.get(key, 0), zero_ok=True)
    if raw["heads_q"] % raw["heads_kv"]:
        raise GridError(f"{where}: field 'heads_kv': heads_q={raw['heads_q']} is not a multiple of {raw['heads_kv']}")
    pre = raw["prefill"]
    if not isinstance(pre, list) or not all(isinstance(p, list) and len(p) == 2 for p in pre):
        raise GridError(f"{where}: field 'prefill' must be a list of [chunk, context] pairs, got {pre!r}")
    for c, k in pre:
        _posint(where, "prefill", c), _posint(where, "prefill", k)
        if c > k:
            raise GridError(f"{where}: field 'prefill': a chunk of {c} tokens cannot end at context {k}")
    dec = raw["decode"]
    if not isinstance(dec, dict) or set(dec) != {"count", "context"} or len(dec["context"]) != 2:
        raise GridError(f"{where}: field 'decode' must be {{count: N, context: [lo, hi]}}, got {dec!r}")
    _posint(where, "decode", dec["count"], zero_ok=True)
    lo, hi = (_posint(where, "decode", x) for x in dec["context"])
    if lo > hi:
        raise GridError(f"{where}: field 'decode': context lo {lo} > hi {hi}")
    if raw.get("dtype", "bf16") not in DT:
        raise GridError(f"{where}: field 'dtype' must be one of {sorted(DT)}, got {raw['dtype']!r}")
    chunk = raw.get("attention_chunk", 0)
    if chunk and chunk % raw["page_size"]:
        raise GridError(f"{where}: field 'attention_chunk' {chunk} must be a multiple of page_size {raw['page_size']}")
    if raw.get("qv") and not raw.get("head_dim_v"):
        raise GridError(f"{where}: field 'qv' needs head_dim_v (the qv/v head dim)")
    return Row(name=raw["name"], model=raw["model"], heads_q=raw["heads_q"], heads_kv=raw["heads_kv"],
               head_dim=raw["head_dim"], page_size=raw["page_size"], prefill=tuple(tuple(p) for p in pre),
               decode_count=dec["count"], decode_context=(lo, hi), head_dim_v=raw.get("head_dim_v", 0),
               qv=bool(raw.get("qv", False)), attention_chunk=chunk, causal=bool(raw.get("causal", True)),
               dtype=raw.get("dtype", "bf16"), scale=raw.get("scale"), note=raw.get("note", ""))


def load_rows(path=None) -> list[Row]:
    """The rows of a serving grid file (default kernelseek/grids/serving.yaml), defaults merged."""
    path = path or GRIDS / "serving.yaml"
    raw = yaml.safe_load(open(path))
    rows, names = [], set()
    for i, r in enumerate(raw.get("rows") or []):
        where = f"{path}: row {i} ({r.get('name', '?')})"
        row = _row({**(raw.get("defaults") or {}), **r}, where)
        if row.name in names:
            raise GridError(f"{where}: field 'name': {row.name} appears twice")
        names.add(row.name)
        rows.append(row)
    if not rows:
        raise GridError(f"{path}: no rows")
    return rows


# ---- tensors and calls ------------------------------------------------------------------------------
@dataclass
class Call:
    """One row's tensors: q [T,Hq,D] (qv [T,Hq,Dv]), caches [pages,ps,Hkv,D/Dv], page_table [B,W] int32
    (W = pages of the longest sequence; unused entries 0), cache_seqlens [B], cu_seqlens_q [B+1] int32."""
    row: Row
    t: dict = field(default_factory=dict)

    @property
    def max_q(self) -> int:
        return max(self.row.q_lens())


def _i32(x, dev):
    return torch.tensor(x, dtype=torch.int32, device=dev)


def make_call(row: Row, device="cuda", seed: int = 0) -> Call:
    """Seeded randn tensors on `device` (drawn there); pages shuffled over the pool (seeded on the CPU)."""
    g = torch.Generator(device=device).manual_seed(seed)
    dt, ps = DT[row.dtype], row.page_size
    rn = lambda *s: torch.randn(*s, generator=g, device=device, dtype=dt)
    ql, kl = row.q_lens(), row.k_lens()
    npages = [-(-k // ps) for k in kl]
    width = max(npages)
    perm = torch.randperm(sum(npages), generator=torch.Generator().manual_seed(seed)).tolist()
    table, at = [], 0
    for n in npages:
        table.append(perm[at:at + n] + [0] * (width - n))
        at += n
    t = {"q": rn(sum(ql), row.heads_q, row.head_dim), "kc": rn(sum(npages), ps, row.heads_kv, row.head_dim),
         "vc": rn(sum(npages), ps, row.heads_kv, row.dv), "table": _i32(table, device),
         "seqlens": _i32(kl, device), "cu_q": _i32([0] + list(_cumsum(ql)), device)}
    if row.qv:
        t["qv"] = rn(sum(ql), row.heads_q, row.dv)
    return Call(row, t)


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def call_kwargs(call: Call) -> dict:
    """flash_attn_with_kvcache's keyword arguments for the step (what a serving engine passes)."""
    r, t = call.row, call.t
    return dict(qv=t.get("qv"), cache_seqlens=t["seqlens"], page_table=t["table"], cu_seqlens_q=t["cu_q"],
                max_seqlen_q=call.max_q, softmax_scale=r.softmax_scale, causal=r.causal,
                attention_chunk=r.attention_chunk)


def ours(call: Call, return_lse: bool = False):
    """Our step: ONE kernelseek.attention.flash_attn_with_kvcache call (the GPU kernel, or the float64
    reference on CPU tensors)."""
    from . import attention as A
    t = call.t
    return A.flash_attn_with_kvcache(t["q"], t["kc"], t["vc"], return_softmax_lse=return_lse, **call_kwargs(call))


def reference(call: Call):
    """(o, lse) float64 from reference_fa3.attention_ref on the same tensors (the paged layout as given)."""
    from .reference_fa3 import attention_ref
    r, t = call.row, call.t
    return attention_ref(t["q"], t["kc"], t["vc"], cu_seqlens_q=t["cu_q"], seqused_k=t["seqlens"],
                         page_table=t["table"], qv=t.get("qv"), softmax_scale=r.softmax_scale, causal=r.causal,
                         attention_chunk=r.attention_chunk)


def independent(call: Call, dtype=torch.float64, block: int = 256) -> torch.Tensor:
    """O [T, Hq, Dv] in `dtype`, computed apart from reference_fa3: per sequence, its pages gathered by
    plain indexing, [q, qv] . [k, v] scores through torch SDPA with an explicit boolean mask (query i at
    position p = Sk - Sq + i sees key j when j <= p, and with attention_chunk C when j >= C floor(p / C)),
    GQA by repeating the KV heads; query blocks of `block` rows bound the memory."""
    r, t = call.row, call.t
    ps, g = r.page_size, r.group
    out = torch.empty(t["q"].shape[0], r.heads_q, r.dv, dtype=dtype, device=t["q"].device)
    at = 0
    for b, (sq, sk) in enumerate(zip(r.q_lens(), r.k_lens())):
        pages = t["table"][b, :-(-sk // ps)].long()
        k = t["kc"][pages].reshape(-1, r.heads_kv, r.head_dim)[:sk].to(dtype)
        v = t["vc"][pages].reshape(-1, r.heads_kv, r.dv)[:sk].to(dtype)
        if r.qv:
            k = torch.cat((k, v), dim=-1)
        k = k.repeat_interleave(g, dim=1).transpose(0, 1)     # [Hq, Sk, Dqk]
        v = v.repeat_interleave(g, dim=1).transpose(0, 1)     # [Hq, Sk, Dv]
        for i0 in range(0, sq, block):
            i1 = min(sq, i0 + block)
            q = t["q"][at + i0:at + i1].to(dtype)
            if r.qv:
                q = torch.cat((q, t["qv"][at + i0:at + i1].to(dtype)), dim=-1)
            p = torch.arange(i0, i1, device=q.device)[:, None] + (sk - sq)
            j = torch.arange(sk, device=q.device)[None, :]
            mask = (j <= p) if r.causal else torch.ones_like(j <= p)
            if r.attention_chunk:
                mask = mask & (j >= (p // r.attention_chunk) * r.attention_chunk)
            o = F.scaled_dot_product_attention(q.transpose(0, 1), k, v, attn_mask=mask, scale=r.softmax_scale)
            out[at + i0:at + i1] = o.transpose(0, 1)
        at += sq
    return out


# ---- scaled-down copies (CPU tests) -----------------------------------------------------------------
def scaled(row: Row, decodes: int = 5) -> Row:
    """A copy with the same structure and CPU-sized lengths: the same head dims, GQA group, page size,
    qv, causal and number of prefill chunks; at most 2 KV heads; chunks of 40 + 8 i tokens (so
    max_seqlen_q x group > 64: the real row's kernel route, not the decode path) ending at contexts of
    up to ~230 keys; `decodes` decodes over contexts 17-150; attention_chunk 64 (chunks crossed)."""
    hkv = min(row.heads_kv, 2)
    pre = tuple((40 + 8 * i, 40 + 8 * i + 37 * (i + 1)) for i in range(len(row.prefill)))
    return replace(row, name=row.name + "_cpu", heads_kv=hkv, heads_q=hkv * row.group, prefill=pre,
                   decode_count=min(row.decode_count, decodes), decode_context=(17, 150),
                   attention_chunk=64 if row.attention_chunk else 0)
