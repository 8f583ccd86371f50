"""A serving row's work and its bound: attended keys, FLOPs, least HBM bytes, and the time the datasheet allows.

Per sequence b with Sq_b queries and Sk_b cached keys, query i sits at position p = Sk_b - Sq_b + i and
attends keys lo..hi: hi = p (causal; else Sk_b - 1), lo = 0, or with attention_chunk C: lo = C floor(p / C),
hi = min(hi, lo + C - 1). Then
    attended = sum over rows of (hi - lo + 1)                       (one head)
    flops    = 2 Hq attended (Dqk + Dv)                             (q.k [+ qv.v] and p.v; 2 per multiply-add)
    bytes    = K/V: the keys some query of the sequence sees, once: seen_b Hkv (D + Dv) e
             + Q: T Hq D e (+ qv: T Hq Dv e) + O: T Hq Dv 2 + LSE: T Hq 4           (T = sum Sq_b, e = element bytes)
The page table, cache_seqlens and cu_seqlens (< 0.01% of any row) are left out, and so is the part of a
page past a sequence's end: this is the least traffic any kernel needs. The bound is the slower of reading
`bytes` at the datasheet HBM bandwidth and doing `flops` at the datasheet dense tensor rate (peaks.py);
`limit` says which ("bytes": decode-heavy, the issue's 85%-of-HBM rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ELEM = {"bf16": 2, "fp16": 2}
OUT_BYTES, LSE_BYTES = 2, 4


def spans(sq: int, sk: int, causal: bool, chunk: int):
    """(lo, hi) int64 arrays [sq]: the first and last key each query row of one sequence attends."""
    p = np.arange(sq, dtype=np.int64) + (sk - sq)
    hi = p.copy() if causal else np.full(sq, sk - 1, dtype=np.int64)
    lo = np.zeros(sq, dtype=np.int64)
    if chunk:
        lo = (p // chunk) * chunk
        hi = np.minimum(hi, lo + chunk - 1)
    return lo, np.minimum(hi, sk - 1)


def _per_seq(row):
    for sq, sk in zip(row.q_lens(), row.k_lens()):
        lo, hi = spans(sq, sk, row.causal, row.attention_chunk)
        n = np.maximum(0, hi - lo + 1)
        seen = int(hi[n > 0].max() - lo[n > 0].min() + 1) if (n > 0).any() else 0
        yield sq, int(n.sum()), seen


def attended(row, prefill_only: bool = False) -> int:
    """Sum over query rows (one head) of the keys each attends; prefill_only: sequences of > 1 query."""
    return sum(a for sq, a, _ in _per_seq(row) if not prefill_only or sq > 1)


def flops(row, prefill_only: bool = False) -> float:
    return 2.0 * row.heads_q * attended(row, prefill_only) * (row.dqk + row.dv)


def bytes_parts(row) -> dict[str, float]:
    """The least HBM traffic of the step by part (the module docstring): kv, q, o, lse."""
    e = ELEM[row.dtype]
    t = sum(row.q_lens())
    seen = sum(s for _, _, s in _per_seq(row))
    return {"kv": float(seen * row.heads_kv * (row.head_dim + row.dv) * e),
            "q": float(t * row.heads_q * (row.head_dim + (row.dv if row.qv else 0)) * e),
            "o": float(t * row.heads_q * row.dv * OUT_BYTES), "lse": float(t * row.heads_q * LSE_BYTES)}


def min_bytes(row) -> float:
    return sum(bytes_parts(row).values())


@dataclass(frozen=True)
class Bound:
    bytes: float
    flops: float
    bytes_ms: float      # bytes at the datasheet HBM bandwidth
    flops_ms: float      # flops at the datasheet dense rate
    hbm_gbps: float
    tflops: float

    @property
    def ms(self) -> float:
        return max(self.bytes_ms, self.flops_ms)

    @property
    def limit(self) -> str:
        return "bytes" if self.bytes_ms >= self.flops_ms else "flops"

    def rates(self, time_ms: float | None) -> dict:
        """What a time reaches: GB/s, TFLOP/s, their fractions of the peaks, and bound / time."""
        if not time_ms:
            return {}
        gbps, tf = self.bytes / time_ms / 1e6, self.flops / time_ms / 1e9
        return {"gbps": gbps, "tflops": tf, "frac_hbm": gbps / self.hbm_gbps, "frac_flops": tf / self.tflops,
                "frac_bound": self.ms / time_ms}


def bound(row, hbm_gbps: float, tflops: float) -> Bound:
    """The row's bound at the given peaks (GB/s = 1e9 B/s, TFLOP/s)."""
    b, f = min_bytes(row), flops(row)
    return Bound(b, f, b / (hbm_gbps * 1e9) * 1e3, f / (tflops * 1e12) * 1e3, hbm_gbps, tflops)


def bound_for_gpu(row, gpu: str | None) -> Bound | None:
    """The bound at the datasheet peaks of `gpu` (torch's device name); None for an unknown GPU."""
    from .peaks import peaks_for
    p = peaks_for(gpu)
    return None if p is None else bound(row, p.hbm_gbps, p.tflops(row.dtype))
