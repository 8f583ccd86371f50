"""The parent's own clock against the candidate's claimed time: "timing not corroborated".

The candidate worker measures the candidate's time in the process that runs the candidate's host
code, so a library that reached the interpreter could report any number. After each timed row the
parent (evaluate.py) asks each worker for a *burst*: `calls` back-to-back calls of the implementation
it has just timed, rotating over the same input sets, ended by a device-wide synchronize
(worker._burst). The parent times every burst request on its monotonic clock, from the write of
the request to the reply, so the worker can make a burst longer but never shorter than its work.

Calibration, from the trusted baseline worker (it never loads candidate code) on the same row:
  fixed_ms     the wall time of an empty burst (0 calls): pipe, JSON, interpreter, synchronize;
  overhead_ms  per call, max(0, (wall of its burst - fixed) / calls - its claimed per-call time):
               what a burst costs per call beyond the timed per-call time (host dispatch between
               calls, clocks); 0 when the burst was faster (warmer caches).
The candidate's burst then gives its externally implied per-call time
  implied_ms = (wall - fixed) / calls - overhead_ms,
and the row fails when implied_ms > claimed time_ms * (1 + REL_SLACK) + ABS_SLACK_MS.

Slack, from real numbers: on the H200 (tests/adversarial/results_h200.json, 40 honest rows from
0.008 to 1.3 ms per call, cuDNN included) the wall-clock per call over a batch until the device is
idle (`sync_ms`) is 1.00-1.02 x the per-call time on the stream's events, so a burst of one
implementation agrees with its timed per-call time within a few percent; what moves more is host
dispatch, which drifts between moments by up to 35% on host-bound calls (FA4's Python dispatch,
timing.py). REL_SLACK = 0.5 covers that with room; ABS_SLACK_MS covers timer and scheduling jitter
of a burst of BURST_MS (5 ms of jitter over 100 ms of calls). Every row records the walls, the calls
and implied/claimed (`corroboration`), so the slack can be tightened from GPU runs.

CUDA-graph time (eval --graph; graph_speedup, the goal's graph measure) is judged the same way: the
parent picks m = graph_sets(min_bytes), the calls per graph (the sets that pass 3x the L2, at most 8,
which every worker's pool has: a count the worker named could be inflated to divide the wall by);
each worker captures a graph of m calls (one request, not judged) and replays it ceil(n / m) times
back to back (the next, judged), n = burst_calls(graph_ms); the trusted worker does it for its
fastest graphed baseline (the overhead), with the same empty burst as `fixed_ms`. A graph time the
parent's clock does not corroborate, or cannot (no capture, a wrong call count, no calibration, a row
that did not pass), is moved out of the row into `corroboration.graph` (worker_pair._drop_graph): the
row keeps its corroborated per-call time, and graph_speedup is None, so no goal judges it.

What this bounds: a candidate that does its work and lies about its time (a patched timer, divided
numbers) cannot claim more than about 1.5x: its bursts take the true time. What it cannot bound: code
in the candidate process that recognises a burst request and skips the work in it, which only code
that has escaped the host-code gate (host_gate.py) could do. See README, "Results that cannot be
forged".
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# The candidate's numbers no parent check bounds (kept, marked in each judged row's corroboration
# as "unchecked"): they feed no speedup the goal, the Stop hook, the triggers or the ledger judge;
# p10/p90 only set the noise of `triage --compare` and the p10 ratio of repeatability reports,
# host_ms only bounds.py's listing, sync_ms only the accounting check. kernel_ms is bounded (accounting).
UNCHECKED = ("time_p10_ms", "time_p90_ms", "host_ms", "sync_ms")
REL_SLACK = 0.5
ABS_SLACK_MS = 0.005
BURST_MS = 100.0          # a burst lasts about this long at the claimed per-call time
MIN_CALLS, MAX_CALLS = 20, 20000


def burst_calls(per_call_ms: float) -> int:
    """Calls in a burst for a claimed per-call time (ms): about BURST_MS of work, within bounds."""
    if not per_call_ms or per_call_ms <= 0 or not math.isfinite(per_call_ms):
        return MAX_CALLS
    return int(min(MAX_CALLS, max(MIN_CALLS, math.ceil(BURST_MS / per_call_ms))))


@dataclass
class Verdict:
    ok: bool
    claimed_ms: float            # the candidate's claimed per-call time
    implied_ms: float            # per call, from the parent's clock, calibrated
    wall_ms: float               # the candidate's burst, parent's clock
    calls: int
    fixed_ms: float              # the baseline worker's empty burst
    overhead_ms: float           # per call, from the baseline's burst (0 without a baseline)
    baseline_wall_ms: float | None = None
    baseline_calls: int | None = None
    baseline_claimed_ms: float | None = None
    reason: str = ""

    def as_dict(self) -> dict:
        d = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        d["ratio"] = round(self.implied_ms / self.claimed_ms, 3) if self.claimed_ms else None
        return d


def overhead_ms(wall_ms: float, calls: int, claimed_ms: float, fixed_ms: float) -> float:
    """Per-call cost of a trusted burst beyond its claimed per-call time (>= 0)."""
    if calls <= 0:
        return 0.0
    return max(0.0, (wall_ms - fixed_ms) / calls - claimed_ms)


def judge(claimed_ms: float, wall_ms: float, calls: int, fixed_ms: float,
          baseline: tuple[float, int, float] | None = None, what: str = "timing") -> Verdict:
    """The verdict on one row. `baseline`: (its burst's wall ms, its calls, its claimed per-call
    ms), or None when no baseline was timed (the overhead is then taken as 0, the strict side).
    `what` names the time judged in the reason ("timing": per call; "CUDA-graph time")."""
    over = overhead_ms(baseline[0], baseline[1], baseline[2], fixed_ms) if baseline else 0.0
    implied = (wall_ms - fixed_ms) / max(calls, 1) - over
    ok = implied <= claimed_ms * (1 + REL_SLACK) + ABS_SLACK_MS
    v = Verdict(ok, claimed_ms, implied, wall_ms, calls, fixed_ms, over,
                *(baseline if baseline else (None, None, None)))
    if not ok:
        v.reason = (f"{what} not corroborated: {calls} calls took {wall_ms:.1f} ms on the parent's clock, "
                    f"{implied:.4f} ms per call after the trusted worker's overhead ({fixed_ms:.1f} ms + "
                    f"{over:.4f} ms per call), but the candidate's worker claimed {claimed_ms:.4f} ms "
                    f"(allowed up to {claimed_ms * (1 + REL_SLACK) + ABS_SLACK_MS:.4f})")
    return v


def graph_sets(min_bytes: float) -> int:
    """Calls per graph in a graph burst: the sets that pass 3x the L2, at most 8 (timing.sets_needed,
    the timing pool's first sets, so every worker has them). The parent picks it, not the worker: a
    worker that named its own count could divide the burst's wall by a larger one."""
    from .timing import sets_needed
    return min(sets_needed(min_bytes), 8)


def accounting(time_ms, kernel_ms, sync_ms) -> str:
    """Why a candidate's per-call numbers do not add up ("" when they do): its work ran off the timed
    stream (sync_ms), the profiler saw none of it (kernel_ms None) or more device time than the
    per-call time (kernel_ms). The worker applies it to its own timing; the parent re-applies it to
    the reply. Against a forger only the last part counts there: a large forged kernel_ms would make
    kernel_speedup small and spare a fast row the review flag (evaluate.make_row), and this keeps it
    within 1.25x of the corroborated per-call time (a forger reports a consistent sync_ms anyway)."""
    if sync_ms is not None and sync_ms > 1.5 * time_ms + 0.05:   # (the worker always has sync_ms)
        return (f"work escapes the timed stream: per call {sync_ms:.4f} ms until the whole device "
                f"is idle, but {time_ms:.4f} ms on the stream's events")
    if kernel_ms is None:
        return "the profiler saw no kernel time for the candidate: its work cannot be accounted for"
    if kernel_ms > 1.25 * time_ms + 0.005:
        return (f"work escapes the timed stream: the kernels' device time {kernel_ms:.4f} ms per call "
                f"exceeds the per-call time {time_ms:.4f} ms measured on the stream")
    return ""
