"""Serving steps with the prefill part beside the decode part (KSEEK_FA3_MIXED_RESERVE), swept on the GPU.

A mixed call (kernels/fa3_hopper/fa3_hopper.cu run_mixed) runs its memory-bound decode part and its
compute-bound prefill part one after the other; FA3 overlaps them in one persistent kernel. This probe
takes the -DKSEEK_FA3_MIXED_RESERVE=-1 build (the SMs reserved for the decode set at run time through
kseek_fa3_probe_mixed_reserve) and, per serving row: FA3's step in graph replay, then ours at each
reserve (0: one stream, v16; N: the prefill's persistent grid capped at the SM count less N, on a
high-priority second stream, the decode beside it), each captured afresh and replayed with the L2 flushed before every replay
(median us), the eager per-call median, and whether the step's output equals the reserve-0 output bit for
bit (the same kernels compute the same rows; only where they run changes).

    KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 python tools/mixed_overlap_probe.py [ROW_REGEX] [RESERVES]
    (GPU machine; RESERVES comma-separated, default 0,8,20,32,44,66; session 17 swept caps 66-124 of 132)
ROW_REGEX matches serving rows (kernelseek/grids/serving.yaml) and fa3api rows (grids/fa3api.yaml, whose
mixed ones are varlen_q_dense, varlen_q_paged, append_plain_varlen): both are swept. PROBE_SPLITS=0,16,32
(environment) runs each fa3api row once per num_splits value (0: the row's own), named row/ns=N.
"""
import os
import re
import statistics
import sys

import torch

from kernelseek import attention_core as C
from kernelseek import fa3api_grid as F
from kernelseek import graph_timing as GT
from kernelseek import serving_grid as G
from kernelseek import serving_peers as P
from kernelseek.fa3api_grid import time_ms
from kernelseek.serving_bench import FlushHooks

REPLAYS = 30


def graph_us(fn, hooks) -> float:
    t = GT.GraphTimer(lambda stream: (lambda i: fn()), 1, hooks, "probe")
    return statistics.median(t.replays(REPLAYS)) * 1e3


def main(pattern: str = "^s0[1-7]", caps: str = "0,8,20,32,44,66") -> int:
    if "KSEEK_FA3_MIXED_RESERVE=-1" not in os.environ.get("KSEEK_ATTENTION_DEFINES", ""):
        print("set KSEEK_ATTENTION_DEFINES=KSEEK_FA3_MIXED_RESERVE=-1 (the probe build)")
        return 2
    setter = C._lib().dll.kseek_fa3_probe_mixed_reserve
    setter.argtypes, setter.restype = [C.abi.ctypes.c_int], None
    hooks = FlushHooks(torch.device("cuda"))
    caps_ = [int(c) for c in caps.split(",")]
    print(f"{'row':<44} {'fa3 us':>8} " + " ".join(f"{'rsv ' + str(c):>12}" for c in caps_) + "   (graph us / per-call us; = bits equal reserve 0)")
    for name, ours, fa3_fn in _rows(pattern):
        fa3 = graph_us(fa3_fn, hooks) if fa3_fn is not None else float("nan")
        cells, ref = [], None
        for cap in caps_:
            setter(cap)
            o = _first(ours())
            torch.cuda.synchronize()
            same = "=" if ref is None or torch.equal(o.view(torch.uint8), ref.view(torch.uint8)) else "!"
            ref = o.clone() if ref is None else ref
            g = graph_us(ours, hooks)
            pc = time_ms(ours, 20) * 1e3
            cells.append(f"{g:6.1f}/{pc:5.0f}{same}")
            print(f"  {name} reserve {cap}: graph {g:.1f} us, per call {pc:.0f} us, fa3 {fa3:.1f} us, "
                  f"speed {fa3 / g:.3f}, paths {C.RECORD['paths']}", flush=True)
        setter(0)
        print(f"{name[:44]:<44} {fa3:8.1f} " + " ".join(f"{c:>12}" for c in cells), flush=True)
    return 0


def _first(res):
    """The output tensor of a call that may also return its LSE."""
    return res[0] if isinstance(res, tuple) else res


def _rows(pattern: str):
    """(name, our call, FA3's call or None) for each serving and fa3api row the pattern matches."""
    for row in G.load_rows():
        if re.search(pattern, row.name):
            call = G.make_call(row, device="cuda", seed=5)
            yield row.name, (lambda c=call: G.ours(c)), P.fa3(call).fn
    splits = [int(x) for x in os.environ.get("PROBE_SPLITS", "0").split(",")]
    for row in F.load_rows():
        if re.search(pattern, row["name"]):
            fa3 = None
            for ns in splits:
                r = dict(row, num_splits=ns) if ns else row
                call = F.make_call(r)
                kv = call.caches() if row["fn"] == "kvcache" else None
                fa3 = fa3 or F.fa3_callable(F.make_call(row))[0]
                yield row["name"] + (f"/ns={ns}" if ns else ""), call.bound(caches=kv), fa3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
