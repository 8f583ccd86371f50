"""CUDA-graph replay timing: capture an implementation's calls once, replay them with the defences
between replays (timing.py's docstring, point 4), and keep the captured graph for more replays later.

Why keep it: two implementations timed one after the other (the candidate in its worker, then each
baseline in the trusted one) see the GPU in different states (clocks, temperature); on a 3 ms row of
bench26 every library's graph time moved about 3% between two runs (2026-12-01, data/runs/README.md,
session 11). `kernelseek eval --graph-rounds N` replays every kept graph again in N rounds that
alternate between the implementations (worker_pair.py), so they share those states; a round is a
request per implementation, and each one's time is the median over all its round replays.
"""
from __future__ import annotations

import statistics
from typing import Callable

from .timing import Hooks, _quantile, steady_host


def capture_graph(make_call: Callable[[int], Callable[[int], None]], n_sets: int, hooks: Hooks | None = None,
                  name: str = "candidate"):
    """(A CUDA graph of one call on each of sets 0..n_sets-1, after a warm call of each; its capture
    stream, kept alive beside it) for time_graph and the worker's graph burst. RuntimeError if uncapturable."""
    import torch
    hooks = hooks or Hooks()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    call = make_call(side.cuda_stream)
    sets = list(range(n_sets))
    with torch.cuda.stream(side), hooks.window(name):
        for i in sets:                                    # warm on the capture stream
            call(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        # the window opens inside the capture: torch's capture_begin fills its RNG state (int64
        # FillFunctor kernels, seen on the H200) before it, and that is not the candidate's code
        with torch.cuda.graph(g, stream=side), hooks.window(name):
            for i in sets:
                call(i)
    except Exception as e:
        torch.cuda.synchronize()
        raise RuntimeError(f"the calls could not be captured in a CUDA graph: {type(e).__name__}: {str(e)[:200]}") from None
    return g, side


class GraphTimer:
    """One captured graph of `name` (one call on each of n_sets sets) and its timed replays."""

    def __init__(self, make_call: Callable[[int], Callable[[int], None]], n_sets: int, hooks: Hooks | None,
                 name: str):
        self.hooks, self.name, self.n_sets = hooks or Hooks(), name, n_sets
        self.graph, self._side = capture_graph(make_call, n_sets, self.hooks, name)
        self.replayed = 0

    def replays(self, n: int) -> list[float]:
        """Per-call ms of n replays. Before every replay hooks.before_batch refreshes the content of
        all sets and flushes the L2, outside the events; after it hooks.after_batch verifies a sampled
        call's output (the last replay's always; the defence's failures collect there)."""
        import torch
        sets, xs = list(range(self.n_sets)), []
        with steady_host():
            for r in range(n):
                self.hooks.before_batch(self.name, sets)
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                self.graph.replay()                        # the harness's graph: outside the window
                b.record()
                b.synchronize()
                torch.cuda.synchronize()
                xs.append(a.elapsed_time(b) / self.n_sets)
                self.hooks.after_batch(self.name, sets, self.replayed, r == n - 1)
                self.replayed += 1
        return xs


def time_graph(make_call: Callable[[int], Callable[[int], None]], n_sets: int, hooks: Hooks | None = None,
               name: str = "candidate", replays: int = 20, keep: dict | None = None) -> tuple[float, float, float]:
    """Per-call time of CUDA-graph replay (ms): median, p10, p90 over `replays` replays.

    One graph holds one call on each of the n_sets input sets, captured once (fixed pointers:
    `make_call(stream_handle)` gives call(set) launching on the capture stream). Before every
    replay hooks.before_batch refreshes the content of all n_sets sets and flushes the L2, outside
    the events; after it hooks.after_batch verifies a sampled call's output. So a replay never sees
    content seen before, and a kernel that captured a shortcut (a copy of an old answer, nothing at
    all) returns stale output there. Raises RuntimeError when the calls cannot be captured.
    `keep`: a dict that receives keep[name] = the GraphTimer, for more replays later (rounds)."""
    t = GraphTimer(make_call, n_sets, hooks, name)
    xs = t.replays(replays)
    if keep is not None:
        keep[name] = t
    d = summary(xs)
    return d["graph_ms"], d["graph_p10_ms"], d["graph_p90_ms"]


def summary(xs: list[float]) -> dict:
    """{"graph_ms", "graph_p10_ms", "graph_p90_ms"} of per-call replay times."""
    return {"graph_ms": statistics.median(xs), "graph_p10_ms": _quantile(xs, 0.1), "graph_p90_ms": _quantile(xs, 0.9)}


MAX_REPLAYS = 50          # per "graph_more" request


def more(kept: dict, req: dict) -> dict:
    """The worker's {"op": "graph_more", "impl": name, "replays": n}: n more timed replays of the graph
    of `name` that the last scenario kept -> {"status": "passed", "times_ms": [...]}; "failed" with the
    reason when a verified replay's output was wrong (the candidate's), "error" when there is no graph."""
    t = kept.get(req.get("impl"))
    n = req.get("replays")
    if t is None:
        return {"status": "error", "reason": f"graph_more: no graph of {req.get('impl')!r} kept in the last scenario"}
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REPLAYS:
        return {"status": "error", "reason": f"graph_more: replays {n!r}, expected 1 to {MAX_REPLAYS}"}
    d = getattr(t.hooks, "d", None)                     # the defence (DefenceHooks): verification failures
    before = len(d.failures) if d is not None else 0
    xs = t.replays(n)
    new = d.failures[before:] if d is not None else []
    if new:
        return {"status": "failed", "reason": f"in CUDA-graph replay (rounds, content refreshed between replays): {new[0]}"}
    return {"status": "passed", "times_ms": xs}
