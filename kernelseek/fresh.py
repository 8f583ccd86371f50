"""Inputs no kernel can have seen before: fresh content for timed calls, and near-repeat traps.

A kernel that remembers inputs (by pointer, or by a fingerprint of their content read on the host
or computed on the GPU) and returns a stored answer when they come back must never be timed on
inputs that come back, and must be caught when it answers from memory. timing.py's docstring has
the whole design; this module holds its input-side pieces:

- `refresh_(s, inp, gen)`: new random values for q, k and v, in place (same pointers), drawn on
  the device from a generator seeded from os.urandom, so nothing the kernel saw predicts them.
  Everything else (page table, sequence lengths, sinks, descales) stays: the structure of the
  call is the same, only its content is new. fp8 values are drawn as randn x RAW_FP8_SCALE, the
  spread make_inputs gives them (its descale is amax/448 with amax about 4.7 standard deviations).
- `scramble_outputs_(o, lse, gen)`: finite random values in O and LSE before calls whose outputs
  are verified: a kernel that skips a call leaves them wrong, and no poison value marks them.
- `L2Flush`: writes a buffer twice the L2's size, so the next calls read their inputs from HBM
  (the fail line for bandwidth, peaks.py, is HBM's).
- `trap_q_row`, `trap_k_row`: a near repeat. One row of q (or one key row of k) of an input set
  the kernel has just seen is changed in place; everything else is byte-identical. An honest
  kernel's output changes in that row (q) or for the queries that see that key (k); a memoizer
  whose fingerprint misses the changed row returns its stored output, which the check then finds
  wrong. The changed row is random (its sequence, row and head), among rows that see at least one
  key, and the change is large (a q row of 2.5x the usual spread; a key row equal to 4x a query
  row that sees it, which then dominates that query's softmax), so the output moves far beyond the
  check's bound.
"""
from __future__ import annotations

import os
import random

import torch

from .inputs import Inputs, seq_offsets
from .scenarios import Scenario

RAW_FP8_SCALE = 448.0 / 4.7     # raw fp8 spread of make_inputs' values (descale = amax / 448)
FP8_MAX = 448.0


def urandom_generator(device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1))
    return g


def _fill_randn_(t: torch.Tensor, gen: torch.Generator, scale: float = 1.0) -> None:
    """t <- scale * N(0, 1), in t's dtype (fp8 through bf16, clamped to its range)."""
    if t.dtype == torch.float8_e4m3fn:
        tmp = torch.empty(t.shape, dtype=torch.bfloat16, device=t.device).normal_(generator=gen)
        t.copy_(tmp.mul_(scale * RAW_FP8_SCALE).clamp_(-FP8_MAX, FP8_MAX))
    else:
        t.normal_(generator=gen)
        if scale != 1.0:
            t.mul_(scale)


def refresh_(inp: Inputs, gen: torch.Generator) -> None:
    """New random content for q, k and v, in place."""
    for name in ("q", "k", "v"):
        _fill_randn_(getattr(inp, name), gen)


def scramble_outputs_(o: torch.Tensor, lse: torch.Tensor | None, gen: torch.Generator) -> None:
    """Finite random values in O (in [-2, 2]) and LSE (in [-3, 3])."""
    o.copy_(torch.rand(o.shape, generator=gen, device=o.device).mul_(4).sub_(2))
    if lse is not None:
        lse.copy_(torch.rand(lse.shape, generator=gen, device=lse.device).mul_(6).sub_(3))


