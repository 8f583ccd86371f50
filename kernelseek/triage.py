"""Gap triage: which rows and feature groups bring the geometric-mean speedup down.

The log-geomean deficit. Over the N timed rows (status passed, a positive speedup s_i):
    log G   = (1/N) * sum_i log(s_i)                       (G = geometric-mean speedup)
    deficit = -(1/N) * sum_{i: s_i < 1} log(s_i)   >= 0    (rows below parity)
    surplus =  (1/N) * sum_{i: s_i >= 1} log(s_i)  >= 0    (rows at or above parity)
    G       = exp(surplus - deficit)
A below-parity row's share is -log(s_i)/N; the shares sum to the deficit, and bringing that row
to parity alone multiplies G by exp(share). An above-parity row's surplus is log(s_i)/N.
Failed, errored, refused rows and rows without a usable baseline (n/a) are not timed; they are
listed first, with their reasons. Groups sum the shares of their rows (same N), so the groups of
one feature split the deficit exactly.

    kernelseek triage RUN_DIR [--compare RUN_DIR2] [--noise 0.03] [--plot out.png]
    kernelseek triage RUN_1 --repeat RUN_2 [RUN_3 ...]     (consecutive runs of one kernel)
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from kernelseek import results
from kernelseek.kernel_source import kernel_id
from kernelseek.results import Row

DEFAULT_NOISE = 0.03   # relative run-to-run noise assumed when p10/p90 are missing
REPEAT_TOLERANCE = 0.03  # issue 3: bench26 twice in a row moves each row's speedup by less than this


# ---- inputs ------------------------------------------------------------------------------------
def as_rows(table: Any) -> list[Row]:
    """Rows from a list of Row, a list of dicts, a results DataFrame (results.to_frame) or a run dir."""
    if isinstance(table, (str, Path)):
        return results.load(table)[0]
    if isinstance(table, pd.DataFrame):
        out = []
        for rec in table.to_dict("records"):
            feats = {k[2:]: v for k, v in rec.items() if k.startswith("f_") and not _missing(v)}
            d = {k: (None if _missing(v) else v) for k, v in rec.items() if not k.startswith("f_")}
            d["features"] = feats
            out.append(Row.from_dict(d))
        return out
    return [r if isinstance(r, Row) else Row.from_dict(r) for r in table]


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def is_timed(r: Row) -> bool:
    """A passed row with a positive, finite speedup: the rows the geometric mean is taken over."""
    return r.status == "passed" and r.speedup is not None and math.isfinite(r.speedup) and r.speedup > 0


def row_class(r: Row) -> str:
    """'failed' (any status but passed), 'n/a' (passed, no usable baseline), 'below' or 'above'."""
    if r.status != "passed":
        return "failed"
    if not is_timed(r):
        return "n/a"
    return "below" if r.speedup < 1.0 else "above"


def _reason(r: Row) -> str:
    cls = row_class(r)
    if cls == "failed":
        return f"{r.status}: {r.reason}" if r.reason else r.status
    if cls == "n/a":
        return r.baseline_reason or f"baseline {r.baseline_status}"
    return ""


# ---- one run -----------------------------------------------------------------------------------
def row_table(rows: Iterable[Row] | Any) -> pd.DataFrame:
    """One line per row: failures and n/a first, then below parity by share, then surplus."""
    rows = as_rows(rows)
    n = sum(is_timed(r) for r in rows)
    recs = []
    for r in rows:
        cls = row_class(r)
        logs = math.log(r.speedup) if cls in ("below", "above") else float("nan")
        share = -logs / n if cls == "below" else 0.0
        recs.append({
            "scenario": r.scenario, "row": r.row, "class": cls, "status": r.status,
            "speedup": r.speedup if cls in ("below", "above") else float("nan"),
            "time_ms": r.time_ms, "baseline_ms": r.baseline_ms, "baseline": r.baseline,
            "log_speedup": logs,
            "share": share,                                     # of the deficit, in log units
            "surplus": logs / n if cls == "above" else 0.0,
            "geomean_x_if_parity": math.exp(share),             # G multiplies by this at parity
            "reason": _reason(r),
        })
    df = pd.DataFrame(recs, columns=["scenario", "row", "class", "status", "speedup", "time_ms",
                                     "baseline_ms", "baseline", "log_speedup", "share", "surplus",
                                     "geomean_x_if_parity", "reason"])
    order = {"failed": 0, "n/a": 1, "below": 2, "above": 3}
    df["_o"] = df["class"].map(order)
    df["_k"] = df["surplus"] - df["share"]   # below: largest share first; above: nearest parity first
    df = df.sort_values(["_o", "_k"], kind="stable").drop(columns=["_o", "_k"]).reset_index(drop=True)
    return df


def deficit_summary(rows: Iterable[Row] | Any) -> dict[str, Any]:
    """N timed, deficit, surplus, geomean = exp(surplus - deficit), counts per class."""
    rows = as_rows(rows)
    timed = [r for r in rows if is_timed(r)]
    n = len(timed)
    deficit = -sum(math.log(r.speedup) for r in timed if r.speedup < 1) / n if n else 0.0
    surplus = sum(math.log(r.speedup) for r in timed if r.speedup >= 1) / n if n else 0.0
    classes = [row_class(r) for r in rows]
    return {
        "rows": len(rows), "timed": n, "deficit": deficit, "surplus": surplus,
        "geomean": math.exp(surplus - deficit) if n else None,
        "below": classes.count("below"), "above": classes.count("above"),
        "failed": classes.count("failed"), "na": classes.count("n/a"),
    }


def group_table(rows: Iterable[Row] | Any, features: list[str] | None = None) -> pd.DataFrame:
    """Per (feature, value): rows, timed, below, failed/n/a, group geomean, deficit and surplus.

    `deficit` sums the shares of the group's below-parity rows (the run's N), so the values of one
    feature split the run's deficit. `excess` = (group's fraction of the deficit) / (group's
    fraction of timed rows): above 1, the group carries more than its weight.
    """
    rows = as_rows(rows)
    table = row_table(rows)
    by_name = {r.scenario: r for r in rows}
    total = deficit_summary(rows)
    keys = features or sorted({k for r in rows for k in (r.features or {})})
    recs = []
    for key in keys:
        vals: dict[str, list[int]] = {}
        for i, name in enumerate(table["scenario"]):
            v = (by_name[name].features or {}).get(key)
            vals.setdefault(_label(v), []).append(i)
        for v, idx in vals.items():
            sub = table.iloc[idx]
            timed = sub[sub["class"].isin(["below", "above"])]
            d = float(sub["share"].sum())
            frac_d = d / total["deficit"] if total["deficit"] > 0 else 0.0
            frac_n = len(timed) / total["timed"] if total["timed"] else 0.0
            recs.append({
                "feature": key, "value": v, "rows": len(sub), "timed": len(timed),
                "below": int((sub["class"] == "below").sum()),
                "failed": int((sub["class"] == "failed").sum()), "na": int((sub["class"] == "n/a").sum()),
                "geomean": math.exp(timed["log_speedup"].mean()) if len(timed) else float("nan"),
                "worst": float(timed["speedup"].min()) if len(timed) else float("nan"),
                "deficit": d, "surplus": float(sub["surplus"].sum()),
                "deficit_frac": frac_d, "excess": frac_d / frac_n if frac_n else float("nan"),
            })
    df = pd.DataFrame(recs, columns=["feature", "value", "rows", "timed", "below", "failed", "na",
                                     "geomean", "worst", "deficit", "surplus", "deficit_frac", "excess"])
    return df.sort_values(["feature", "deficit"], ascending=[True, False], kind="stable").reset_index(drop=True)


def _label(v) -> str:
    return "-" if v is None else str(v)


@dataclass
class Triage:
    """The triage of one run: rows, groups, the summary, and a text report."""
    rows: pd.DataFrame
    groups: pd.DataFrame
    summary: dict

    def text(self, top_groups: int = 8) -> str:
        return format_report(self, top_groups)


def triage(table: Any, features: list[str] | None = None) -> Triage:
    """Triage a results table (list of Row, DataFrame or run directory)."""
    rows = as_rows(table)
    return Triage(row_table(rows), group_table(rows, features), deficit_summary(rows))


def format_report(t: Triage, top_groups: int = 8) -> str:
    s = t.summary
    gm = f"{s['geomean']:.3f}x" if s["geomean"] else "n/a"
    out = [f"timed {s['timed']}/{s['rows']}  geomean {gm}  = exp(surplus {s['surplus']:.4f} - deficit "
           f"{s['deficit']:.4f})  below parity {s['below']}  failed {s['failed']}  n/a {s['na']}"]
    bad = t.rows[t.rows["class"].isin(["failed", "n/a"])]
    if len(bad):
        out.append("\nnot timed (fix these first):")
        out += [f"  {r.scenario[:40]:40} {'n/a: ' if r['class'] == 'n/a' else ''}{r.reason[:80]}" for _, r in bad.iterrows()]
    below = t.rows[t.rows["class"] == "below"]
    if len(below):
        out.append("\nbelow parity (share of the deficit; geomean gain if brought to parity):")
        for _, r in below.iterrows():
            pct = r.share / s["deficit"] * 100 if s["deficit"] else 0.0
            out.append(f"  {r.scenario[:40]:40} {r.speedup:7.3f}x  share {r.share:.4f} ({pct:4.1f}%)"
                       f"  -> geomean x{r.geomean_x_if_parity:.3f}")
    above = t.rows[t.rows["class"] == "above"]
    if len(above):
        out.append("\nat or above parity (surplus):")
        out += [f"  {r.scenario[:40]:40} {r.speedup:7.3f}x  surplus {r.surplus:.4f}" for _, r in above.iterrows()]
    g = t.groups[t.groups["excess"] > 1].sort_values("excess", ascending=False).head(top_groups)
    if len(g):
        out.append("\ngroups carrying more than their weight (excess = deficit fraction / row fraction):")
        for _, r in g.iterrows():
            out.append(f"  {f'{r.feature}={r.value}':24} timed {r.timed:3d}  geomean {r.geomean:6.3f}x  "
                       f"deficit {r.deficit:.4f} ({r.deficit_frac * 100:4.1f}%)  excess {r.excess:.2f}")
    return "\n".join(out)


# ---- two runs ----------------------------------------------------------------------------------
def _spread(r: Row | None) -> float | None:
    """Half the p10..p90 spread relative to the median (fraction), or None."""
    if r is None or not r.time_ms or r.time_p10_ms is None or r.time_p90_ms is None:
        return None
    return (r.time_p90_ms - r.time_p10_ms) / (2.0 * r.time_ms)


def compare(before: Any, after: Any, noise: float | None = None) -> pd.DataFrame:
    """Per scenario (matched by name): speedup ratio after/before, time change, moved or not.

    `noise` is a relative fraction. When None, each row's noise is the sum of the two runs'
    half p10..p90 spreads, or DEFAULT_NOISE when either run lacks them. A row moved when
    |log(ratio)| > log(1 + noise); the ratio is of speedups when both runs have one, else of
    candidate times (inverted, so > 1 is better). Status changes are reported as moved.
    """
    a = {r.scenario: r for r in as_rows(before)}
    b = {r.scenario: r for r in as_rows(after)}
    names = list(a) + [n for n in b if n not in a]
    recs = []
    for name in names:
        ra, rb = a.get(name), b.get(name)
        sa, sb = _spread(ra), _spread(rb)
        nz = noise if noise is not None else (sa + sb if sa is not None and sb is not None else DEFAULT_NOISE)
        spa = ra.speedup if ra is not None and is_timed(ra) else None
        spb = rb.speedup if rb is not None and is_timed(rb) else None
        ta, tb = (ra.time_ms if ra else None), (rb.time_ms if rb else None)
        ratio = spb / spa if spa and spb else None
        if ratio is None and ta and tb and ra.status == rb.status == "passed":
            ratio = ta / tb
        time_change = tb / ta - 1.0 if ta and tb else None
        st_a, st_b = (ra.status if ra else "absent"), (rb.status if rb else "absent")
        if st_a != st_b:
            moved = "status"
        elif ratio is not None and abs(math.log(ratio)) > math.log1p(nz):
            moved = "better" if ratio > 1 else "worse"
        else:
            moved = ""
        recs.append({"scenario": name, "status_before": st_a, "status_after": st_b,
                     "speedup_before": spa, "speedup_after": spb, "ratio": ratio,
                     "time_before_ms": ta, "time_after_ms": tb, "time_change": time_change,
                     "noise": nz, "moved": moved,
                     "cause": _cause(ra, rb, nz) if moved in ("better", "worse") else ""})
    return pd.DataFrame(recs)


def _host_bound(r: Row) -> bool:
    """The baseline's host enqueue time per call is at least HOST_BOUND of its per-call time."""
    from .timing import HOST_BOUND
    return bool(r.baseline_ms and r.baseline_host_ms and r.baseline_host_ms >= HOST_BOUND * r.baseline_ms)


