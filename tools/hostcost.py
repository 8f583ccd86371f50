"""Host cost of kernelseek.attention on the fa3api grid, on this machine's CPU (no GPU needed).

    python tools/hostcost.py [--rows REGEX] [--reps N] [--shrink F] [--json OUT.json] [--ops] [--device cuda]

Each row's call runs on CPU tensors through the CUDA path's host code against a host-only kernel
library (kernelseek/attention_hostcost.py says how); prints microseconds per call by stage, the
aten ops it issues, how many would launch a kernel on CUDA, and any that would sync. With
--device cuda (on the GPU machine; never run in session 9) the same table for the real kernel:
host time per call with the GPU drained between calls.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from kernelseek import attention_hostcost as H


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=None, help="regex on row names")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--shrink", type=int, default=16, help="divide lengths above 64 by this (1: grid shapes)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--ops", action="store_true", help="also print each row's ops")
    ap.add_argument("--device", default="cpu", help="cpu (host-only library) or cuda (the real kernel)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    lib = H.host_lib() if a.device == "cpu" else None
    res = [H.measure_row(r, lib, a.reps, a.device) for r in H.grid_rows(a.shrink, a.rows)]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    if a.ops:
        for r in res:
            print(r["name"], r["steps"], r["paths"], sorted(r["ops"].items()))
    print(H.table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
