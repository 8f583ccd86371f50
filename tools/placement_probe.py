"""Does a memory-bound row's CUDA-graph time depend on where its inputs sit in memory?

bench26 row 20 (paged decode, 0.14 ms) moved 3.2-3.4% between two consecutive runs in graph replay
(sessions 11 and 12), and every implementation timed in one worker process moved together while the
one in the other process did not. Hypothesis: the time depends on the physical placement of the
K/V pool (and on the page permutation drawn from the seed), which is fixed per process and per set.
This probe times our kernel (kernelseek.attention) in graph replay on several allocations of the
same row, all kept alive so that each one gets new memory:
  - "same seed": the same content and page table, allocated again (placement only);
  - "new seed": a new seed each time (page permutation and placement).
Each allocation: one captured call, `REPLAYS` replays, the L2 flushed before each, median (ms).
A spread across allocations well above the spread of one allocation re-timed says placement moves
the time, and the harness should average over more input sets on such rows.

    python tools/placement_probe.py [ROW ...]        (bench26 rows; default 20 23 24)
"""
import sys

import torch

from kernelseek import attention
from kernelseek import graph_timing as GT
from kernelseek.inputs import make_inputs
from kernelseek.scenarios import load_grid
from kernelseek.serving_bench import FlushHooks

REPLAYS = 30
ALLOCS = 5


def _graph_median(call, hooks) -> float:
    """Median ms over REPLAYS replays of one captured call, the L2 flushed before each (graph_timing)."""
    return GT.time_graph(lambda stream: (lambda i: call()), 1, hooks, "probe", REPLAYS)[0]


def _call(s, seed: int):
    inp = make_inputs(s, seed, device="cuda", gen_device="cuda")
    b = inp.q.shape[0]
    seqlens = inp.seqused_k if inp.seqused_k is not None else torch.full(
        (b,), s.seqlen_k, dtype=torch.int32, device="cuda")
    out = torch.empty(inp.q.shape[:-1] + (inp.v.shape[-1],), dtype=inp.out_dtype, device="cuda")

    def call():
        attention.flash_attn_with_kvcache(inp.q, inp.k, inp.v, cache_seqlens=seqlens, page_table=inp.page_table,
                                          out=out, num_splits=s.num_splits or 0)
    return inp, call


def _spread(xs: list[float]) -> str:
    return f"min {min(xs):.4f} max {max(xs):.4f} ms, spread {100 * (max(xs) / min(xs) - 1):.1f}%"


def main(rows: list[int]) -> None:
    grid = {s.row: s for s in load_grid("bench26")}
    hooks = FlushHooks(torch.device("cuda"))                               # the L2 flushed before each replay
    print(f"{torch.cuda.get_device_name()}, {REPLAYS} replays per allocation, {ALLOCS} allocations kept alive")
    for r in rows:
        s = grid[r]
        keep, same, new = [], [], []
        for i in range(ALLOCS):
            inp, call = _call(s, 1)
            keep.append(inp)
            same.append(_graph_median(call, hooks))
        inp, call = _call(s, 1)                                 # another allocation: the drift check below
        keep.append(inp)
        first = _graph_median(call, hooks)
        for i in range(ALLOCS):
            inp, call = _call(s, 100 + i)
            keep.append(inp)
            new.append(_graph_median(call, hooks))
        again = [_graph_median(call, hooks) for _ in range(3)]  # the last allocation, re-timed 3 times
        print(f"row {r} {s.name}:")
        print(f"  same seed, new memory:  {' '.join(f'{x:.4f}' for x in same)}  ({_spread(same)})")
        print(f"  new seed, new memory:   {' '.join(f'{x:.4f}' for x in new)}  ({_spread(new)})")
        print(f"  one allocation re-timed: {' '.join(f'{x:.4f}' for x in [new[-1]] + again)}  "
              f"({_spread([new[-1]] + again)}); one more same-seed allocation {first:.4f}")
        del keep
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [20, 23, 24])
