"""The goal and its verdict: judged on every scenario, never on the average alone.

A goal file (YAML; goals/default.yaml is an example):
    geomean: 1.0          # target geometric-mean speedup over the timed rows
    min_speedup: 1.0      # default minimum speedup for every scenario
    by_group:             # overrides for rows in a feature group; the first match in file order wins
      decode: 0.9         #   a bare word matches a feature value (kind, dtype, attn) or a true flag
      head_dim=256: 0.8   #   name=value matches Row.features[name]
    by_scenario:          # overrides by scenario name (or bench row number); beat by_group
      dense_causal: 1.1
    max_blocks: 8         # optional: cap on consecutive Stop-hook blocks
    measure: contract     # optional: which speedup is judged: contract (default: decode rows on the
                          #   CUDA-graph measure where it exists, the rest per call, as DESIGN.md's
                          #   measurement contract says), per_call, or graph (results.judged_speedup)
A campaign's results are judged only through its ledger (kernelseek.ledger, via store): evaluations
the loop ran and recorded in the trace with their digest, never a results file that appeared.
A row meets the goal only if its status is passed, its speedup is at least its minimum and it is
not flagged for review (Row.suspicious) without a review that covers it (review.py: same kernel,
same scenario, speedup not grown; the verdict line names the review). A row faster than the GPU's
datasheet peaks is failed by the harness (peaks.py), so it never meets a goal either. Results
whose kernel source hash (meta kernel_sha256) differs from the current kernel file are stale and
never meet a goal; so are results that cannot be tied to a kernel file.
    kernelseek goal RUN_DIR [--goal FILE] [--kernel FILE]     (exit 0 only when met)
    kernelseek goal RUN_A RUN_B [...] --goal goals/milestone_b.yaml
Several runs of the same kernel are judged on the per-scenario median of their speedups (issue 6:
"each target holds on the median of two consecutive runs"); a scenario counts as passed only if it
passed in every run. Runs of different kernel sources, or with different scenarios, are refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import store
from .kernel_source import KernelError, kernel_hash
from .paths import DEFAULT_GOAL

DEFAULT_GOAL_FILE = DEFAULT_GOAL
_KEYS = ("geomean", "min_speedup", "by_group", "by_scenario", "max_blocks", "measure")


class GoalError(ValueError):
    """A goal file that cannot be used; the message names file and field."""


@dataclass
class Goal:
    geomean: float = 1.0
    min_speedup: float = 1.0
    by_group: dict = field(default_factory=dict)
    by_scenario: dict = field(default_factory=dict)
    max_blocks: int | None = None
    measure: str = "contract"           # results.MEASURES: which speedup each row is judged on
    source: str = "built-in"

    def minimum(self, row) -> tuple[float, str]:
        """The minimum speedup for a row and where it comes from."""
        for key in (row.scenario, row.row, str(row.row)):
            if key is not None and key in self.by_scenario:
                return float(self.by_scenario[key]), f"scenario {row.scenario}"
        feats = row.features or {}
        for key, val in self.by_group.items():
            if _in_group(str(key), feats):
                return float(val), f"group {key}"
        return self.min_speedup, "default"


def _in_group(key: str, feats: dict) -> bool:
    def s(v):
        return str(v).lower()
    if "=" in key:
        name, val = (x.strip() for x in key.split("=", 1))
        return name in feats and s(feats[name]) == val.lower()
    return any(v is True and k == key for k, v in feats.items()) or \
        any(not isinstance(v, bool) and s(v) == key.lower() for v in feats.values())


def load_goal(path: str | Path | None = None) -> Goal:
    """A goal from a YAML file; None gives goals/default.yaml, or the built-in parity goal."""
    if path is None:
        if not DEFAULT_GOAL_FILE.is_file():
            return Goal()
        path = DEFAULT_GOAL_FILE
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except OSError as e:
        raise GoalError(f"{p}: cannot read goal file ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise GoalError(f"{p}: not valid YAML ({e})") from None
    return goal_from_dict(doc, str(p))


def goal_from_dict(doc: dict, where: str = "goal") -> Goal:
    """Validate a goal mapping; errors name the source and the field."""
    if not isinstance(doc, dict):
        raise GoalError(f"{where}: a goal is a mapping with fields {', '.join(_KEYS)}")
    for k in doc:
        if k not in _KEYS:
            raise GoalError(f"{where}: unknown field '{k}' (known: {', '.join(_KEYS)})")

    def num(k, v, lo=0.0):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo:
            raise GoalError(f"{where}: field '{k}' must be a number >= {lo}, got {v!r}")
        return float(v)
    g = Goal(source=where)
    g.geomean = num("geomean", doc.get("geomean", g.geomean))
    g.min_speedup = num("min_speedup", doc.get("min_speedup", g.min_speedup))
    for k in ("by_group", "by_scenario"):
        m = doc.get(k) or {}
        if not isinstance(m, dict):
            raise GoalError(f"{where}: field '{k}' must be a mapping of name to minimum speedup")
        setattr(g, k, {name: num(f"{k}.{name}", v) for name, v in m.items()})
    if doc.get("max_blocks") is not None:
        mb = doc["max_blocks"]
        if isinstance(mb, bool) or not isinstance(mb, int) or mb < 0:
            raise GoalError(f"{where}: field 'max_blocks' must be an integer >= 0, got {mb!r}")
        g.max_blocks = mb
    if "measure" in doc:
        from .results import MEASURES
        if doc["measure"] not in MEASURES:
            raise GoalError(f"{where}: field 'measure' must be one of {', '.join(MEASURES)}, got {doc['measure']!r}")
        g.measure = doc["measure"]
    return g


# ---- results and staleness ---------------------------------------------------------------------
find_results = store.find_results   # run dir, results file, or a campaign's latest evaluation


def sha256_file(path: str | Path) -> str:
    """The kernel's hash as evaluate records it (meta kernel_sha256): kernel_source.kernel_hash, the
    plain sha256 of a lone file, else of the kernel's local include closure (a file or a folder)."""
    return kernel_hash(path)