def _cause(ra: Row, rb: Row, noise: float) -> str:
    """Which side moved a row's speedup: "candidate", "baseline" or "both". A baseline that moved
    while host-bound in either run is named so, with its host ms per call: its per-call time follows
    the host's speed (FA4's Python dispatch on short decode rows), not the GPU."""
    def moved(x, y):
        return bool(x and y) and abs(math.log(y / x)) > math.log1p(noise)
    cand = moved(ra.time_ms, rb.time_ms)
    base = moved(ra.baseline_ms, rb.baseline_ms)
    if base and not cand:
        if _host_bound(ra) or _host_bound(rb):
            return (f"baseline host-bound ({ra.baseline}: host {ra.baseline_host_ms:.3f} -> "
                    f"{rb.baseline_host_ms:.3f} ms/call, per call {ra.baseline_ms:.3f} -> {rb.baseline_ms:.3f} ms)")
        return "baseline"
    return "candidate" if cand and not base else "both"


def format_compare(df: pd.DataFrame, before: Any = None, after: Any = None) -> str:
    lines = []
    if before is not None and after is not None:
        ga, gb = deficit_summary(before)["geomean"], deficit_summary(after)["geomean"]
        if ga and gb:
            lines.append(f"geomean {ga:.3f}x -> {gb:.3f}x ({(gb / ga - 1) * 100:+.1f}%)")
    for what in ("status", "better", "worse"):
        sub = df[df["moved"] == what]
        lines.append(f"{what}: {len(sub)}")
        for _, r in sub.iterrows():
            if what == "status":
                lines.append(f"  {r.scenario[:40]:40} {r.status_before} -> {r.status_after}")
            else:
                tc = f"time {r.time_change * 100:+6.1f}%" if r.time_change is not None and not pd.isna(r.time_change) else ""
                cause = f"  [{r.cause}]" if r.get("cause") else ""
                lines.append(f"  {r.scenario[:40]:40} x{r.ratio:.3f} (noise {r.noise * 100:.1f}%) {tc}{cause}")
    lines.append(f"within noise: {int((df['moved'] == '').sum())}")
    return "\n".join(lines)


