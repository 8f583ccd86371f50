"""The qv kernel (kernels/qv_fwd.cu) against FlashAttention-3 on MLA shapes, by key-split count.

    python tools/qv_probe.py [--reps 20] [--json OUT.json]

Rows: the fa3api grid's qv_mla_decode; s08's decode part alone (128 decodes, paged 64, 1k-8k keys); s08's
prefill part alone (two 512-token chunks over 2k and 8k keys, causal); the grid's dv512 and dv256_d64 (D 64
without qv). Decode rows run with num_splits 0 (the kernel's choice) and a few forced counts (forcing X
launches exactly what the choice X would; /s2: the split kernel with v21's two K/V stages where its grid has at
most one CTA per SM, three being the default); long rows with the warp-specialized kernel (/ws), its cp.async
form (/ws-cp), its overlap forced on (/ws-ovl; off, /ws-ser, is the default), and with --all v18's wgmma form (/wg), the
mma.sync 64-row form (/mma) and, without qv, the route before the qv kernel took them (/old: q/k padded, V
split). Each is checked against the reference once, timed per call and by CUDA-graph replay
(fa3api_grid.bench: the L2 flushed per replay) against FA3. Needs a GPU.
"""
from __future__ import annotations

import argparse
import json
import random
import sys

from kernelseek import fa3api_grid as G
from kernelseek import qv_attention

NAMES = {2: "ws", 3: "ws-cp", 4: "ws-ovl", 5: "ws-ser", 1: "wg", 0: "mma"}   # kseek_qv_set_big_kernel: warp-
# specialized (K/V by TMA; ws-cp: by cp.async; ws-ovl / ws-ser: the overlap forced on / off), v18 wgmma, mma.sync
MLA = dict(dtype="bf16", head_dim=64, head_dim_v=512, heads_q=16, heads_kv=1, qv=True, scale=0.07216878364870323)


def rows():
    rnd = random.Random(8)
    dec = [rnd.randint(1024, 8192) for _ in range(128)]
    yield dict(MLA, name="qv_mla_decode", fn="kvcache", batch=4, seqlen_q=1, seqlen_k=2049,
               cache_seqlens=[2049, 100, 1500, 7]), [0, 8, 16, 24, 33]
    yield dict(MLA, name="s08_decodes", fn="kvcache", batch=128, seqlen_q=1, seqlen_k=8192, page_size=64,
               cache_seqlens=dec), [0, 2, 4, 8]
    yield dict(MLA, name="s08_prefills", fn="kvcache", seqlens_q=[512, 512], seqlen_k=8192, page_size=64,
               cache_seqlens=[2048, 8192], causal=True), [0]
    for r in G.load_rows():                     # the grid's D 64 / Dv 256-512 rows without qv
        if r["name"] in ("dv512", "dv256_d64"):
            yield r, [0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None)
    ap.add_argument("--all", action="store_true", help="also v18's wgmma form and the mma.sync form")
    a = ap.parse_args(argv)
    out = []
    print(f"{'row':<20}{'splits':>7}{'used':>6}{'ok':>4}{'ours ms':>9}{'graph':>8}{'fa3 ms':>8}{'graph':>8}"
          f"{'x call':>8}{'x grph':>8}")
    for row, splits in rows():
        long = "prefill" in row["name"] or not G.decode_shaped(row)
        variants = [(ns, 2, True, 3) for ns in splits]
        if long:   # the long-sequence kernels A/B; without qv also the route before the qv kernel took it
            variants += [(0, 3, True, 3), (0, 4, True, 3)]
            if a.all:
                variants += [(0, 1, True, 3), (0, 0, True, 3)] + ([(0, 2, False, 3)] if not row.get("qv") else [])
        else:      # the split kernel's stages A/B at the kernel's split choice
            variants += [(0, 2, True, 2)]
        for ns, big, plain, stages in variants:
            r = dict(row, num_splits=ns)
            qv_attention.set_big_kernel(big)
            qv_attention.set_split_stages(stages)
            qv_attention.PLAIN = plain
            call = G.make_call(r)
            chk = G.check(call)
            used = qv_attention.last_splits()
            res = {**r, "cache_seqlens": None, **chk, **G.bench(call, a.reps), "splits_used": used,
                   "big_kernel": NAMES[big], "plain": plain, "split_stages": stages}
            res.update(G.speeds(r, res))
            res["speed"] = res["base_ms"] / res["ours_ms"] if res.get("base_ms") else None
            out.append(res)
            tag = row["name"] + ("" if not long else "/" + NAMES[big] + ("" if plain else "/old")) + ("/s2" if stages == 2 else "")
            print(f"{tag:<20}{ns:>7}{used:>6}{'y' if chk['ok'] else 'N':>4}{res['ours_ms']:>9.4f}"
                  f"{res['ours_graph_ms'] or float('nan'):>8.4f}{res.get('base_ms') or float('nan'):>8.4f}"
                  f"{res.get('base_graph_ms') or float('nan'):>8.4f}{res.get('speed') or float('nan'):>8.3f}"
                  f"{res.get('graph_speed') or float('nan'):>8.3f}  {chk['paths']}", flush=True)
    qv_attention.set_big_kernel(2)
    qv_attention.set_split_stages(3)
    qv_attention.PLAIN = True
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
