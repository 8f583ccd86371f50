"""Production rows p05 / p06 through kernelseek.attention, N times: a 1k-query causal chunk of
Llama-3-8B (32 q / 8 kv heads, head dim 128) over an 8k-key cache, contiguous or paged (page 16, a
shuffled page table). The command to put under `kernelseek profile -- ...` (Nsight Compute) to compare
the prefill kernel's dense and paged K/V loads (kernels/NOTES.md v13).

    python tools/one_paged_call.py PAGE [N]      PAGE 0 = contiguous (p05), 16 = paged (p06)
"""
import sys

import torch

from kernelseek.attention import flash_attn_with_kvcache


def main(argv):
    if not argv:
        sys.exit(__doc__)
    page, n = int(argv[0]), int(argv[1]) if len(argv) > 1 else 5
    sq, sk, hq, hkv, d = 1024, 8192, 32, 8, 128
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(1, sq, hq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    if page:
        pages = sk // page
        kc, vc = (torch.randn(pages, page, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        table = torch.randperm(pages, device="cuda", generator=g).to(torch.int32).view(1, pages)
    else:
        kc, vc = (torch.randn(1, sk, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        table = None
    lens = torch.full((1,), sk, device="cuda", dtype=torch.int32)
    for _ in range(n):
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, page_table=table, causal=True)
    torch.cuda.synchronize()
    print(f"one_paged_call: {n} calls, page {page or 'contiguous'}")


if __name__ == "__main__":
    main(sys.argv[1:])
