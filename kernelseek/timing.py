"""Timing on the GPU: per-call time with CUDA events, kernel-only device time, host time.

What is measured, per implementation (candidate or baseline), all in one process on one stream:
- `time_ms`: the median over batches of (event elapsed around K back-to-back calls) / K: what a
  user of the function sees, launches and host work inside the call included. p10 and p90 too.
- `kernel_ms`: the device time of the kernels alone, from the profiler's kernel records (sum of
  kernel durations over a batch of calls / calls).
- `host_ms`: host wall time per call to enqueue a batch (perf_counter, no synchronization inside).
Calls rotate over several input sets whose bytes together pass 3x the L2, and implementations are
interleaved batch by batch (ABAB...), so clock drift and thermal state hit all of them alike. Warm-up calls first (at least `warmup`
calls and `warmup_ms` of them per implementation), so JIT compilation of baselines and clock ramp-up
stay out of every number. While timing, the process is pinned to one CPU and Python's garbage
collector is paused: host-bound baselines (FA4's Python dispatch costs 0.1-0.5 ms per call) otherwise
move by tens of percent between runs with scheduler migrations and collection pauses.
Each timed batch starts behind a short GPU sleep ("gate", about twice the median host enqueue time
of ENQ_SAMPLES single calls, at most 1 ms) queued before the first event: the host enqueues the first
call while the GPU still sleeps, so the batch measures the steady state of back-to-back calls
(max(host, device) per call) instead of charging one call's host latency to the batch (measured: it
moved FA4's per-call time by up to 35% between runs). A call whose host side is slower than its kernels
still shows that cost, less the share the gate hides (about two calls' host time per batch).
Host-bound calls are sampled four times longer (batch_plan): their per-call time follows the host.

No timed call can be answered from an earlier call (the defence against memoized inputs, issue 20).
A kernel may remember what it has seen: by pointer (skip a call whose buffers it has computed
once), or by content (a fingerprint of a few bytes of q, k and v, read back to the host or hashed
on the GPU, and a stored O and LSE copied out when it matches). Rotating a fixed set of inputs
lets both win, since every set comes back (a memoizer reached 14,500 TFLOP/s on bench26). The
design, with `Hooks` as the seam the worker fills in (defence.DefenceHooks, fresh.py):
  1. Fresh content for every timed call. A batch of K calls uses K distinct input sets, each once;
     before every batch (outside the events) the content of those K sets is replaced in place with
     new random values drawn on the GPU from a generator seeded from os.urandom (fresh.refresh_),
     and the L2 is flushed (so inputs come from HBM, as the bandwidth fail line assumes). The pool
     holds at least as many sets as the longest batch (Hooks.grow; batches are capped at 64 calls,
     and the sets at a quarter of the free device memory), so no batch repeats a set; a
     call never sees content any earlier call saw, whatever it fingerprints, on the host or on the
     GPU, and pointers alone say nothing about content. A memoizer then computes every timed call.
  2. Verification of timed calls. Each set has its own O and LSE, scrambled with finite random
     values before its batch; after a sample of the candidate's batches (each with probability 1/8
     from a generator seeded from os.urandom, at most 3, and always the last) the outputs of a
     random call of that batch are checked against the reference on that set's content. A kernel that skips work on a
     pointer it has seen, or answers from any memory, returns stale output there and fails.
  3. Near-repeat traps after timing (defence.after_timing, fresh.trap_*): first the set's whole
     content is replaced in place (same pointers) and checked; then five near repeats of the
     content the kernel has just computed: one row of q, one key row, then single elements of q
     and of k (large changes, a key made to dominate a query that sees it), each checked. A
     memoizer whose fingerprint misses the change returns its stored answer and fails (a sampled
     fingerprint covers a whole row fairly often on small inputs, a single element almost never:
     the H200 run of memo_gpu.cu evaded the row traps alone on one small row); one that hashes
     everything recomputes, which is correct and, by 1., never faster than honest.
  4. CUDA-graph timing (time_graph) keeps its fixed pointers: between replays the harness
     refreshes the content of every set the graph reads, flushes the L2 and verifies sampled
     outputs, exactly as between eager batches.
The same refresh and flush run before the baselines' batches, so every implementation is timed
under the same cache state. The cost (refresh, flush, verification; seconds per row) is reported by
the worker in `phases_s` and kept in the run's meta. Warm-up and the per-call estimate may repeat
content (the estimate refreshes its set before each call): they are not measured results. Which
option this is: no timed call can be answered from an earlier call's result (1, 4), and the harness
catches a kernel that tries (2, 3). `kernelseek eval --no-defence` times the old way, only to
measure what all this costs (the rows are then never trusted by a goal).
"""
from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Timing:
    time_ms: float          # median per call
    p10_ms: float
    p90_ms: float
    kernel_ms: float | None  # device time of kernels per call (None if the profiler failed)
    host_ms: float          # host enqueue time per call
    sync_ms: float          # host wall per call until the whole device is idle (catches other streams)
    calls: int              # calls timed in total
    batches: int

    def as_dict(self, prefix: str = "") -> dict:
        return {f"{prefix}time_ms": self.time_ms, f"{prefix}time_p10_ms": self.p10_ms,
                f"{prefix}time_p90_ms": self.p90_ms, f"{prefix}kernel_ms": self.kernel_ms,
                f"{prefix}host_ms": self.host_ms, f"{prefix}sync_ms": self.sync_ms}