# ---- repeatability -------------------------------------------------------------------------------
def p10_speedups(table: Any) -> dict[str, float]:
    """Per scenario, the winning baseline's 10th-percentile time per call over the candidate's (ms /
    ms): the speedup with the slowest 90% of each side's batches left out. Host interference that comes
    and goes over seconds (a host-bound baseline on a VM) lands in the upper tail, so this ratio
    tells a row that moved with it from one that moved in its floor."""
    out = {}
    for r in as_rows(table):
        b = (r.baselines or {}).get(r.baseline or "", {})
        if r.time_p10_ms and b.get("time_p10_ms"):
            out[r.scenario] = b["time_p10_ms"] / r.time_p10_ms
    return out


def repeatability(runs: list[tuple[str, Any]], tol: float = REPEAT_TOLERANCE) -> pd.DataFrame:
    """Each consecutive pair of `runs` ((name, results table), in the order they ran): the rows whose
    speedup moved by more than `tol`, with the side that moved each (compare's cause), the largest
    speedup move, the largest move of the candidate's own per-call time, and the same count on the
    p10 speedups (p10_speedups; None where no row records p10 times)."""
    recs = []
    for (na, ta), (nb, tb) in zip(runs, runs[1:]):
        pa, pb = p10_speedups(ta), p10_speedups(tb)
        p10_moves = [abs(pb[k] / pa[k] - 1.0) for k in pa if k in pb]
        df = compare(ta, tb, noise=tol)
        moves = (df["ratio"].dropna() - 1.0).abs()
        tmove = df["time_change"].dropna().abs()
        over = df[df["moved"] != ""]
        worst = df.loc[moves.idxmax()] if len(moves) else None
        recs.append({
            "pair": f"{na} -> {nb}", "rows": len(df), "over_tol": len(over),
            "max_move": float(moves.max()) if len(moves) else None,
            "max_move_scenario": worst["scenario"] if worst is not None else None,
            "own_time_max_move": float(tmove.max()) if len(tmove) else None,
            "own_time_max_scenario": df.loc[tmove.idxmax(), "scenario"] if len(tmove) else None,
            "moved": [(r.scenario, (r.ratio - 1.0) if r.ratio is not None and not pd.isna(r.ratio) else None,
                       r.cause or r.moved) for r in over.itertuples()],
            "p10_over_tol": sum(m > tol for m in p10_moves) if p10_moves else None,
            "p10_max_move": max(p10_moves) if p10_moves else None,
        })
    return pd.DataFrame(recs)