def staleness(meta: dict, kernel: str | Path | None = None, search=()) -> str | None:
    """None when the results belong to the current kernel source; else why they are stale.

    The kernel is `kernel` if given, else meta['kernel'] found as given, or under each of `search`."""
    want = meta.get("kernel_sha256")
    if not want:
        return "results carry no kernel_sha256, so they cannot be tied to the current kernel"
    if kernel is None:
        name = meta.get("kernel")
        if not name:
            return "results name no kernel file (meta.kernel)"
        cands = [Path(name)] + [Path(d) / name for d in search]
        kernel = next((c for c in cands if c.exists()), None)
        if kernel is None:
            return f"kernel file {name} not found, so the results cannot be checked against it"
    try:
        have = sha256_file(kernel)
    except (OSError, KernelError) as e:
        return f"cannot read kernel {kernel} ({getattr(e, 'strerror', None) or e})"
    if have != want:
        return (f"stale: {kernel} changed since it was evaluated (sha256 {have[:12]} now, "
                f"{want[:12]} in the results); run `kernelseek eval` again")
    return None


# ---- the verdict -----------------------------------------------------------------------------
@dataclass
class RowVerdict:
    scenario: str
    row: int | None
    status: str
    speedup: float | None
    minimum: float
    source: str          # where the minimum comes from
    ok: bool
    why: str = ""        # for a row that falls short
    flag: str = ""       # the review flag and its review (a flagged row is never counted silently)
    measure: str = "per_call"  # which speedup `speedup` is: per_call or graph

    def line(self) -> str:
        tag = f"#{self.row}" if self.row is not None else "-"
        sp = (f"{self.speedup:.3f}x" + (" (graph)" if self.measure == "graph" else "")
              if self.speedup is not None else "n/a")
        rel = ">=" if self.speedup is not None and self.speedup >= self.minimum else "<"
        tail = f"{sp} {rel} {self.minimum:.2f}" + (f" ({self.why})" if self.why else "") \
            if self.status == "passed" and self.speedup is not None else self.why
        src = f" ({self.source})" if self.source != "default" else ""
        flag = f" [{self.flag}]" if self.flag else ""
        return f"  {'ok  ' if self.ok else 'FAIL'} {tag:>4} {self.scenario[:40]:40} {tail}{src}{flag}"


