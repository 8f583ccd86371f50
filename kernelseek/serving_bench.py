"""Time the serving grid on the GPU: our one call per step against the native baselines that compute it.

    python3 tools/serving_bench.py --out DIR [--rows REGEX] [--budget S] [--replays N]   (serving_bench.run)

Per row (serving_grid): the step's tensors (seeded), our call checked against an fp32 computation made
apart from both (serving_grid.independent: SDPA per sequence on gathered pages), every baseline's output
checked the same way (a baseline that fails is not timed, and says why). Then, on one stream:
- per call: timing.time_interleaved over ours and the baselines (batches interleaved, the L2 flushed
  before each batch, the host pinned; host enqueue ms per call and the kernels' device ms too);
- CUDA graph: graph_timing.time_graph per implementation (one captured call, replayed; L2 flushed before each
  replay). A call that cannot be captured says why.
The inputs are not refreshed between calls (the caches are GBs): this compares known implementations,
it is not the harness's defended measurement of an untrusted kernel.
Writes DIR/serving.json (meta: GPU, driver, clocks, torch, git revision, kernel hash, every baseline's
version or why it is unavailable; rows) and DIR/serving.txt (the table, printed last).
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import torch

from . import serving_counts as SC
from . import serving_grid as G
from . import serving_peers as SP
from . import graph_timing as GT
from . import timing

O_TOL = 2e-2      # max |O - O_fp32| for bf16 outputs (as the fa3api grid's bf16 tolerance)


class FlushHooks(timing.Hooks):
    """The undefended timing loop plus an L2 flush before every batch and every graph replay."""

    def __init__(self, device):
        from .fresh import L2Flush
        self.flush = L2Flush(device)

    def before_batch(self, name, sets):
        self.flush()


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _err(o: torch.Tensor, ref: torch.Tensor) -> float:
    return float((o.float() - ref).abs().max()) if o.numel() else 0.0


def check(call, ref) -> tuple[dict, list]:
    """Our call and each baseline once, against the fp32 answer: (our record, [(Peer, err)] that pass)."""
    from . import attention_core as core
    o = G.ours(call)
    _sync()
    rec = {"paths": list(core.RECORD["paths"]), "steps": list(core.RECORD["steps"]), "max_err": _err(o, ref)}
    rec["ok"] = rec["max_err"] <= O_TOL
    rec["fast"] = bool(rec["paths"]) and "naive" not in rec["paths"]
    ran, info = [], {}
    for p in SP.peers(call):
        if p.fn is not None:
            try:
                e = _err(p.fn(), ref)
                _sync()
                if e > O_TOL:
                    p.why, p.fn = f"failed the check: max err {e:.3g} > {O_TOL}", None
                else:
                    ran.append(p)
                info[p.name] = {"how": p.how, "max_err": e} if p.fn else {"how": p.how, "why": p.why}
                continue
            except Exception as ex:  # the library refuses this call: recorded, not timed
                p.why, p.fn = f"{type(ex).__name__}: {str(ex).splitlines()[0][:200] if str(ex) else ''}", None
        info[p.name] = {"how": p.how, "why": p.why}
    rec["baselines"] = info
    return rec, ran


def time_row(call, ran, budget_s: float, replays: int) -> dict:
    """Per-call and graph times of ours and each passing baseline (ms)."""
    hooks = FlushHooks(call.t["q"].device)
    impls = {"ours": lambda i: G.ours(call)}
    impls.update({p.name: (lambda i, f=p.fn: f()) for p in ran})
    per = timing.time_interleaved(impls, 1, budget_s=budget_s, hooks=hooks)
    out = {n: {"time_ms": t.time_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms, "host_ms": t.host_ms,
               "kernel_ms": t.kernel_ms} for n, t in per.items()}
    for n, f in impls.items():
        try:
            out[n]["graph_ms"] = GT.time_graph(lambda h, f=f: f, 1, hooks, n, replays)[0]
        except RuntimeError as e:
            out[n]["graph_ms"], out[n]["graph_note"] = None, str(e)[:200]
    return out


def _best(times: dict, key: str) -> tuple[str | None, float | None]:
    cands = [(v[key], n) for n, v in times.items() if n != "ours" and v.get(key)]
    return (min(cands)[1], min(cands)[0]) if cands else (None, None)


def summarize(res: dict, bound: SC.Bound | None) -> dict:
    """Speedups over the fastest baseline (per call, graph), and what each time reaches of the bound."""
    t = res.get("times") or {}
    ours = t.get("ours") or {}
    for key, tag in (("time_ms", "call"), ("graph_ms", "graph")):
        name, ms = _best(t, key)
        res[f"best_{tag}"], res[f"best_{tag}_ms"] = name, ms
        res[f"speedup_{tag}"] = ms / ours[key] if ms and ours.get(key) else None
        if bound is not None:
            res[f"ours_{tag}_rates"] = bound.rates(ours.get(key))
            res[f"best_{tag}_rates"] = bound.rates(ms)
    return res


REF_MAX_SCORES_BYTES = 5e9   # reference_fa3 (float64, whole score matrices) runs where one fits in this


def cross_check(call, ind) -> dict:
    """reference_fa3 on the full row, where its float64 score matrix [Hq, Sq, Sk] of the largest sequence
    fits REF_MAX_SCORES_BYTES: its max difference from the independent fp32 answer; else why not run."""
    r = call.row
    need = max(r.heads_q * q * k * 8 for q, k in zip(r.q_lens(), r.k_lens()))
    if need > REF_MAX_SCORES_BYTES:
        return {"ref_fa3": f"not run: a {need / 1e9:.1f} GB float64 score matrix"}
    o, _ = G.reference(call)
    return {"ref_fa3": "run", "ref_fa3_err": float((o - ind.double()).abs().max())}


def run_row(row, budget_s: float, replays: int, gpu: str, seed: int = 0) -> dict:
    b = SC.bound_for_gpu(row, gpu)
    res = {"name": row.name, "model": row.model, "mix": row.mix(), "bytes": SC.min_bytes(row), "flops": SC.flops(row),
           "prefill_flops": SC.flops(row, prefill_only=True), "bytes_parts": SC.bytes_parts(row)}
    if b is not None:
        res.update(bound_ms=b.ms, limit=b.limit, bound_bytes_ms=b.bytes_ms, bound_flops_ms=b.flops_ms)
    t0 = time.perf_counter()
    try:
        call = G.make_call(row, device="cuda", seed=seed)
        ref = G.independent(call, dtype=torch.float32)
        rec, ran = check(call, ref)
        torch.cuda.empty_cache()
        rec.update(cross_check(call, ref))
        del ref
        torch.cuda.empty_cache()
        res.update(rec)
        if rec["ok"]:
            res["times"] = time_row(call, ran, budget_s, replays)
            summarize(res, b)
    except Exception as e:  # a row's failure is a result; the others still run
        res.update(ok=False, error=f"{type(e).__name__}: {str(e)[:300]}")
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    _sync()
    torch.cuda.empty_cache()
    return res


def meta() -> dict:
    from . import attention_core as core
    from .build import source_hash
    from .evaluate import git_revision
    from .worker import _meta
    m = _meta()
    m.update(git_rev=git_revision(), kernel=str(core.DEFAULT_KERNEL), started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             build_defines=os.environ.get("KSEEK_ATTENTION_DEFINES", ""))   # a variant's A/B (attention_core._lib)
    try:
        m["kernel_hash"] = source_hash(core.DEFAULT_KERNEL)
    except Exception as e:
        m["kernel_hash"] = f"unknown ({type(e).__name__})"
    return m


def _f(x, spec):
    """x formatted by spec ("8.3f"), or "-" padded to the same width."""
    return format(x, spec) if isinstance(x, (int, float)) else "-".rjust(int(spec.split(".")[0] or 0))


def table(rows: list[dict]) -> str:
    """One line per row: correctness, our per-call / graph ms, the best baseline's, speedups, bound fractions."""
    head = (f"{'row':44} {'ok':>2} {'ours ms':>8} {'graph':>7} {'host':>6} {'best':>10} {'best ms':>8} {'graph':>7} "
            f"{'x call':>6} {'x grph':>6} {'bound':>6} {'lim':>5} {'%bnd':>5}")
    out = [head]
    for r in rows:
        t = (r.get("times") or {}).get("ours") or {}
        rates = r.get("ours_graph_rates") or r.get("ours_call_rates") or {}
        out.append(f"{r['name'][:44]:44} {'y' if r.get('ok') else 'N':>2} {_f(t.get('time_ms'), '8.3f')} "
                   f"{_f(t.get('graph_ms'), '7.3f')} {_f(t.get('host_ms'), '6.3f')} {str(r.get('best_call') or '-'):>10} "
                   f"{_f(r.get('best_call_ms'), '8.3f')} {_f(r.get('best_graph_ms'), '7.3f')} "
                   f"{_f(r.get('speedup_call'), '6.3f')} {_f(r.get('speedup_graph'), '6.3f')} {_f(r.get('bound_ms'), '6.3f')} "
                   f"{str(r.get('limit', '-')):>5} {_f(100 * rates['frac_bound'] if rates else None, '5.1f')}"
                   + (f"  {r['error'][:80]}" if r.get("error") else ""))
    return "\n".join(out)


def run(out, rows_regex: str = "", budget_s: float = 0.4, replays: int = 20, grid=None) -> list[dict]:
    """Every matching row of the grid, one after the other; OUT/serving.json rewritten after each row (a
    call stopped early keeps what finished), OUT/serving.txt (the table) at the end; returns the rows."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    m = meta()
    results = []
    for row in (r for r in G.load_rows(grid) if re.search(rows_regex, r.name)):
        res = run_row(row, budget_s, replays, m.get("gpu"))
        print(json.dumps({k: v for k, v in res.items() if k != "bytes_parts"}, default=str)[:600], flush=True)
        results.append(res)
        (out / "serving.json").write_text(json.dumps({"meta": m, "rows": results}, indent=1, default=str))
    m["baselines_ran"] = {n: [r["name"] for r in results if "max_err" in (r.get("baselines") or {}).get(n, {})]
                          for n in SP.BINDERS}
    (out / "serving.json").write_text(json.dumps({"meta": m, "rows": results}, indent=1, default=str))
    (out / "serving.txt").write_text(table(results) + "\n")
    return results