class Hooks:
    """What the timing loop calls outside its timed regions; these defaults are the undefended loop
    (no refresh, no verification, torch's profiler for kernel time). The worker's defence overrides
    them (see the module docstring)."""
    distinct_sets = False       # True: a batch never uses a set twice (the pool grows to the batch)

    def window(self, name: str):
        """A context entered around every call of `name` (the run-time check's window)."""
        return contextlib.nullcontext()

    def before_batch(self, name: str, sets: list[int]) -> None:
        """Before a batch of `name` on `sets` (each used once): refresh their content, flush the L2."""

    def after_batch(self, name: str, sets: list[int], batch: int, last: bool) -> None:
        """After a batch completed: verify a sampled call's output."""

    def grow(self, n_sets: int, want: int) -> int:
        """Make at least `want` input sets exist (the pool has n_sets); returns how many exist."""
        return n_sets

    def kernel_ms(self, name: str, call: Callable[[int], None], sets: list[int]) -> float | None:
        """Device time per call of the kernels of `call` on `sets`."""
        return kernel_time_ms(call, len(sets), len(sets))


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def sets_needed(bytes_per_set: float, l2_bytes: float = 60e6, cap: int = 8) -> int:
    """Input sets to rotate so that their total passes 3x the L2 (at least 2, at most cap)."""
    import math
    return max(2, min(cap, math.ceil(3 * l2_bytes / max(bytes_per_set, 1.0))))


def kernel_time_ms(call: Callable[[int], None], n_sets: int, calls: int) -> float | None:
    """Device time of the kernels launched by `calls` calls, per call, from torch's profiler."""
    import torch
    try:
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(calls):
                call(i % n_sets)
            torch.cuda.synchronize()
        total_us = 0.0
        for evt in prof.events():                        # kernels, memcpys and memsets alike
            if "CUDA" in str(getattr(evt, "device_type", "")):
                total_us += getattr(evt, "device_time", None) or getattr(evt, "cuda_time", 0.0) or 0.0
        if total_us <= 0:
            return None
        return total_us / 1000.0 / calls
    except Exception:
        return None


@contextlib.contextmanager
def steady_host():
    """Pin this process to one CPU and pause the garbage collector; restore both afterwards.

    KSEEK_TIMING_CPU picks the CPU (default: the highest-numbered one this process may use)."""
    old = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    was = gc.isenabled()
    try:
        if old:
            cpu = int(os.environ.get("KSEEK_TIMING_CPU", max(old)))
            if cpu not in old:
                raise ValueError(f"KSEEK_TIMING_CPU={cpu} is not among this process's CPUs {sorted(old)}")
            os.sched_setaffinity(0, {cpu})
        gc.collect()
        gc.disable()
        yield
    finally:
        if was:
            gc.enable()
        if old:
            os.sched_setaffinity(0, old)


_GATE_CYCLES_PER_MS: list[float] = []


