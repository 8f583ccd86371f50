"""Where does a host-bound baseline's per-call time move? (issue 3; GPU machine only)

FA4's Python dispatch takes 0.11-0.30 ms per call on the decode rows (bench26 20, 22), longer than
its kernels there, and changed by up to 2x between consecutive bench26 runs. This samples its host
enqueue time (ms per call, perf_counter around K back-to-back calls, no synchronization inside) in
short windows, pinned in turn to several CPUs, for a while, and prints per CPU and per time slice
the median, so one can tell a CPU-dependent cost (a noisy sibling thread, interrupts) from a
machine-wide drift in time (clock, neighbours).

    python tools/host_jitter.py [ROW] [SECONDS]     e.g. 22 40   (needs FA4 importable)
"""
import gc
import json
import os
import statistics
import sys
import time

import torch

from kernelseek import baselines
from kernelseek.inputs import make_inputs
from kernelseek.scenarios import load_grid, select


def siblings() -> dict[int, str]:
    """cpu -> its SMT siblings list, from sysfs (empty where the file is missing)."""
    out = {}
    for c in sorted(os.sched_getaffinity(0)):
        p = f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
        out[c] = open(p).read().strip() if os.path.exists(p) else "?"
    return out


def main(argv):
    row = int(argv[0]) if argv else 22
    seconds = float(argv[1]) if len(argv) > 1 else 40.0
    s = select(load_grid("bench26"), str(row))[0]
    fa4 = baselines.FA4()
    ok, why = fa4.available()
    if not ok:
        sys.exit(f"FA4 unavailable: {why}")
    sets = [make_inputs(s, 100 + i, device="cuda", gen_device="cuda") for i in range(4)]
    calls = [fa4.bind(s, st).call for st in sets]
    for i in range(200):                                   # warm-up (JIT compile on the first)
        calls[i % 4]()
    torch.cuda.synchronize()
    allowed = sorted(os.sched_getaffinity(0))
    cpus = sorted({allowed[0], allowed[1], allowed[len(allowed) // 2], allowed[-2], allowed[-1]})
    k = 20                                                 # calls per window: ~2-6 ms of host time
    samples = {c: [] for c in cpus}                        # cpu -> [(t_s, host ms/call, device ms/call)]
    gc.collect()
    gc.disable()
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < seconds:
        for c in cpus:
            os.sched_setaffinity(0, {c})
            for _ in range(5):
                torch.cuda.synchronize()
                torch.cuda._sleep(2_000_000)               # the host enqueues while the GPU sleeps
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                t0 = time.perf_counter()
                for i in range(k):
                    calls[i % 4]()
                t1 = time.perf_counter()
                b.record()
                b.synchronize()
                samples[c].append((t0 - t_start, (t1 - t0) * 1e3 / k, a.elapsed_time(b) / k))
    gc.enable()
    os.sched_setaffinity(0, set(allowed))
    sib = siblings()
    load = open("/proc/loadavg").read().split()[:3]
    print(f"row {row} {s.name}: FA4 host ms/call, {k} calls per window; loadavg {' '.join(load)}")
    n_slices = 8
    print("cpu (siblings)   all: median  p10   p90  | median per time slice of %.0f s" % (seconds / n_slices))
    for c in cpus:
        hs = [h for _, h, _ in samples[c]]
        qs = statistics.quantiles(hs, n=10)
        per = []
        for j in range(n_slices):
            lo, hi = j * seconds / n_slices, (j + 1) * seconds / n_slices
            xs = [h for t, h, _ in samples[c] if lo <= t < hi]
            per.append(f"{statistics.median(xs):.3f}" if xs else "  -  ")
        print(f"{c:3d} ({sib.get(c, '?'):>7})  {statistics.median(hs):.3f} {qs[0]:.3f} {qs[-1]:.3f} | {' '.join(per)}")
    dev = [d for c in cpus for _, _, d in samples[c]]
    print(f"device-side ms/call (events, the host's share included): median {statistics.median(dev):.3f}")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, f"host_jitter_row{row}.json"), "w") as f:
            json.dump({"row": row, "scenario": s.name, "calls_per_window": k, "siblings": sib,
                       "samples": {str(c): v for c, v in samples.items()}}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
