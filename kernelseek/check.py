"""The pass rule: FlashAttention-3's forward test, with its numbers kept for the results table.

A kernel's O passes iff it has no NaN/inf and
    max|o - o32| <= k * max|o_lowp - o32| + atol
where o32 is the fp32 reference, o_lowp the low-precision reference (its own error is what a fair
kernel may have), k = tolerance_factor(s) (2; 3 with softcap; 4 for fp8) and atol is
FlashAttention's forward atol: 2 * max|(x + 0.3 - 0.3) - x| evaluated in the output dtype with
x = o32 cast to that dtype, i.e. twice the output dtype's rounding error at the output's magnitude.

LSE (when the kernel wrote one; every entry is compared): where lse32 is -inf (a row with no
visible key) lse must be -inf too; elsewhere it must be finite with
    |lse - lse32| <= k * max|lse_lowp - lse32| + 1e-3.
The 1e-3 (nats) floor keeps rows where the low-precision reference happens to be nearly exact
(a row with a single key, say) from demanding bit-exactness of a kernel's fp32 exp2/log2 path; it
is far below the ~1e-2 LSE errors a wrong mask or a missing key produces. NaN anywhere fails.
fp8 rows add FP8_LSE_REL x |lse32| per row: Hopper's fp8 tensor cores accumulate q.k with less than
fp32's precision, an error that grows with the logit and that the low-precision reference (exact
products, fp32 sums) does not have. Measured on the H200 (tools/fp8_trap_probe.py, hd256, a key
planted at 4x a query row): FlashAttention-3's LSE error was 0.067-0.108 at |lse| 35-57, 0.15-0.22%
of |lse|, equal to ours to 1e-4, while the old bound was 0.027-0.52 (fail: an honest kernel, FA3
itself, failed the near-repeat trap). A memoizer's stale LSE is off by tens of nats there.

Errors are computed in float64, so the comparison with the bound is exact for the tensors given.
Reasons name the numbers and the worst element (batch, row, head, column).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import torch

from .inputs import seq_offsets, out_dtype_for
from .scenarios import Scenario

LSE_ATOL = 1e-3  # nats; see the module docstring
FP8_LSE_REL = 4e-3  # fp8 rows: of |lse32|, per row (twice the 0.22% measured; the module docstring)


@dataclass
class CheckResult:
    passed: bool
    reason: str            # why it failed (or the margin it passed with)
    max_err: float         # max |o - o32| over the finite entries of o
    ref_err: float         # max |o_lowp - o32|: the low-precision reference's own error
    err_bound: float       # k * ref_err + atol: the pass threshold
    err_ratio: float       # max_err / err_bound (<= 1 passes)
    lse_err: float | None  # max |lse - lse32| where both are finite; None when no lse was given
    nonfinite: int         # NaN/inf entries in o (poison left = unwritten)


def tolerance_factor(s: Scenario) -> float:
    """k of the pass rule: 2; 3 with softcap; 4 for fp8 (FlashAttention-3's choices)."""
    if s.dtype == "fp8":
        return 4.0
    return 3.0 if s.softcap > 0 else 2.0


def fwd_atol(o32: torch.Tensor, out_dtype: torch.dtype) -> float:
    """FlashAttention's forward atol: 2 * max|(x + 0.3 - 0.3) - x|, x = o32 in the output dtype."""
    if o32.numel() == 0:
        return 0.0
    x = o32.to(out_dtype)
    return 2.0 * ((x + 0.3 - 0.3) - x).abs().max().double().item()


def _where_o(s: Scenario, flat: int, shape) -> str:
    """Flat index into o ([B,Sq,Hq,Dv] or varlen [total_q,Hq,Dv]) -> 'batch b row i head h col c'."""
    idx = []
    for n in reversed(shape):
        idx.append(flat % n)
        flat //= n
    idx.reverse()
    if s.varlen:
        off = seq_offsets(s.q_lens())
        t, h, c = idx
        b = bisect.bisect_right(off, t) - 1
        return f"batch {b} row {t - off[b]} (packed row {t}) head {h} col {c}"
    b, i, h, c = idx
    return f"batch {b} row {i} head {h} col {c}"


def _where_lse(s: Scenario, flat: int, shape) -> str:
    """Flat index into lse ([B,Hq,Sq] or varlen [Hq,total_q]) -> 'batch b row i head h'."""
    if s.varlen:
        h, t = divmod(flat, shape[1])
        off = seq_offsets(s.q_lens())
        b = bisect.bisect_right(off, t) - 1
        return f"batch {b} row {t - off[b]} head {h}"
    b, rest = divmod(flat, shape[1] * shape[2])
    h, i = divmod(rest, shape[2])
    return f"batch {b} row {i} head {h}"


def _max_abs(x: torch.Tensor) -> float:
    return x.abs().max().item() if x.numel() else 0.0


def _check_lse(s: Scenario, lse, lse32, lselp, k: float) -> tuple[list[str], float]:
    """Failure messages (empty = pass) and the max |lse - lse32| over finite pairs."""
    if tuple(lse.shape) != tuple(lse32.shape):
        return [f"lse shape {tuple(lse.shape)} != expected {tuple(lse32.shape)}"], float("nan")
    x, r, rl = lse.double(), lse32.double(), lselp.double()
    ref_empty = torch.isneginf(r)
    nan = torch.isnan(x)
    fails = []
    n_nan = int(nan.sum())
    if n_nan:
        first = int(nan.flatten().nonzero()[0])
        fails.append(f"lse: {n_nan} NaN, first at {_where_lse(s, first, x.shape)}")
    not_empty = ref_empty & ~torch.isneginf(x) & ~nan
    if int(not_empty.sum()):
        first = int(not_empty.flatten().nonzero()[0])
        fails.append(f"lse: {int(not_empty.sum())} rows not -inf where reference is -inf "
                     f"(no visible key), first at {_where_lse(s, first, x.shape)}")
    bad_inf = ~ref_empty & torch.isinf(x)
    if int(bad_inf.sum()):
        first = int(bad_inf.flatten().nonzero()[0])
        fails.append(f"lse: {int(bad_inf.sum())} rows infinite where reference is finite, "
                     f"first at {_where_lse(s, first, x.shape)}")
    both = ~ref_empty & torch.isfinite(x)
    diff = torch.where(both, (x - r).abs(), torch.zeros_like(x))
    lse_err = _max_abs(diff)
    ref_lse_err = _max_abs(torch.where(~ref_empty, (rl - r).abs(), torch.zeros_like(r)))
    bound = k * ref_lse_err + LSE_ATOL
    rel = FP8_LSE_REL if s.dtype == "fp8" else 0.0
    over = diff - (bound + rel * torch.where(both, r.abs(), torch.zeros_like(r)))   # > 0: out of bound
    if over.numel() and float(over.max()) > 0:
        worst = int(over.flatten().argmax())
        err = float(diff.flatten()[worst])
        extra = f" + {rel:g} x |lse32| {abs(float(r.flatten()[worst])):.4g}" if rel else ""
        fails.append(f"lse error {err:.4g} > bound {bound + rel * abs(float(r.flatten()[worst])):.4g} ({k:g} x ref err "
                     f"{ref_lse_err:.4g} + {LSE_ATOL:g}{extra}) at {_where_lse(s, worst, x.shape)}")
    return fails, lse_err


def check_output(s: Scenario, o: torch.Tensor, lse: torch.Tensor | None,
                 ref32: tuple, reflp: tuple) -> CheckResult:
    """Apply the pass rule to a kernel's (o, lse) given the (o, lse) of both references."""
    o32, lse32 = ref32
    olp, lselp = reflp
    k = tolerance_factor(s)
    r = o32.double()
    ref_err = _max_abs(olp.double() - r)
    atol = fwd_atol(o32, out_dtype_for(s))
    bound = k * ref_err + atol
    bound_txt = f"bound {bound:.4g} ({k:g} x ref err {ref_err:.4g} + atol {atol:.4g})"
    if tuple(o.shape) != tuple(o32.shape):
        return CheckResult(False, f"{s.name}: output shape {tuple(o.shape)} != expected {tuple(o32.shape)}",
                           float("nan"), ref_err, bound, float("nan"), None, 0)
    x = o.detach().double()
    finite = torch.isfinite(x)
    nonfinite = int((~finite).sum())
    diff = torch.where(finite, (x - r).abs(), torch.zeros_like(r))
    max_err = _max_abs(diff)
    ratio = max_err / bound if bound > 0 else (0.0 if max_err == 0 else math.inf)
    fails = []
    if nonfinite:
        n_nan = int(torch.isnan(x).sum())
        first = int((~finite).flatten().nonzero()[0])
        fails.append(f"{n_nan} NaN and {nonfinite - n_nan} inf in output (unwritten or computed), "
                     f"first at {_where_o(s, first, x.shape)}")
    worst = int(diff.flatten().argmax()) if diff.numel() else 0
    where = _where_o(s, worst, x.shape) if diff.numel() else "-"
    if max_err > bound:
        fails.append(f"max error {max_err:.4g} > {bound_txt} at {where} "
                     f"(got {x.flatten()[worst].item():.6g}, ref {r.flatten()[worst].item():.6g})")
    lse_err = None
    if lse is not None:
        lse_fails, lse_err = _check_lse(s, lse, lse32, lselp, k)
        fails += lse_fails
    if fails:
        reason = f"{s.name}: " + "; ".join(fails)
    else:
        reason = f"{s.name}: max error {max_err:.4g} <= {bound_txt}, worst at {where}"
    return CheckResult(not fails, reason, max_err, ref_err, bound, ratio, lse_err, nonfinite)
