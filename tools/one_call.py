"""Call kernels/fa3_hopper (through kernelseek.attention) on one dense shape, N times: the
command to put under `kernelseek profile -- ...` (Nsight Compute) for one bench26 row.

    python tools/one_call.py B S H D causal [N]      e.g. 32 512 16 128 1 5  (bench26 row 4)
"""
import sys

import torch

from kernelseek.attention import flash_attn_func


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    b, s, h, d, causal = (int(x) for x in argv[:5])
    n = int(argv[5]) if len(argv) > 5 else 5
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(n):
        flash_attn_func(q, k, v, causal=bool(causal))
    torch.cuda.synchronize()
    print(f"one_call: {n} calls of B{b} S{s} H{h} D{d} causal={causal}")


if __name__ == "__main__":
    main(sys.argv[1:])
