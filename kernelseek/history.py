"""Results over time: a kernel's versions across committed runs, and a campaign's evaluations.

`history(runs)` is one row per version of a kernel (the median of its runs' geomeans, overall and
per configuration group); `timeline(evals)` is the geomean and worst row of each evaluation of a
campaign, in order.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from kernelseek import results, store
from kernelseek.kernel_source import kernel_id
from kernelseek.results import Row
from kernelseek.rows import as_rows


# ---- a kernel's versions -----------------------------------------------------------------------
# KSEEK_* settings that belong to the harness or to a baseline, not to the kernel (a run with any other
# KSEEK_* set, e.g. KSEEK_FA3_BN, measured a variant of its kernel). KSEEK_FLASHINFER_JIT and
# KSEEK_FA3_LIB choose how a baseline loads; KSEEK_TIMING_CPU the CPU that times; KSEEK_RUNCHECK the check;
# KSEEK_BUNDLED that tools/bundle.sh packs a device call's outputs.
HARNESS_ENV = {"KSEEK_GIT_REV", "KSEEK_CACHE_DIR", "KSEEK_CEILINGS_DIR", "KSEEK_NVCC", "KSEEK_ADVERSARIAL_OUT",
               "KSEEK_FLASHINFER_JIT", "KSEEK_FA3_LIB", "KSEEK_TIMING_CPU", "KSEEK_RUNCHECK", "KSEEK_BUNDLED"}


def is_variant(meta: dict) -> bool:
    """Whether a run measured a variant of its kernel: built with defines (meta build_defines), or,
    in runs before build variants, with a kernel switch set in KSEEK_* (meta kseek_env)."""
    return bool(meta.get("build_defines")) or bool(set(meta.get("kseek_env") or {}) - HARNESS_ENV)


def same_kernel(a: str | None, b: str | None) -> bool:
    """Whether two meta "kernel" paths name one kernel (kernel_source.kernel_id: kernels/fa3_hopper.cu
    of the runs before the split and the folder kernels/fa3_hopper are the same kernel)."""
    return kernel_id(a) == kernel_id(b)


def config_group(r: Row) -> str:
    """The configuration family of a bench row (head dim, causal, layout), for version histories."""
    f = r.features or {}
    if f.get("kind") == "decode":
        return "decode"
    if f.get("varlen") or f.get("window") or f.get("softcap") or f.get("attn", "MHA") != "MHA":
        return "prefill varlen/GQA/window/softcap"
    hd = f.get("head_dim")
    if hd == 64:
        return "prefill d64"
    if hd == 128:
        return "prefill d128 causal" if f.get("causal") else "prefill d128 non-causal"
    return "prefill d96/d192/d256"


def version_label(run: Path, meta: dict) -> str:
    """A run's kernel version: its folder name's suffix after the kernel's stem (data/runs/ names
    runs <gpu>-<grid>-<time>-<kernel>-<tag>), else the source hash's first 8 hex digits."""
    stem = Path(kernel_id(meta.get("kernel"))).name
    m = re.search(re.escape(stem) + r"-(.+)$", Path(run).name) if stem else None
    return m.group(1) if m else str(meta.get("kernel_sha256") or "?")[:8]


def history(runs: Iterable[Path], kernel: str | None = None) -> pd.DataFrame:
    """One row per version of `kernel` (meta "kernel"; default: the last run's), in the order the
    versions first ran (give `runs` oldest first): its number of runs, and the median over them of
    the geomean speedup, the kernel-only geomean, the worst row and each config_group's geomean.
    Variant runs (a kernel switch set in KSEEK_*) are left out; their count is in df.attrs."""
    runs = [Path(p) for p in runs]
    loaded = [(p, *results.load(p)) for p in runs]
    if kernel is None and loaded:
        kernel = loaded[-1][2].get("kernel")
    per: dict[str, list[dict]] = {}
    variants = 0
    for p, rows, meta in loaded:
        if not same_kernel(meta.get("kernel"), kernel):
            continue
        if is_variant(meta):
            variants += 1
            continue
        timed = [r for r in rows if r.status == "passed" and r.speedup is not None]
        rec = {"geomean": results.geomean([r.speedup for r in timed]),
               "kernel_geomean": results.geomean([r.kernel_speedup for r in timed]),
               "worst": min((r.speedup for r in timed), default=None)}
        groups: dict[str, list[float]] = {}
        for r in timed:
            groups.setdefault(config_group(r), []).append(r.speedup)
        rec.update({g: results.geomean(v) for g, v in groups.items()})
        per.setdefault(version_label(p, meta), []).append(rec)

    def med(xs):
        xs = sorted(x for x in xs if x is not None)
        return None if not xs else (xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2)
    out = []
    for label, recs in per.items():
        keys = dict.fromkeys(k for r in recs for k in r)
        out.append({"version": label, "runs": len(recs), **{k: med([r.get(k) for r in recs]) for k in keys}})
    df = pd.DataFrame(out)
    df.attrs.update(kernel=kernel, variants_left_out=variants)
    return df