def _gate_cycles_per_ms() -> float | None:
    """GPU clock cycles per millisecond of torch.cuda._sleep, measured once (None: no _sleep)."""
    import torch
    if not hasattr(torch.cuda, "_sleep"):
        return None
    if not _GATE_CYCLES_PER_MS:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000)                       # wake the clocks
        a.record()
        torch.cuda._sleep(2_000_000)
        b.record()
        b.synchronize()
        _GATE_CYCLES_PER_MS.append(2_000_000 / max(a.elapsed_time(b), 1e-3))
    return _GATE_CYCLES_PER_MS[0]


ENQ_SAMPLES = 7      # single calls whose median host enqueue time sets the gate and the batch plan


def gate_ms(enq_ms: float) -> float:
    """GPU sleep before a timed batch (ms): about two calls' host enqueue time, within [0.02, 1].

    `enq_ms` is a median over several calls (ENQ_SAMPLES): one sample caught in a slow host moment
    makes a gate of up to 1 ms, which for FA4 on bench26 row 20 (0.14 ms kernels, 14-call batches)
    hides most of a batch's host cost. The median did not stop rows 20/22 from moving between runs
    (NOTES, v10 measured again): their host time itself drifts."""
    return min(1.0, max(0.02, 2.0 * enq_ms))


HOST_BOUND = 0.7      # enqueue time / per-call time at which a call counts as host-bound
HOST_BOUND_SAMPLING = 4  # host-bound calls get this many times the batches and budget


def batch_plan(est: dict[str, float], enq: dict[str, float], *, budget_s: float, min_batches: int,
               max_batches: int, target_batch_ms: float, max_k: int = 200) -> tuple[dict[str, int], dict[str, int]]:
    """Calls per batch (k) and batches (nb) per implementation, from its per-call estimate `est` and
    one call's host enqueue time `enq` (both ms).

    A batch lasts about target_batch_ms; the batches together about budget_s, within [min_batches,
    max_batches]; a batch has at most max_k calls (one per input set when sets may not repeat). A
    host-bound call (enqueue >= HOST_BOUND x per-call time) gets HOST_BOUND_SAMPLING
    times both: its per-batch time follows the host's state, which drifts over tenths of a second
    (FA4's Python dispatch on decode rows: 0.13-0.19 ms per call within one run, NOTES v5c), so a
    longer sample keeps the median from landing on whichever state the short window caught.
    """
    k, nb = {}, {}
    for n, e in est.items():
        k[n] = max(1, min(200, max_k, int(target_batch_ms / e)))
        f = HOST_BOUND_SAMPLING if enq.get(n, 0.0) >= HOST_BOUND * e else 1
        nb[n] = max(min_batches, min(max_batches * f, int(f * budget_s * 1e3 / (e * k[n]))))
    return k, nb


def time_interleaved(impls: dict[str, Callable[[int], None]], n_sets: int, *,
                     budget_s: float = 0.4, min_batches: int = 5, max_batches: int = 50,
                     target_batch_ms: float = 2.0, warmup: int = 3, warmup_ms: float = 20.0,
                     profile_kernels: bool = True, hooks: Hooks | None = None) -> dict[str, Timing]:
    """Time every implementation in `impls` (name -> call(set_index)) interleaved.

    Batch size K per implementation is chosen so one batch lasts about `target_batch_ms`; the
    number of batches so the whole measurement of one implementation takes about `budget_s`
    (within [min_batches, max_batches]). A batch uses K distinct sets (hooks.grow makes enough);
    `hooks` refresh, flush and verify between batches (the module docstring).
    """
    with steady_host():
        return _time_interleaved(impls, n_sets, budget_s=budget_s, min_batches=min_batches,
                                 max_batches=max_batches, target_batch_ms=target_batch_ms,
                                 warmup=warmup, warmup_ms=warmup_ms, profile_kernels=profile_kernels,
                                 hooks=hooks or Hooks())


