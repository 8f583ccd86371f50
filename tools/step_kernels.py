"""Where a serving step's graph time goes, kernel by kernel: ours against FA3 on the same step.

s01 runs at 0.82x of FA3 in graph replay (session 14) and its step is six launches (list, decode and
its combine, split, page copy, prefill over the slots, an in-place prefill over the rest). Before
changing any of them, this measures them: each implementation's step is captured in a CUDA graph
once (graph_timing.GraphTimer), replayed REPLAYS times with the L2 flushed before each replay
(serving_bench.FlushHooks), under torch's profiler; per
kernel name, the launches per step and the mean device time per step (us), then the step's graph
time (events, median) and the gap (graph time minus the kernels' sum: launch latency and idle time
between dependent kernels inside the graph).

    python tools/step_kernels.py [ROW_REGEX]        (serving rows; default ^s01; GPU machine only)
    python tools/step_kernels.py --fa3api ROW_REGEX (fa3api rows: one FA3-interface call per graph, ours
                                                     and FlashAttention-3's where it takes the call;
                                                     STEP_NUM_SPLITS=0,8,16: ours once per num_splits)
"""
import os
import re
import statistics
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from kernelseek import graph_timing as GT
from kernelseek import serving_grid as G
from kernelseek import serving_peers as P
from kernelseek.serving_bench import FlushHooks

REPLAYS = 20


def _profiled(work) -> tuple[dict, dict]:
    """(launches, device us) per kernel name of `work()` under the profiler."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    n, us = defaultdict(int), defaultdict(float)
    for e in prof.events():
        if "CUDA" in str(getattr(e, "device_type", "")):
            n[e.name] += 1
            us[e.name] += getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0) or 0.0
    return n, us


def kernels(g, hooks) -> dict[str, tuple[float, float]]:
    """{kernel name: (launches per step, device us per step)} over REPLAYS profiled replays. The flush
    before each replay is profiled alone first, and exactly its launches and time are taken out (a
    step kernel of the same name as the flush's stays counted)."""
    def flushes():
        for _ in range(REPLAYS):
            hooks.before_batch("flush", [0])
    fn, fus = _profiled(flushes)

    def steps():
        for _ in range(REPLAYS):
            hooks.before_batch("flush", [0])
            g.replay()
    n, us = _profiled(steps)
    for k in fn:
        n[k] -= fn[k]
        us[k] -= fus[k]
    return {k: (n[k] / REPLAYS, max(us[k], 0.0) / REPLAYS) for k in n if n[k] > 0}


def report(name: str, fn, hooks) -> None:
    t = GT.GraphTimer(lambda stream: (lambda i: fn()), 1, hooks, name)    # one step per graph, L2 flushed
    ms = statistics.median(t.replays(REPLAYS))
    ks = kernels(t.graph, hooks)
    total = sum(u for _, u in ks.values())
    print(f"  {name}: graph {ms * 1e3:.1f} us per step, kernels {total:.1f} us, gap {ms * 1e3 - total:.1f} us "
          f"({sum(c for c, _ in ks.values()):.0f} launches)")
    for k, (c, u) in sorted(ks.items(), key=lambda kv: -kv[1][1]):
        print(f"    {u:8.1f} us  x{c:.0f}  {k[:110]}")


def main(pattern: str = "^s01") -> int:
    init = getattr(getattr(torch.profiler, "_utils", None), "_init_for_cuda_graphs", None)
    if init is not None:
        init()                  # the profiler must be set up before graphs are captured (pytorch #75504)
    hooks = FlushHooks(torch.device("cuda"))              # the serving benchmark's L2 flush between replays
    for row in G.load_rows():
        if not re.search(pattern, row.name):
            continue
        call = G.make_call(row, device="cuda", seed=5)
        print(f"{row.name}:")
        report("ours", lambda: G.ours(call), hooks)
        peer = P.fa3(call)
        if peer.fn is None:
            print(f"  fa3: not run: {peer.why}")
        else:
            report(f"fa3 ({peer.how})", peer.fn, hooks)
    return 0


def main_fa3api(pattern: str) -> int:
    """The same for fa3api rows (kernelseek/grids/fa3api.yaml): each row's call, bound as the grid times it."""
    from kernelseek import fa3api_grid as F
    init = getattr(getattr(torch.profiler, "_utils", None), "_init_for_cuda_graphs", None)
    if init is not None:
        init()
    hooks = FlushHooks(torch.device("cuda"))
    splits = [int(x) for x in os.environ.get("STEP_NUM_SPLITS", "0").split(",")]
    for row in F.load_rows():
        if not re.search(pattern, row["name"]):
            continue
        print(f"{row['name']}:")
        for ns in splits:      # STEP_NUM_SPLITS=0,8,16: ours once per num_splits (0: the row's own)
            call = F.make_call(dict(row, num_splits=ns) if ns else row)
            kv = call.caches() if row["fn"] == "kvcache" else None
            report(f"ours num_splits={ns}" if ns else "ours", call.bound(caches=kv), hooks)
        call = F.make_call(row)
        fn, why = F.fa3_callable(call)
        if fn is None:
            print(f"  fa3: not run: {why}")
        else:
            report("fa3", fn, hooks)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fa3api"]:
        sys.exit(main_fa3api(sys.argv[2] if len(sys.argv) > 2 else "."))
    sys.exit(main(*sys.argv[1:]))
