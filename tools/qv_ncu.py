"""One call of a qv-kernel row, for Nsight Compute: `ncu --kernel-name regex:qv_attn_ws python tools/qv_ncu.py ROW`.

    python tools/qv_ncu.py {dv512|dv256_d64|s08_prefills} [--big 2] [--fa3]

ROW is a row of tools/qv_probe.py (dv512 / dv256_d64 from the fa3api grid; s08_prefills: s08's two prefill
chunks). The call runs three times (build, warm-up, the profiled one); --big picks the long-sequence kernel
(kseek_qv_set_big_kernel: 2 warp-specialized, 3 the same by cp.async, 1 v18's wgmma form); --fa3 runs
FlashAttention-3's call of the row instead (the same profile of the baseline). Needs a GPU.
"""
from __future__ import annotations

import argparse
import sys

import torch

from kernelseek import fa3api_grid as G
from kernelseek import qv_attention


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("row")
    ap.add_argument("--big", type=int, default=2)
    ap.add_argument("--fa3", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, "tools")
    import qv_probe
    rows = {r["name"]: r for r, _ in qv_probe.rows()}
    qv_attention.set_big_kernel(a.big)
    call = G.make_call(rows[a.row])
    fn = G.fa3_callable(call)[0] if a.fa3 else call.bound()
    if fn is None:
        raise SystemExit(f"{a.row}: FA3 does not compute it here")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