def _estimate(name, call, n_sets, hooks, stream, warmup, warmup_ms) -> tuple[float, float]:
    """Warm `call` up, then (median host enqueue ms, median per-call ms) of single calls."""
    import torch
    t_end = time.perf_counter() + warmup_ms / 1e3
    i = 0
    with hooks.window(name):
        while i < warmup or (time.perf_counter() < t_end and i < 10000):
            call(i % n_sets)
            i += 1
            if i % 16 == 0:
                torch.cuda.synchronize()                  # bound the queue; the clock includes the GPU
    torch.cuda.synchronize()
    enqs, ests = [], []
    for _ in range(ENQ_SAMPLES):                          # one call at a time, from an idle GPU
        hooks.before_batch(name, [0])
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with hooks.window(name):
            t0 = time.perf_counter()
            a.record(stream)
            call(0)
            enqs.append((time.perf_counter() - t0) * 1e3)
            b.record(stream)
        torch.cuda.synchronize()                          # device-wide: hidden work counts here
        wall = (time.perf_counter() - t0) * 1e3
        ests.append(max(a.elapsed_time(b), wall * 0.5, 1e-4))
    return statistics.median(enqs), statistics.median(ests)


def _time_interleaved(impls, n_sets, *, budget_s, min_batches, max_batches, target_batch_ms,
                      warmup, warmup_ms, profile_kernels, hooks):
    import torch
    stream = torch.cuda.current_stream()
    est: dict[str, float] = {}
    enq: dict[str, float] = {}                            # host ms to enqueue one call
    for name, call in impls.items():                     # warm-up and a first estimate
        enq[name], est[name] = _estimate(name, call, n_sets, hooks, stream, warmup, warmup_ms)
    cpm = _gate_cycles_per_ms()
    gate = {n: int(gate_ms(enq[n]) * cpm) if cpm else 0 for n in impls}
    k, nb = batch_plan(est, enq, budget_s=budget_s, min_batches=min_batches, max_batches=max_batches,
                       target_batch_ms=target_batch_ms)
    if hooks.distinct_sets:
        n_old, n_sets = n_sets, hooks.grow(n_sets, max(k.values()))   # one set per call of the longest batch
        for name, call in impls.items():                  # new sets: first calls (per-pointer setup) untimed
            with hooks.window(name):
                for i in range(n_old, n_sets):
                    call(i)
            torch.cuda.synchronize()
        k, nb = batch_plan(est, enq, budget_s=budget_s, min_batches=min_batches, max_batches=max_batches,
                           target_batch_ms=target_batch_ms, max_k=n_sets)
    n_rounds = max(nb.values())
    per_call: dict[str, list[float]] = {n: [] for n in impls}
    host: dict[str, list[float]] = {n: [] for n in impls}
    synced: dict[str, list[float]] = {n: [] for n in impls}
    cursor = 0
    for r in range(n_rounds):
        for name, call in impls.items():
            if r >= nb[name]:
                continue
            kk = k[name]
            sets = [(cursor + j) % n_sets for j in range(kk)]
            cursor = (cursor + kk) % n_sets
            hooks.before_batch(name, sets)                # fresh content, cold L2: outside the events
            g, a, b = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            torch.cuda.synchronize()
            g.record(stream)
            if gate[name]:
                torch.cuda._sleep(gate[name])             # the host enqueues while the GPU sleeps
            with hooks.window(name):
                a.record(stream)
                t0 = time.perf_counter()
                for i in sets:
                    call(i)
                b.record(stream)
                t1 = time.perf_counter()
            b.synchronize()
            torch.cuda.synchronize()                      # work on other streams counts too
            t2 = time.perf_counter()
            per_call[name].append(a.elapsed_time(b) / kk)
            host[name].append((t1 - t0) * 1e3 / kk)
            synced[name].append(max(0.0, (t2 - t0) * 1e3 - g.elapsed_time(a)) / kk)
            hooks.after_batch(name, sets, r, r == nb[name] - 1)
    out = {}
    for name, call in impls.items():
        xs = per_call[name]
        kms = None
        if profile_kernels:
            sets = [j % n_sets for j in range(max(1, min(k[name], 20)))]   # distinct when k <= n_sets
            hooks.before_batch(name, sets)
            with hooks.window(name):
                kms = hooks.kernel_ms(name, call, sets)
            torch.cuda.synchronize()
        out[name] = Timing(time_ms=statistics.median(xs), p10_ms=_quantile(xs, 0.1), p90_ms=_quantile(xs, 0.9),
                           kernel_ms=kms, host_ms=statistics.median(host[name]),
                           sync_ms=statistics.median(synced[name]),
                           calls=sum(k[name] for _ in xs), batches=len(xs))
    return out


# CUDA-graph replay timing (the fourth defence above): graph_timing.py