class L2Flush:
    """Evict the L2: read and write a buffer of twice its size (one int32 add over it)."""

    def __init__(self, device, l2_bytes: int | None = None):
        dev = torch.device(device)
        if l2_bytes is None and dev.type == "cuda":
            l2_bytes = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 60 * 2 ** 20
        self.buf = torch.zeros(max(1, 2 * int(l2_bytes or 0) // 4), dtype=torch.int32, device=dev)

    def __call__(self) -> None:
        self.buf.add_(1)


# ---- near-repeat traps ------------------------------------------------------------------------
def _pick_row(s: Scenario, rng: random.Random) -> tuple[int, int, int, int, int]:
    """(sequence b, query row i, query head h, KV head, diagonal key position j) for a row that
    sees at least its diagonal key: i >= Sq_b - Sk_b. The diagonal key j = start_b + i + Sk_b - Sq_b
    is visible under every mask (causal, windows) of kernels/kseek.h."""
    seqs = [(b, sq, k0, k1) for b, (sq, (k0, k1)) in enumerate(zip(s.q_lens(), s.k_ranges())) if sq > 0 and k1 > k0]
    if not seqs:
        raise ValueError(f"{s.name}: no query row sees a key: no trap can be set")
    b, sq, k0, k1 = rng.choice(seqs)
    sk = k1 - k0
    i = rng.randrange(max(0, sq - sk), sq)
    h = rng.randrange(s.heads_q)
    return b, i, h, h // (s.heads_q // s.heads_kv), k0 + i + sk - sq


def _q_row(s: Scenario, inp: Inputs, b: int, i: int, h: int) -> torch.Tensor:
    if s.varlen:
        return inp.q[seq_offsets(s.q_lens())[b] + i, h]
    return inp.q[b, i, h]


def _k_row(s: Scenario, inp: Inputs, b: int, j: int, hkv: int) -> torch.Tensor:
    if s.paged:
        page = int(inp.page_table[b, j // s.page_size].item())
        return inp.k[page, j % s.page_size, hkv]
    if s.varlen:
        return inp.k[seq_offsets(s.k_capacity())[b] + j, hkv]
    return inp.k[b, j, hkv]


def _real(x: torch.Tensor, descale: torch.Tensor | None, b: int, hkv: int) -> torch.Tensor:
    """A row's real values in float32 (fp8 times its descale)."""
    d = float(descale[b, hkv]) if descale is not None else 1.0
    return x.float() * d


def _store(row: torch.Tensor, real: torch.Tensor, descale: torch.Tensor | None, b: int, hkv: int) -> None:
    d = float(descale[b, hkv]) if descale is not None else 1.0
    raw = real / d
    if row.dtype == torch.float8_e4m3fn:
        raw = raw.clamp(-FP8_MAX, FP8_MAX)
    row.copy_(raw.to(row.dtype))


def trap_q_row(s: Scenario, inp: Inputs, rng: random.Random) -> str:
    """Replace one query row with new values of 2.5x the usual spread; returns where."""
    b, i, h, hkv, _j = _pick_row(s, rng)
    row = _q_row(s, inp, b, i, h)
    g = torch.Generator(device=row.device)
    g.manual_seed(rng.getrandbits(62))
    new = torch.randn(row.shape, generator=g, device=row.device) * 2.5
    _store(row, new, inp.q_descale, b, hkv)
    return f"q row (sequence {b}, row {i}, head {h})"


def trap_k_row(s: Scenario, inp: Inputs, rng: random.Random) -> str:
    """Make one key row 4x a query row that sees it (it then dominates that query); returns where."""
    b, i, h, hkv, j = _pick_row(s, rng)
    q = _real(_q_row(s, inp, b, i, h), inp.q_descale, b, hkv)
    _store(_k_row(s, inp, b, j, hkv), 4.0 * q, inp.k_descale, b, hkv)
    return f"k row (sequence {b}, key {j}, KV head {hkv}) = 4 x q row {i} head {h}"


def trap_q_element(s: Scenario, inp: Inputs, rng: random.Random) -> str:
    """Change one element of one query row by a large amount (8 in real units, sign of its own):
    a fingerprint that samples words of q misses one element far more often than a whole row."""
    b, i, h, hkv, _j = _pick_row(s, rng)
    row = _q_row(s, inp, b, i, h)
    cols = rng.sample(range(row.shape[-1]), 4 if row.dtype == torch.float8_e4m3fn else 1)  # fp8 clamps:
    real = _real(row, inp.q_descale, b, hkv)                          # four of its largest values
    for d in cols:
        real[d] = 8.0 if float(real[d]) <= 0 else -8.0
    _store(row, real, inp.q_descale, b, hkv)
    return f"q element (sequence {b}, row {i}, head {h}, column {cols[0]})"


def trap_k_element(s: Scenario, inp: Inputs, rng: random.Random) -> str:
    """Change one element of one key row so that this key dominates a query that sees it: the
    element becomes 24 (real units) with the sign of that query's element in the same column."""
    b, i, h, hkv, j = _pick_row(s, rng)
    q = _real(_q_row(s, inp, b, i, h), inp.q_descale, b, hkv)
    d = int(q.abs().argmax())
    row = _k_row(s, inp, b, j, hkv)
    real = _real(row, inp.k_descale, b, hkv)
    real[d] = 24.0 if float(q[d]) >= 0 else -24.0
    _store(row, real, inp.k_descale, b, hkv)
    return f"k element (sequence {b}, key {j}, KV head {hkv}, column {d}) for q row {i} head {h}"


# After timing, in order, stopping at the first failure: whole rows (caught by any fingerprint that
# misses them), then single elements (which a sampled fingerprint almost never covers).
TRAPS = (trap_q_row, trap_k_row, trap_q_element, trap_k_element, trap_q_element)


def trap_rng() -> random.Random:
    return random.Random(int.from_bytes(os.urandom(8), "little"))


def sets_for(k_max: int, bytes_per_set: float, base: int, free_bytes: float, share: float = 0.25) -> int:
    """Input sets to hold: at least `base` (the L2 rule) and `k_max` (one set per call of the
    longest batch, so no batch repeats a set), within `share` of the free device memory."""
    cap = max(base, int(share * free_bytes // max(bytes_per_set, 1.0)))
    return max(base, min(k_max, cap))
