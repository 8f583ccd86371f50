"""Run the serving rows s01-s07 once each through kernelseek.attention with the build named by
KSEEK_ATTENTION_DEFINES and print, per row, the path taken and whether the output is finite, or the
error (a quick probe of a new build variant, e.g. under compute-sanitizer, as session 14 did for
MIXED_GATHER; tests/gpu/test_variants_gpu.py checks the values against fp32)."""
import re
import sys
import traceback

import torch

from kernelseek import attention_core as core
from kernelseek import serving_grid as G


def main(pattern: str = "s0[1-7]") -> int:
    bad = 0
    for row in G.load_rows():
        if not re.match(pattern, row.name) or row.qv or row.attention_chunk:
            continue
        call = G.make_call(row, device="cuda", seed=5)
        try:
            o = G.ours(call)
            torch.cuda.synchronize()
            path = core.RECORD["paths"][-1] if core.RECORD["paths"] else "?"
            print(f"{row.name}: ok path={path} o={tuple(o.shape)} finite={bool(torch.isfinite(o).all())}", flush=True)
        except Exception as e:  # a probe: report and go on (a sticky CUDA error ends the process anyway)
            bad += 1
            print(f"{row.name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=3)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
