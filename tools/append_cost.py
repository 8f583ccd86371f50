"""Where an append row's per-call time goes on the GPU machine: ours with the feature against ours without it.

    python tools/append_cost.py [ROW_REGEX] [ROUNDS]   (default: append_rotary_prefill|append_plain_varlen, 5)

fa3api rows whose baseline is our own call without the feature (FA3 refuses the append) are judged on
per-call time: the host time of the call plus its kernels. Per row and round, alternately (so a drifting host
slows both alike): host microseconds per call (REPS calls back to back, no sync: tools/host_profile.host_us),
per-call milliseconds (fa3api_grid.time_ms: CUDA events, a sync after each call) and graph replay time, with
the feature and without it. Where the kv_update library pairs the append with kseek_fwd in one foreign call
(kv_update.THEN), the row is also measured with that pairing off ("with-2calls": the update and kseek_fwd as
two ctypes calls, as before session 26). Prints each round and the medians. Needs a GPU.
"""
from __future__ import annotations

import re
import statistics
import sys

import torch

from kernelseek import attention_fastpath as F
from kernelseek import fa3api_grid as G
from kernelseek import kv_update
from kernelseek.serving_bench import FlushHooks

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from host_profile import host_us  # noqa: E402

REPS = 200


def main(pattern: str = "append_rotary_prefill|append_plain_varlen", rounds: str = "5") -> int:
    hooks = FlushHooks(torch.device("cuda"))
    for row in G.load_rows():
        if not re.search(pattern, row["name"]):
            continue
        call, drop = G.make_call(row), row.get("feature")
        fns = {"with": call.bound(caches=call.caches()), "without": call.bound(drop, caches=call.caches(drop))}
        fns["with"]()                          # loads kv_update's library: THEN holds its one-call pairing
        then = list(kv_update.THEN)
        forms = {"with": (fns["with"], then), "without": (fns["without"], then)}
        if then:
            forms = {"with": forms["with"], "with-2calls": (fns["with"], []), "without": forms["without"]}
        got = {k: {"host": [], "call": [], "graph": []} for k in forms}
        for i in range(int(rounds)):
            for k, (fn, pairing) in forms.items():
                kv_update.THEN[:] = pairing    # entries take their pairing when recorded: record them again
                F.clear()
                for _ in range(3):
                    fn()
                got[k]["host"].append(host_us(fn, REPS))
                got[k]["call"].append(G.time_ms(fn, 20) * 1e3)
                got[k]["graph"].append(G.graph_ms(fn, 20, hooks)[0] * 1e3)
            print(f"{row['name']} round {i}: " + "  ".join(
                f"{k}: host {v['host'][-1]:.1f} call {v['call'][-1]:.1f} graph {v['graph'][-1]:.1f} us"
                for k, v in got.items()), flush=True)
        kv_update.THEN[:] = then
        med = {k: {m: statistics.median(x) for m, x in v.items()} for k, v in got.items()}
        o = med["without"]
        for k in [k for k in med if k != "without"]:
            w = med[k]
            print(f"{row['name']} {k}: medians (us) {k}/without: host {w['host']:.1f}/{o['host']:.1f}, per call "
                  f"{w['call']:.1f}/{o['call']:.1f} (speed {o['call'] / w['call']:.3f}), graph {w['graph']:.1f}/"
                  f"{o['graph']:.1f} (speed {o['graph'] / w['graph']:.3f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
