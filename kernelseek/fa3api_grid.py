"""The fa3api grid (kernelseek/grids/fa3api.yaml): FlashAttention-3 calls through kernelseek.attention.

    python tools/fa3api_grid.py [--check-only] [--rows REGEX] [--json OUT.json]   (the command line)
    G.run_rows(G.load_rows(), check_only=True, reps=1)                           (from Python)

Each row is one FA3 interface call with one feature (its `feature`). Per row: the call runs on the
GPU, is checked against reference_fa3 (float64) and its kernel paths are recorded (a row on the
naive fallback fails); unless --check-only it is timed (CUDA events, median) against FlashAttention-3
itself (vLLM's build, kernelseek/baselines/fa3_vllm.py) when FA3 takes the same call, else against
our same call without the feature (issue 25's 0.8x rule), per call (eager, host work included) and in
CUDA-graph replay where the call can be captured (graph_timing.time_graph; a call that cannot be
captured says why). Decode-shaped rows are judged on graph time, the others on per-call time
(../shared/DESIGN.md, "Measurement contract"). Prints one line per row and a table.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

import torch
import yaml

from . import attention as A
from . import attention_core as C
from . import reference_fa3 as R
from .call_timing import graph_ms, graphs, per_call_ms, time_ms  # noqa: F401 (tools time rows with them)
from .paths import GRIDS

KEYS = {"name", "feature", "fn", "dtype", "batch", "seqlen_q", "seqlen_k", "seqlens_q", "seqlens_k", "heads_q",
        "heads_kv", "head_dim", "head_dim_v", "causal", "window", "attention_chunk", "softcap", "seqused_q",
        "seqused_k", "cache_seqlens", "leftpad", "page_size", "cache_batch", "new_kv", "rotary", "interleaved",
        "qv", "num_splits"}
TOL = {"bf16": (2e-2, 1e-2), "fp16": (5e-3, 1e-2), "fp8": (1e-1, 5e-2)}   # (o max abs, lse max abs)
FAST = {"decode", "prefill", "prefill_fp8", "mixed", "gather", "mixed_gather", "qv", "empty"}   # "empty": no rows or no keys, nothing launched; "qv": kernels/qv_fwd.cu
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}
DECODE_MAX_Q = 4          # varlen rows whose every query length is at most this are decode-shaped


def decode_shaped(row: dict) -> bool:
    """True for a decode-shaped row: seqlen_q 1, or every seqlens_q <= DECODE_MAX_Q (a few queries per
    sequence, as speculative decoding). Serving engines replay those steps as CUDA graphs, so such a
    row is judged on graph time; every other row on per-call time (DESIGN.md, "Measurement contract")."""
    if "seqlens_q" in row:
        return max(row["seqlens_q"]) <= DECODE_MAX_Q
    return row.get("seqlen_q") == 1


def load_rows(path=None) -> list[dict]:
    """Rows with the defaults merged; a bad key names the row and the key."""
    path = path or GRIDS / "fa3api.yaml"
    raw = yaml.safe_load(open(path))
    rows = []
    for i, r in enumerate(raw.get("rows") or []):
        row = {**raw.get("defaults", {}), **r}
        bad = set(row) - KEYS
        if bad or "name" not in row:
            raise ValueError(f"{path}: row {i} ({row.get('name')}): unknown or missing fields {sorted(bad) or 'name'}")
        rows.append(row)
    return rows


def matching(pattern: str, device="cuda", path=None):
    """(row, its Call) for each row whose name matches the regex `pattern`: the GPU tools' loop."""
    import re
    for row in load_rows(path):
        if re.search(pattern, row["name"]):
            yield row, make_call(row, device=device)