def format_history(df: pd.DataFrame) -> str:
    """The version table: geomean, kernel-only geomean, worst row, then each group's geomean."""
    if df.empty:
        return "(no runs)"
    groups = [c for c in df.columns if c not in ("version", "runs", "geomean", "kernel_geomean", "worst")]
    f = lambda x: "-" if x is None or pd.isna(x) else f"{x:.3f}"
    names = [g.replace("prefill ", "") for g in groups]
    w = [max(len(n), 6) for n in names]
    lines = [f"{'version':12} {'runs':>4} {'geomean':>7} {'kernel':>7} {'worst':>6} | "
             + " | ".join(f"{n:>{k}}" for n, k in zip(names, w))]
    for r in df.to_dict("records"):
        lines.append(f"{r['version'][:12]:12} {r['runs']:4} {f(r['geomean']):>7} {f(r.get('kernel_geomean')):>7} "
                     f"{f(r['worst']):>6} | " + " | ".join(f"{f(r.get(g)):>{k}}" for g, k in zip(groups, w)))
    n = df.attrs.get("variants_left_out")
    if n:
        lines.append(f"({n} variant run(s) left out: build defines, or kernel switches in KSEEK_*)")
    lines.append("columns: runs = the version's runs on this grid; geomean = speedup over all rows (baseline ms /\n"
                 "  our ms per call); kernel = the same on the profiler's kernel times; worst = the slowest row's\n"
                 "  speedup; then each configuration group's geomean; every value the median over the runs.")
    return "\n".join(lines)


# ---- a campaign --------------------------------------------------------------------------------
campaign_evals = store.campaign_evals   # a campaign's evaluations, in order (the one rule: store)


def _run_time(path: Path, meta: dict) -> Any:
    for k in ("started_utc", "time", "date", "started", "timestamp"):
        if meta.get(k):
            return meta[k]
    m = re.match(r"(\d{8}-\d{6})", path.name)
    if m:
        return pd.Timestamp(time.strftime("%Y-%m-%dT%H:%M:%S", time.strptime(m.group(1), "%Y%m%d-%H%M%S")))
    p = store.results_file(path)
    return pd.Timestamp(p.stat().st_mtime, unit="s") if p.exists() else None


def timeline(evals: Iterable[Any]) -> pd.DataFrame:
    """Geomean and worst row per evaluation, in the order given.

    Each item is a run directory, a (time, run directory) or a (time, results table) pair.
    """
    recs = []
    for i, item in enumerate(evals):
        when, table, label = None, item, ""
        if isinstance(item, tuple):
            when, table = item
        if isinstance(table, (str, Path)):
            p = Path(table)
            rows, meta = results.load(p)
            when = when if when is not None else _run_time(p, meta)
            label = p.name
        else:
            rows = as_rows(table)
        s = results.summarize(rows)
        w = s["worst"] or {}
        recs.append({"eval": i, "time": when, "label": label, "scenarios": s["scenarios"],
                     "passed": s["passed"], "timed": s["timed"], "geomean": s["geomean_speedup"],
                     "worst_speedup": w.get("speedup"), "worst_scenario": w.get("scenario"),
                     "at_parity": s["at_parity"]})
    return pd.DataFrame(recs)