def format_repeatability(df: pd.DataFrame, tol: float = REPEAT_TOLERANCE) -> str:
    """One paragraph per pair: within tolerance or not, and what moved the rows that did."""
    out = []
    for r in df.itertuples():
        ok = r.over_tol == 0
        mm = f"{r.max_move * 100:.1f}% ({r.max_move_scenario})" if r.max_move is not None else "n/a"
        own = (f"{r.own_time_max_move * 100:.1f}% ({r.own_time_max_scenario})"
               if r.own_time_max_move is not None else "n/a")
        out.append(f"{r.pair}: {'every row within' if ok else f'{r.over_tol} of {r.rows} rows over'} "
                   f"{tol * 100:.0f}%; largest speedup move {mm}; our own time moved at most {own}")
        if getattr(r, "p10_max_move", None) is not None and not pd.isna(r.p10_max_move):
            out.append(f"  on p10 times (each side's fastest batches): {int(r.p10_over_tol)} row{'' if r.p10_over_tol == 1 else 's'} over "
                       f"{tol * 100:.0f}%, largest move {r.p10_max_move * 100:.1f}%")
        for name, move, cause in r.moved:
            mv = f"{move * 100:+.1f}%" if move is not None else ""
            out.append(f"  {name[:40]:40} {mv:>7}  [{cause}]")
    return "\n".join(out)


