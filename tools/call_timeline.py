"""One fa3api call's per-call timeline: where the GPU waits for the host, ours against FA3's.

The grid's per-call time (fa3api_grid.time_ms: an event, the call, an event, a sync) counts the host time
before each launch that the GPU waits for, plus the kernels. This records REPS such calls under torch's
profiler (CPU and CUDA activities) and prints, for the median call by span, every CUDA runtime call on the
host and every kernel on the GPU in time order (us from the call's start), then: host time to the last
launch, the GPU's first kernel start and last kernel end, and the GPU's idle time inside the call.

    python tools/call_timeline.py [ROW_REGEX] [--reps 12]        (GPU machine only)
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from kernelseek import fa3api_grid as G

API = re.compile(r"^(cu|cuda)[A-Z]")     # runtime and driver API calls recorded on the host


def _dev(e) -> bool:
    return "CUDA" in str(getattr(e, "device_type", ""))


def calls(fn, reps: int):
    """[(start, end, [events])] per call: the call's marker span and every event inside it (us)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with record_function(f"kseek_call_{i}"):
                a.record()
                fn()
                b.record()
            b.synchronize()
    evs = list(prof.events())
    marks = sorted((e for e in evs if e.name.startswith("kseek_call_") and not _dev(e)),
                   key=lambda e: e.time_range.start)
    out = []
    for k, m in enumerate(marks):
        t0 = m.time_range.start
        t1 = marks[k + 1].time_range.start if k + 1 < len(marks) else float("inf")
        inside = [e for e in evs if t0 <= e.time_range.start < t1 and not e.name.startswith("kseek_call_")
                  and (_dev(e) or API.match(e.name))]
        out.append((t0, m.time_range.end, inside))
    return out


def summary(t0: float, t_end: float, inside) -> dict:
    ks = sorted((e for e in inside if _dev(e)), key=lambda e: e.time_range.start)
    launches = [e for e in inside if not _dev(e) and "Launch" in e.name]
    if not ks:
        return {"host_us": t_end - t0, "kernels": 0}
    busy, cur_s, cur_e = 0.0, None, None       # union of kernel intervals (two streams may overlap)
    for e in ks:
        s, f = e.time_range.start, e.time_range.end
        if cur_e is None or s > cur_e:
            busy += (cur_e - cur_s) if cur_e is not None else 0.0
            cur_s, cur_e = s, f
        else:
            cur_e = max(cur_e, f)
    busy += cur_e - cur_s
    first, last = ks[0].time_range.start, max(e.time_range.end for e in ks)
    return {"host_us": t_end - t0, "last_launch_us": max((e.time_range.end for e in launches), default=t0) - t0,
            "first_kernel_us": first - t0, "last_kernel_end_us": last - t0, "gpu_busy_us": busy,
            "gpu_idle_inside_us": (last - first) - busy, "kernels": len(ks), "launches": len(launches)}


def show(tag: str, fn, reps: int) -> None:
    rows = calls(fn, reps)
    sums = [summary(*r) for r in rows]
    spans = [s.get("last_kernel_end_us", 0.0) for s in sums]
    med = spans.index(sorted(spans)[len(spans) // 2])
    t0, _, inside = rows[med]
    print(f"  {tag}: median over {reps} calls: " + ", ".join(
        f"{k} {statistics.median(s.get(k, 0.0) for s in sums):.1f}" for k in
        ("host_us", "last_launch_us", "first_kernel_us", "last_kernel_end_us", "gpu_busy_us", "gpu_idle_inside_us")))
    for e in sorted(inside, key=lambda e: e.time_range.start):
        where = "gpu " if _dev(e) else "host"
        print(f"    {where} {e.time_range.start - t0:8.1f} .. {e.time_range.end - t0:8.1f}  {e.name[:90]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="?", default="^varlen_q_paged$")
    ap.add_argument("--reps", type=int, default=12)
    a = ap.parse_args(argv)
    for row, call in G.matching(a.rows):
        print(f"{row['name']}:", flush=True)
        show("ours", call.bound(), a.reps)   # (a kvcache row's caches made once, with the arguments)
        fa3, why = G.fa3_callable(call)
        if fa3 is None:
            print(f"  fa3: not run: {why}")
        else:
            show("fa3", fa3, a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