@dataclass
class Verdict:
    met: bool
    geomean: float | None
    target: float
    rows: list[RowVerdict]
    stale: str | None = None
    problems: list[str] = field(default_factory=list)
    where: str = ""
    goal_source: str = ""

    @property
    def short(self) -> list[RowVerdict]:
        return [r for r in self.rows if not r.ok]

    def shortfall(self, limit: int = 8) -> str:
        """One paragraph: what stands between these results and the goal."""
        if self.met:
            return "goal met"
        parts = [p for p in [self.stale] + self.problems if p]
        if self.geomean is None or self.geomean < self.target:
            gm = f"{self.geomean:.3f}x" if self.geomean is not None else "n/a"
            parts.append(f"geomean {gm} < target {self.target:.2f}x")
        short = self.short
        if short:
            items = [r.line().strip()[5:].strip() for r in short[:limit]]
            more = f"; and {len(short) - limit} more" if len(short) > limit else ""
            parts.append(f"{len(short)} of {len(self.rows)} scenarios short: " + "; ".join(items) + more)
        return ". ".join(parts)

    def format(self) -> str:
        gm = f"{self.geomean:.3f}x" if self.geomean is not None else "n/a"
        head = f"goal {'MET' if self.met else 'NOT MET'}: {self.where} (goal: {self.goal_source})"
        lines = [head] + [f"  {p}" for p in [self.stale] + self.problems if p]
        lines.append(f"  geomean {gm} {'>=' if self.geomean and self.geomean >= self.target else '<'} "
                     f"target {self.target:.2f}x")
        lines += [r.line() for r in self.rows]
        lines.append(f"{len(self.rows) - len(self.short)} of {len(self.rows)} scenarios meet their minimum")
        return "\n".join(lines)


def judge(rows, meta: dict, goal: Goal, kernel=None, search=(), where: str = "", reviews=()) -> Verdict:
    """The verdict on a results table: every row at or above its minimum and not flagged without a
    review (`reviews`: review.Review list), the geomean at target, and results fresh for the kernel."""
    from .results import geomean, judged_speedup
    from .review import covering
    meta = meta if isinstance(meta, dict) else {}
    verdicts = []
    for r in rows:
        mn, src = goal.minimum(r)
        sp, measure = judged_speedup(r, goal.measure)
        flag = ""
        if r.status != "passed":
            ok, why = False, f"{r.status}" + (f": {r.reason[:60]}" if r.reason else "")
        elif sp is None:
            ok, why = False, ("no graph speedup (eval --graph, a capturable baseline)" if measure == "graph" else
                              "no speedup (n/a: " + (r.baseline_reason or r.baseline_status)[:50] + ")")
        else:
            ok, why = sp >= mn, ""
        if ok and (getattr(r, "runcheck", "") or "").startswith(("unavailable", "off")):
            ok, why = False, f"not trusted: run-time code check {r.runcheck[:80]}"
        if r.suspicious:
            rev = covering(list(reviews), meta.get("kernel_sha256"), r)
            if rev is None:
                ok = False
                flag = f"FLAGGED, not met until reviewed: {r.suspicious_reason}; `kernelseek review`"
            else:
                flag = f"flag reviewed {rev.time_utc[:10]}: {rev.note[:60]}"
        verdicts.append(RowVerdict(r.scenario, r.row, r.status, sp, mn, src, ok, why, flag, measure))
    gm = geomean([v.speedup for v in verdicts if v.status == "passed" and v.speedup is not None]) if rows else None
    stale = staleness(meta, kernel, search)
    problems = [] if rows else ["results hold no rows"]
    met = (not stale and not problems and gm is not None and gm >= goal.geomean
           and all(v.ok for v in verdicts))
    return Verdict(met, gm, goal.geomean, verdicts, stale, problems, where, goal.source)


