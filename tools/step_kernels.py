"""Where a serving step's graph time goes, kernel by kernel: ours against FA3 on the same step.

s01 runs at 0.82x of FA3 in graph replay (session 14) and its step is six launches (list, decode and
its combine, split, page copy, prefill over the slots, an in-place prefill over the rest). Before
changing any of them, this measures them: each implementation's step is captured in a CUDA graph
once, replayed REPLAYS times with the L2 flushed before each replay, under torch's profiler; per
kernel name, the launches per step and the mean device time per step (us), then the step's graph
time (events, median) and the gap (graph time minus the kernels' sum: launch latency and idle time
between dependent kernels inside the graph).

    python tools/step_kernels.py [ROW_REGEX]        (serving rows; default ^s01; GPU machine only)
"""
import re
import statistics
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from kernelseek import serving_grid as G
from kernelseek import serving_peers as P

REPLAYS = 20


def _graph(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        fn()
    torch.cuda.synchronize()
    return g


def _replay_ms(g, flush) -> float:
    xs = []
    for _ in range(REPLAYS):
        flush.bitwise_not_()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        xs.append(a.elapsed_time(b))
    return statistics.median(xs)


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


def kernels(g, flush) -> dict[str, tuple[float, float]]:
    """{kernel name: (launches per step, device us per step)} over REPLAYS profiled replays. The flush
    before each replay is profiled alone first, and exactly its launches and time are taken out (a
    step kernel of the same name as the flush's stays counted)."""
    def flushes():
        for _ in range(REPLAYS):
            flush.bitwise_not_()
    fn, fus = _profiled(flushes)

    def steps():
        for _ in range(REPLAYS):
            flush.bitwise_not_()
            g.replay()
    n, us = _profiled(steps)
    for k in fn:
        n[k] -= fn[k]
        us[k] -= fus[k]
    return {k: (n[k] / REPLAYS, max(us[k], 0.0) / REPLAYS) for k in n if n[k] > 0}


def report(name: str, fn, flush) -> None:
    g = _graph(fn)
    ms = _replay_ms(g, flush)
    ks = kernels(g, flush)
    total = sum(u for _, u in ks.values())
    print(f"  {name}: graph {ms * 1e3:.1f} us per step, kernels {total:.1f} us, gap {ms * 1e3 - total:.1f} us "
          f"({sum(c for c, _ in ks.values()):.0f} launches)")
    for k, (c, u) in sorted(ks.items(), key=lambda kv: -kv[1][1]):
        print(f"    {u:8.1f} us  x{c:.0f}  {k[:110]}")


def main(pattern: str = "^s01") -> int:
    init = getattr(getattr(torch.profiler, "_utils", None), "_init_for_cuda_graphs", None)
    if init is not None:
        init()                  # the profiler must be set up before graphs are captured (pytorch #75504)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")        # 256 MB > the 60 MB L2
    for row in G.load_rows():
        if not re.search(pattern, row.name):
            continue
        call = G.make_call(row, device="cuda", seed=5)
        print(f"{row.name}:")
        report("ours", lambda: G.ours(call), flush)
        peer = P.fa3(call)
        if peer.fn is None:
            print(f"  fa3: not run: {peer.why}")
        else:
            report(f"fa3 ({peer.how})", peer.fn, flush)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