# ---- a kernel's versions -----------------------------------------------------------------------
# KSEEK_* settings that belong to the harness, not to the kernel (a run before build variants with
# any other KSEEK_* set, e.g. KSEEK_FA3_BN, measured a variant of its kernel)
HARNESS_ENV = {"KSEEK_GIT_REV", "KSEEK_CACHE_DIR", "KSEEK_CEILINGS_DIR", "KSEEK_NVCC", "KSEEK_ADVERSARIAL_OUT"}


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
    """A run's kernel version: its folder name's suffix after the kernel's name (data/runs/ names
    runs <gpu>-<grid>-<time>-<kernel>-<tag>), else the source hash's first 8 hex digits."""
    stem = Path(kernel_id(meta.get("kernel"))).name
    m = re.search(re.escape(stem) + r"-(.+)$", Path(run).name) if stem else None
    return m.group(1) if m else str(meta.get("kernel_sha256") or "?")[:8]


def history(runs: Iterable[Path], kernel: str | None = None) -> pd.DataFrame:
    """One row per version of `kernel` (meta "kernel"; default: the last run's; a file and the folder
    it became are one kernel, see same_kernel), in the order the versions first ran (give `runs`
    oldest first): its number of runs, and the median over them of the geomean speedup, the
    kernel-only geomean, the worst row and each config_group's geomean. Variant runs (is_variant:
    build defines, or a kernel switch in KSEEK_*) are left out; their count is in df.attrs."""
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
    return "\n".join(lines)


# ---- a campaign --------------------------------------------------------------------------------
def campaign_evals(campaign_dir: str | Path) -> list[Path]:
    """The run directories under campaigns/<id>/evals/, in numeric order. For a campaign with a trace,
    only the evaluations its ledger verifies (kernelseek.ledger); a bare folder of runs as it is."""
    from .ledger import evaluations, is_campaign
    if is_campaign(campaign_dir):
        return evaluations(campaign_dir)
    ev = Path(campaign_dir) / "evals"
    dirs = [p for p in ev.iterdir() if (p / "results.json").exists()] if ev.is_dir() else []
    return sorted(dirs, key=lambda p: (int(p.name) if p.name.isdigit() else math.inf, p.name))


def _run_time(path: Path, meta: dict) -> Any:
    for k in ("started_utc", "time", "date", "started", "timestamp"):
        if meta.get(k):
            return meta[k]
    m = re.match(r"(\d{8}-\d{6})", path.name)
    if m:
        return pd.Timestamp(time.strftime("%Y-%m-%dT%H:%M:%S", time.strptime(m.group(1), "%Y%m%d-%H%M%S")))
    p = path / "results.json" if path.is_dir() else path
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