def judge_run(path, goal: Goal | None = None, kernel=None, search=()) -> Verdict:
    """Load the results at `path` (run dir, results.json or campaign) and judge them.
    Raises FileNotFoundError or ValueError when there are no readable results."""
    from .results import load
    from .review import load_reviews, reviews_path
    res = find_results(path)
    rows, meta = load(res)
    run = res.parent
    extra = [run] + list(run.parents)[:4]
    return judge(rows, meta, goal or load_goal(), kernel, list(search) + extra, where=str(run),
                 reviews=load_reviews(reviews_path(run)))


def median_rows(runs: list[tuple[list, dict, str]]) -> list:
    """Per scenario, the median speedup over `runs` ((rows, meta, where) each, same kernel source and
    scenarios). A row passes only if it passed in every run; its reason names the runs it did not."""
    import dataclasses
    import statistics
    if not runs:
        raise ValueError("no runs to combine")
    first_rows, first_meta, first_where = runs[0]
    sha = first_meta.get("kernel_sha256")
    names = [r.scenario for r in first_rows]
    by_run = []
    for rows, meta, where in runs:
        if meta.get("kernel_sha256") != sha:
            raise ValueError(f"{where}: kernel_sha256 {str(meta.get('kernel_sha256'))[:12]} differs from "
                             f"{first_where}'s {str(sha)[:12]}: a median needs runs of the same kernel")
        got = {r.scenario: r for r in rows}
        if sorted(got) != sorted(names):
            missing = sorted(set(names) ^ set(got))
            raise ValueError(f"{where}: its scenarios differ from {first_where}'s (e.g. {missing[:3]})")
        by_run.append(got)
    out = []
    for name in names:
        rs = [g[name] for g in by_run]
        bad = [where for (_, _, where), r in zip(runs, rs) if r.status != "passed"]
        sps = [r.speedup for r in rs]
        gsps = [r.graph_speedup for r in rs]
        gmed = statistics.median(gsps) if all(g is not None for g in gsps) else None   # the graph measure too
        if bad:
            worst = next(r for r in rs if r.status != "passed")
            out.append(dataclasses.replace(worst, reason=f"not passed in {', '.join(bad)}: {worst.reason}"))
        elif any(sp is None for sp in sps):
            out.append(dataclasses.replace(rs[0], speedup=None, graph_speedup=gmed))
        else:
            flagged = [r for r in rs if r.suspicious]          # flagged in any run: flagged
            out.append(dataclasses.replace(rs[0], speedup=statistics.median(sps), graph_speedup=gmed,
                                           suspicious=bool(flagged),
                                           suspicious_reason=flagged[0].suspicious_reason if flagged else ""))
    return out


def judge_runs(paths, goal: Goal | None = None, kernel=None, search=()) -> Verdict:
    """Judge the per-scenario median of several runs of one kernel (see median_rows)."""
    from .results import load
    if len(paths) == 1:
        return judge_run(paths[0], goal, kernel, search)
    runs = []
    for p in paths:
        res = find_results(p)
        rows, meta = load(res)
        runs.append((rows, meta if isinstance(meta, dict) else {}, str(res.parent)))
    run = find_results(paths[0]).parent
    extra = [run] + list(run.parents)[:4]
    where = f"median of {len(runs)} runs: " + ", ".join(Path(w).name for _, _, w in runs)
    from .review import load_reviews, reviews_path
    return judge(median_rows(runs), runs[0][1], goal or load_goal(), kernel, list(search) + extra, where=where,
                 reviews=load_reviews(reviews_path(run)))
