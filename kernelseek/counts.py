"""A scenario's counts: the keys each query row sees, FLOPs, and the least memory traffic.

Scenario (scenarios.py) inherits these; they read only its fields (q_lens, k_ranges, heads, head
dims, dtype, the effective window). The FLOP count is what TFLOP/s is computed from, min_bytes what
GB/s is; the fail lines for impossible speed (peaks.py) divide them by a row's time.
"""
from __future__ import annotations

import numpy as np

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}


class Counts:
    """Mixin for Scenario: the counts derived from its fields."""

    def _visible(self):
        """Per sequence, each query row's first and last visible key (numpy arrays; hi < lo: none).
        A row's visible keys are a range that slides with the row, so their union is one range."""
        left, right = self.effective_window
        for sq, (k0, k1) in zip(self.q_lens(), self.k_ranges()):
            sk = max(0, k1 - k0)
            diag = np.arange(sq, dtype=np.int64) + sk - sq
            lo = np.zeros_like(diag) if left < 0 else np.maximum(0, diag - left)
            hi = np.full_like(diag, sk - 1) if right < 0 else np.minimum(sk - 1, diag + right)
            chunk = getattr(self, "attention_chunk", 0)
            if chunk > 0:  # the row's own chunk (floor division, as kseek.h)
                c0 = diag // chunk * chunk
                lo, hi = np.maximum(lo, c0), np.minimum(hi, c0 + chunk - 1)
            yield lo, hi

    def attended(self) -> int:
        """Sum over all query rows (one head) of the number of keys each row attends to."""
        return sum(int(np.maximum(0, hi - lo + 1).sum()) for lo, hi in self._visible())

    def _seen(self) -> tuple[int, int]:
        """(query rows that see at least one key, keys seen by at least one query row)."""
        spans = [(int(ok.sum()), int(hi[ok].max() - lo[ok].min() + 1))
                 for lo, hi in self._visible() for ok in [hi >= lo] if ok.any()]
        return sum(q for q, _ in spans), sum(k for _, k in spans)

    def flops(self) -> float:
        """2 FLOPs per multiply-add, both products: 2*Hq*attended*(D + Dv)."""
        return 2.0 * self.heads_q * self.attended() * (self.head_dim + self.dv)

    def min_bytes(self) -> float:
        """The least traffic a kernel needs: the query rows that see a key and the key rows some query
        sees (a sliding window over a long cache reads only the window), and the descales, read once;
        O (and fp32 LSE) of every row written once. The fail line for bandwidth (peaks.py) divides it."""
        eb = DTYPE_BYTES[self.dtype]
        ob = 2
        rows_q = sum(self.q_lens())
        seen_q, rows_k = self._seen()
        q = seen_q * self.heads_q * self.head_dim * eb
        kv = rows_k * self.heads_kv * (self.head_dim + self.dv) * eb
        o = rows_q * self.heads_q * self.dv * ob + rows_q * self.heads_q * 4
        descales = 3 * self.n_batch * self.heads_kv * 4 if self.dtype == "fp8" else 0
        return float(q + kv + o + descales)

    def kv_bytes(self) -> float:
        """K and V bytes actually attended over (decode's figure of merit)."""
        rows_k = sum(max(0, k1 - k0) for k0, k1 in self.k_ranges())
        return float(rows_k * self.heads_kv * (self.head_dim + self.dv) * DTYPE_BYTES[self.dtype])