@dataclass
class Call:
    """One row's tensors; run(drop=None) makes our call (drop: the feature left out), ref() answers it."""
    row: dict
    t: dict = field(default_factory=dict)

    def kwargs(self, drop: str | None = None) -> dict:
        r, t = self.row, self.t
        kw = dict(causal=bool(r.get("causal")), window_size=tuple(r.get("window", (-1, -1))),
                  softcap=float(r.get("softcap", 0.0)), q_descale=t.get("qd"), k_descale=t.get("kd"),
                  v_descale=t.get("vd"), attention_chunk=0 if drop == "attention_chunk" else r.get("attention_chunk", 0))
        if r.get("qv") and drop != "qv":
            kw["qv"] = t["qv"]
        if r["fn"] == "varlen":
            kw.update(cu_seqlens_q=t["cu_q"], cu_seqlens_k=t["cu_k"], max_seqlen_q=max(r["seqlens_q"]),
                      max_seqlen_k=max(r["seqlens_k"]), seqused_q=None if drop == "seqused_q" else t.get("sq_used"),
                      seqused_k=t.get("sk_used"))
        if r["fn"] == "kvcache":
            kw.update(cache_seqlens=t["seqlens"], page_table=t.get("table"), cache_leftpad=t.get("leftpad"),
                      num_splits=0 if drop == "num_splits" else r.get("num_splits", 0),
                      cache_batch_idx=None if drop == "cache_batch_idx" else t.get("idx"))
            if "cu_q" in t:
                kw.update(cu_seqlens_q=t["cu_q"], max_seqlen_q=max(r["seqlens_q"]))
            if r.get("new_kv") and drop not in ("append", "append_rotary"):
                kw.update(k=t["kn"], v=t["vn"], cu_seqlens_k_new=t.get("cu_new"))
                if r.get("rotary"):
                    kw.update(rotary_cos=t["cos"], rotary_sin=t["sin"], rotary_interleaved=bool(r.get("interleaved")))
            elif r.get("new_kv"):
                kw["cache_seqlens"] = t["seqlens_after"]
        return kw

    def caches(self, drop=None):
        t = self.t
        if drop == "cache_batch_idx" and "idx" in t and "table" not in t:
            return t["kc"][t["idx"].long()].contiguous(), t["vc"][t["idx"].long()].contiguous()
        return t["kc"].clone(), t["vc"].clone()  # fresh caches: appends write into them

    def run(self, drop=None, caches=None):
        """Our call; caches: (k_cache, v_cache) to use (timing loops pass them once), else fresh copies."""
        return self.bound(drop, caches)()

    def bound(self, drop=None, caches=None):
        """Our call with its arguments made once: a no-argument callable (what the timing loops time, as
        they time FA3's op with its arguments made once)."""
        r, t, kw = self.row, self.t, self.kwargs(drop)
        if r["fn"] == "func":
            return functools.partial(A.flash_attn_func, t["q"], t["k"], t["v"], return_attn_probs=True, **kw)
        if r["fn"] == "varlen":
            pos = [kw.pop(n) for n in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")]
            return functools.partial(A.flash_attn_varlen_func, t["q"], t["k"], t["v"], *pos, return_attn_probs=True,
                                     **kw)
        kc, vc = caches or self.caches(drop)
        if drop == "cache_batch_idx" and "table" in t and "idx" in t:
            kw["page_table"] = t["table"][t["idx"].long()]
        return functools.partial(A.flash_attn_with_kvcache, t["q"], kc, vc, return_softmax_lse=True, **kw)

    def ref(self):
        r, t, kw = self.row, self.t, self.kwargs()
        common = dict(causal=kw["causal"], window_size=kw["window_size"], attention_chunk=kw["attention_chunk"],
                      softcap=kw["softcap"], q_descale=t.get("qd"), k_descale=t.get("kd"), v_descale=t.get("vd"),
                      qv=kw.get("qv"))
        if r["fn"] == "func":
            return R.attention_ref(t["q"], t["k"], t["v"], **common)
        if r["fn"] == "varlen":
            return R.attention_ref(t["q"], t["k"], t["v"], cu_seqlens_q=t["cu_q"], cu_seqlens_k=t["cu_k"],
                                   seqused_q=t.get("sq_used"), seqused_k=t.get("sk_used"), **common)
        o, lse, _, _ = R.kvcache_ref(t["q"], t["kc"], t["vc"], kw.get("k"), kw.get("v"), cache_seqlens=t["seqlens"],
                                     cache_batch_idx=t.get("idx"), page_table=t.get("table"), leftpad_k=t.get("leftpad"),
                                     cu_seqlens_q=t.get("cu_q"), cu_seqlens_k_new=kw.get("cu_seqlens_k_new"),
                                     rotary_cos=kw.get("rotary_cos"), rotary_sin=kw.get("rotary_sin"),
                                     rotary_interleaved=kw.get("rotary_interleaved", True), **common)
        return o, lse


def _i32(x, dev):
    return torch.tensor(x, dtype=torch.int32, device=dev)


def _cu(lens, dev):
    return _i32([0] + list(torch.tensor(lens).cumsum(0).tolist()), dev)


def make_call(row: dict, seed: int = 0, device="cuda") -> Call:
    """Seeded tensors for one row (randn, as FA3's tests; fp8: randn cast, descales in [0.5, 1.5))."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    dt = DT[row["dtype"]]
    hq, hkv, d = row["heads_q"], row["heads_kv"], row["head_dim"]
    dv = row.get("head_dim_v", d)
    rn = lambda *s: torch.randn(*s, generator=g).to(device=device).to(dt)
    t, fn = {}, row["fn"]
    varq = "seqlens_q" in row
    b = len(row["seqlens_q"]) if varq else row["batch"]
    t["q"] = rn(sum(row["seqlens_q"]), hq, d) if varq else rn(b, row["seqlen_q"], hq, d)
    if row.get("qv"):
        t["qv"] = rn(*t["q"].shape[:-1], dv)
    if varq:
        t["cu_q"] = _cu(row["seqlens_q"], device)
    if fn == "func":
        t["k"], t["v"] = rn(b, row["seqlen_k"], hkv, d), rn(b, row["seqlen_k"], hkv, dv)
    elif fn == "varlen":
        t["k"], t["v"] = rn(sum(row["seqlens_k"]), hkv, d), rn(sum(row["seqlens_k"]), hkv, dv)
        t["cu_k"] = _cu(row["seqlens_k"], device)
        for key, name in (("seqused_q", "sq_used"), ("seqused_k", "sk_used")):
            if key in row:
                t[name] = _i32(row[key], device)
    else:
        _cache_tensors(row, t, b, rn, g, device)
    if row["dtype"] == "fp8":
        for n in ("qd", "kd", "vd"):
            t[n] = (torch.rand(b, hkv, generator=g) + 0.5).to(device)
    return Call(row, t)


def _cache_tensors(row, t, b, rn, g, device):
    hkv, d = row["heads_kv"], row["head_dim"]
    dv, cap = row.get("head_dim_v", d), row["seqlen_k"]
    bc = row.get("cache_batch", b)
    ps = row.get("page_size")
    if ps:
        per = -(-cap // ps)
        t["kc"], t["vc"] = rn(bc * per, ps, hkv, d), rn(bc * per, ps, hkv, dv)
        t["table"] = torch.randperm(bc * per, generator=g).view(bc, per).to(torch.int32).to(device)
    else:
        t["kc"], t["vc"] = rn(bc, cap, hkv, d), rn(bc, cap, hkv, dv)
    if bc != b:
        t["idx"] = torch.randperm(bc, generator=g)[:b].to(torch.int32).to(device)
    t["seqlens"] = _i32(row.get("cache_seqlens", [cap] * b), device)
    if "leftpad" in row:
        t["leftpad"] = _i32(row["leftpad"], device)
    new = row.get("new_kv")
    if new:
        lens = new if isinstance(new, list) else [new] * b
        if "seqlens_q" in row:
            t["kn"], t["vn"] = rn(sum(lens), hkv, d), rn(sum(lens), hkv, dv)
            t["cu_new"] = _cu(lens, device)
        else:
            t["kn"], t["vn"] = rn(b, lens[0], hkv, d), rn(b, lens[0], hkv, dv)
        t["seqlens_after"] = t["seqlens"] + _i32(lens, device)
        if row.get("rotary"):
            ang = torch.rand(cap, row["rotary"] // 2, generator=g).to(device) * 6.283
            t["cos"], t["sin"] = torch.cos(ang).to(t["q"].dtype), torch.sin(ang).to(t["q"].dtype)


# ---- check, time, baseline -------------------------------------------------------------------------
def check(call: Call) -> dict:
    """Run once; compare with the reference; the kernel paths taken."""
    o, lse = call.run()
    rec = {"paths": list(C.RECORD["paths"]), "steps": list(C.RECORD["steps"])}
    ro, rl = call.ref()
    tol_o, tol_l = TOL[call.row["dtype"]]
    err = (o.double() - ro).abs().max().item() if o.numel() else 0.0
    fin = torch.isfinite(rl)
    inf_ok = bool(torch.equal(torch.isinf(lse), torch.isinf(rl)))
    lerr = (lse.double()[fin] - rl[fin]).abs().max().item() if fin.any() else 0.0
    fast = bool(rec["paths"]) and all(p in FAST for p in rec["paths"])
    ok = err <= tol_o and lerr <= tol_l and inf_ok
    return {**rec, "max_err": err, "lse_err": lerr, "inf_pattern_ok": inf_ok, "ok": ok, "fast": fast}


def fa3_callable(call: Call):
    """FlashAttention-3 (vLLM's varlen build) on the same call: (fn, "") or (None, why not)."""
    from .baselines import fa3_vllm
    op, why = fa3_vllm.load()
    if op is None:
        return None, why
    r, t, kw = call.row, call.t, call.kwargs()
    names = {a.name for a in op.default._schema.arguments}
    if kw.get("attention_chunk") and "attention_chunk" not in names:
        return None, "this FA3 build has no attention_chunk"
    q = t["q"]
    fa = dict(softmax_scale=A._scale(q, kw.get("qv"), None), is_causal=kw["causal"],
              window_size_left=kw["window_size"][0], window_size_right=kw["window_size"][1], softcap=kw["softcap"],
              q_descale=kw["q_descale"], k_descale=kw["k_descale"], v_descale=kw["v_descale"],
              attention_chunk=kw["attention_chunk"], q_v=kw.get("qv"), num_splits=kw.get("num_splits", 1) or 0,
              sm_margin=0, cp_world_size=1, cp_rank=0, is_rotary_interleaved=bool(kw.get("rotary_interleaved")))
    dense_q = q.dim() == 4
    if dense_q:  # the varlen-only build: pack as vLLM does
        bq, sq = q.shape[0], q.shape[1]
        q = q.reshape(bq * sq, *q.shape[2:])
        fa["q_v"] = None if fa["q_v"] is None else fa["q_v"].reshape(bq * sq, *fa["q_v"].shape[2:])
        fa.update(cu_seqlens_q=_cu([sq] * bq, q.device), max_seqlen_q=sq)
    else:
        fa.update(cu_seqlens_q=t["cu_q"], max_seqlen_q=max(r["seqlens_q"]))
    if r["fn"] == "kvcache":
        kc, vc = call.caches()
        k, v = kc, vc
        fa.update(seqused_k=t["seqlens"], page_table=t.get("table"), kv_batch_idx=t.get("idx"),
                  leftpad_k=t.get("leftpad"), max_seqlen_k=r["seqlen_k"], k_new=kw.get("k"), v_new=kw.get("v"),
                  cu_seqlens_k_new=kw.get("cu_seqlens_k_new"), rotary_cos=kw.get("rotary_cos"),
                  rotary_sin=kw.get("rotary_sin"))
    elif r["fn"] == "varlen":
        k, v = t["k"], t["v"]
        fa.update(cu_seqlens_k=t["cu_k"], max_seqlen_k=max(r["seqlens_k"]), seqused_q=t.get("sq_used"),
                  seqused_k=t.get("sk_used"))
    else:
        bk, sk = t["k"].shape[0], t["k"].shape[1]
        k, v = t["k"].reshape(bk * sk, *t["k"].shape[2:]), t["v"].reshape(bk * sk, *t["v"].shape[2:])
        fa.update(cu_seqlens_k=_cu([sk] * bk, q.device), max_seqlen_k=sk)
    fa = fa3_vllm.with_unset_optionals(op, {n: x for n, x in fa.items() if n in names})
    fn = lambda: op(q, k, v, **fa)
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as e:  # FA3 refuses the combination: compare without the feature instead
        return None, f"FA3 refused it: {type(e).__name__}: {str(e).splitlines()[0][:100]}"
    return fn, ""


def bench(call: Call, reps: int) -> dict:
    """Timed calls reuse one pair of caches (appends rewrite the same slots), as FA3's do; so do the
    captured ones: a graph replays the same call, on the same caches, each time. Per call (ours and the
    baseline in turns: per_call_ms) and graph."""
    hooks = None                                    # None: not on CUDA, graph times "no CUDA"
    if call.t["q"].device.type == "cuda":
        from .serving_bench import FlushHooks
        hooks = FlushHooks(call.t["q"].device)
    kv = call.caches() if call.row["fn"] == "kvcache" else None
    ours = call.bound(caches=kv)
    base, why = fa3_callable(call)
    meta = {"base": "fa3", "ratio": None}
    if base is None:
        drop = call.row.get("feature")
        base = call.bound(drop, caches=call.caches(drop) if call.row["fn"] == "kvcache" else None)
        meta = {"base": f"ours without {drop} ({why})"}
        try:
            base()
        except NotImplementedError as e:
            return {"ours_ms": time_ms(ours, reps), **graphs({"ours": ours}, reps, hooks),
                    "base": f"none ({why}; without {drop}: {e})", "base_ms": None, "base_graph_ms": None,
                    "base_graph_error": "no baseline"}
    ms = per_call_ms([ours, base], reps)            # per call first, as before graphs were timed
    return {"ours_ms": ms[0], **graphs({"ours": ours}, reps, hooks), **meta, "base_ms": ms[1],
            **graphs({"base": base}, reps, hooks)}


def speeds(row: dict, res: dict) -> dict:
    """graph_speed (base / ours, graph replay), judged ("graph" for decode-shaped rows, else
    "per_call") and judged_speed: that one's speed, None where it was not measured."""
    g = res["base_graph_ms"] / res["ours_graph_ms"] if res.get("base_graph_ms") and res.get("ours_graph_ms") else None
    judged = "graph" if decode_shaped(row) else "per_call"
    return {"graph_speed": g, "judged": judged, "judged_speed": g if judged == "graph" else res.get("speed")}


def run_rows(rows, check_only: bool, reps: int, device="cuda") -> list[dict]:
    out = []
    for row in rows:
        res = {"name": row["name"], "feature": row.get("feature")}
        try:
            call = make_call(row, device=device)
            res.update(check(call))
            if not check_only:
                res.update(bench(call, reps))
                if res.get("base_ms"):
                    res["speed"] = res["base_ms"] / res["ours_ms"]   # >= 0.8 passes issue 25's rule
                res.update(speeds(row, res))
        except NotImplementedError as e:
            res.update(ok=False, fast=False, error=f"NotImplementedError: {e}")
        except Exception as e:  # a row's failure is a result; the others still run
            res.update(ok=False, fast=False, error=f"{type(e).__name__}: {str(e)[:300]}")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        print(json.dumps(res), flush=True)
        out.append(res)
    return out


BENIGN = (None, "no CUDA", "no baseline")   # graph errors that are no capture failure


def table(results: list[dict]) -> str:
    """One line per row: check, per-call ms, graph ms (ours, base; "fail": not capturable, the reasons
    under the table), both speeds and which one is judged, the baseline and the kernel paths."""
    lines = [f"{'row':24} {'ok':>2} {'fast':>4} {'max_err':>8} {'ours_ms':>8} {'base_ms':>8} {'ours_gr':>8} "
             f"{'base_gr':>8} {'speed':>6} {'g_speed':>7} {'judged':>6}  base / paths"]
    notes = []
    for r in results:
        f = lambda k, spec: format(r[k], spec) if isinstance(r.get(k), (int, float)) else "-".rjust(int(spec.split(".")[0]))
        gr = lambda k: "fail".rjust(8) if r.get(f"{k}_graph_error") not in BENIGN else f(f"{k}_graph_ms", "8.3f")
        j = {"graph": "graph", "per_call": "call"}.get(r.get("judged"), "-")
        lines.append(f"{r['name'][:24]:24} {'y' if r.get('ok') else 'N':>2} {'y' if r.get('fast') else 'N':>4} "
                     f"{f('max_err', '8.2e')} {f('ours_ms', '8.3f')} {f('base_ms', '8.3f')} {gr('ours')} "
                     f"{gr('base')} {f('speed', '6.2f')} {f('graph_speed', '7.2f')} {j:>6}  "
                     f"{r.get('base', r.get('error', ''))[:36]} {','.join(sorted(set(r.get('paths', []))))}")
        notes += [f"  {r['name']} {k}: {r[f'{k}_graph_error']}" for k in ("ours", "base")
                  if r.get(f"{k}_graph_error") not in BENIGN]
    return "\n".join(lines + (["graph capture failed:"] + notes if notes else []))
