"""Host time per call of fa3api rows on the GPU machine, ours against FA3's, and where ours goes (cProfile).

    python tools/host_profile.py [--rows REGEX] [--reps 300] [--top 18]

Per-call timing with CUDA events (fa3api_grid.time_ms) counts the host time before the launch plus the
kernel; this measures the host part alone: REPS calls issued back to back without a sync (wall clock / REPS,
the GPU queue absorbing the kernels), then the same calls under cProfile, top functions by own time.
Needs a GPU.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import torch

from kernelseek import fa3api_grid as G


def host_us(fn, reps: int) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t = (time.perf_counter() - t0) / reps * 1e6
    torch.cuda.synchronize()
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="dv512|dv256_d64|qv_mla_decode")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--top", type=int, default=18)
    a = ap.parse_args(argv)
    for row, call in G.matching(a.rows):
        ours = call.bound()          # (a kvcache row's caches made once, with the arguments)
        fa3, why = G.fa3_callable(call)
        line = f"{row['name']:<24} ours {host_us(ours, a.reps):7.1f} us/call"
        line += f"   fa3 {host_us(fa3, a.reps):7.1f} us/call" if fa3 else f"   fa3: {why}"
        print(line, flush=True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.reps):
            ours()
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
