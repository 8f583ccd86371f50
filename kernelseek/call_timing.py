"""Timing one callable the way the fa3api and serving tools judge it: per call (CUDA events around one call and
a sync after it, several callables in turns) and CUDA-graph replay (graph_timing.time_graph, the L2 flushed by
the hooks before each replay). The harness's own timer (timing.time_interleaved) measures batches of calls
with fresh inputs instead; these time one fixed call, as a serving engine makes it.
"""
from __future__ import annotations

import statistics
import time

import torch


def time_ms(fn, reps: int = 20, warmup: int = 3) -> float:
    """Median milliseconds of fn() over reps (per_call_ms of fn alone)."""
    return per_call_ms([fn], reps, 1, warmup)[0]


def per_call_ms(fns, reps: int = 20, rounds: int = 4, warmup: int = 3) -> list[float]:
    """Median per-call milliseconds of each of fns: CUDA events on the current stream around one call, a sync
    after it (no GPU: wall clock). The fns take turns in `rounds` blocks of reps // rounds calls each, on a
    steady host (timing.steady_host: one CPU, the collector paused), so drift in clocks or host state falls
    on all alike and none is always measured first (before session 26 ours went first, all its calls, then the
    baseline's: the same kernels' chunk_window read 0.94x per call in one run and 0.63x in the next)."""
    from .timing import steady_host
    cuda = torch.cuda.is_available()
    times = [[] for _ in fns]
    with steady_host():
        for fn in fns:
            for _ in range(warmup):
                fn()
        for _ in range(rounds):
            for fn, ts in zip(fns, times):
                for _ in range(max(1, reps // rounds)):
                    ts.append(_one_ms(fn, cuda))
    return [statistics.median(ts) for ts in times]


def _one_ms(fn, cuda: bool) -> float:
    if not cuda:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def graph_ms(fn, reps: int, hooks) -> tuple[float | None, str]:
    """(median ms of CUDA-graph replay of fn(), "") or (None, why not): graph_timing.time_graph, one call
    captured once and replayed reps times, hooks.before_batch (serving_bench.FlushHooks: the L2
    flushed) before each replay. No CUDA, or a call that capture refuses: None and the reason."""
    if hooks is None:
        return None, "no CUDA"
    from . import graph_timing as GT
    try:
        return GT.time_graph(lambda stream: (lambda i: fn()), 1, hooks, "fa3api", max(reps, 1))[0], ""
    except Exception as e:  # host sync, allocation or an op capture refuses: a result, not a crash
        torch.cuda.synchronize()
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def graphs(fns: dict, reps: int, hooks) -> dict:
    """{tag_graph_ms} per tag of fns, and tag_graph_error where the graph could not be timed."""
    out = {}
    for tag, fn in fns.items():
        g, why = graph_ms(fn, reps, hooks)
        out.update({f"{tag}_graph_ms": g, **({} if g is not None else {f"{tag}_graph_error": why})})
    return out
