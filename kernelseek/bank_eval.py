"""Does the bank ask what the human asked? Score the bank questioner on a benchmark of situations.

A situation (data/questioner_bench/*.yaml) is a campaign frozen at one moment: its evaluations
(committed run directories under data/runs, or small inline tables), the agent's messages, and the
labels: which moment(s) should fire (none: the questioner should stay quiet), which question groups
would have helped, why, and what actually moved the kernel afterwards.

The questioner under test is `triggers.detect` (the first, most urgent moment is the one it acts on)
plus `bank.select` called repeatedly at that moment (each pick joins `asked`, as in a campaign). Per
situation: did the right moment fire, and at which rank is the first question from a helpful group.
Two baselines at the same moment: a random pick from the moment's pool (seeded draws, averaged) and
a fixed pick in the order of the paper's most common human categories. Situations marked
`held_back` (every third id in sorted order, fixed before any tuning) are never tuned on.
"""
from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from . import bank as BK
from . import triggers as T
from .paths import REPO

BENCH_DIR = REPO / "data" / "questioner_bench"
RUNS_DIR = REPO / "data" / "runs"
DEPTH = 10          # questions asked in a row at one moment before giving up
DRAWS = 200         # seeded draws for the random baseline
# The paper's human questions by category, most common first (162 messages; seed 003).
PAPER_ORDER = ("measurement check", "bound differencing", "benchmark validity", "gap triage",
               "agent process", "challenge a limit", "strategy options", "hypothesis check",
               "scenario coverage", "correctness")
KEYS = {"id", "held_back", "source", "history", "expect", "reason", "moved", "arch", "noise", "synthetic"}


class BenchError(ValueError):
    """A benchmark file that cannot be used; the message names file, situation and field."""


@dataclass
class Situation:
    id: str
    history: T.History
    rows: list                      # the latest results table (results.Row), fills the slots
    moments: tuple                  # expected moments; () = the questioner should stay quiet
    categories: tuple               # bank groups whose questions would have helped
    reason: str                     # why these labels
    moved: str                      # what actually moved the kernel afterwards
    source: str = ""
    arch: str | None = None
    file: str = ""
    held_back: bool = False         # never tuned on (every third id in sorted order, fixed up front)


# ---- loading --------------------------------------------------------------------------------
def _inline_eval(ev: dict, where: str):
    """An Evaluation and its Rows from an inline table {t, speedups, statuses?, label?}."""
    from .results import Row, geomean
    sp = ev.get("speedups")
    if sp is None and isinstance(ev.get("geomean"), (int, float)):   # a summary-only earlier point
        return T.Evaluation(time=60.0 * float(ev.get("t", 0)), geomean=float(ev["geomean"]),
                            label=str(ev.get("label", ""))), []
    if not isinstance(sp, dict) or not sp:
        raise BenchError(f"{where}: an evaluation needs `run`, a `speedups` mapping or a `geomean`")
    st = {k: "passed" for k in sp}
    st.update(ev.get("statuses") or {})
    rows = [Row(scenario=str(k), status=st[k], speedup=(float(v) if v is not None else None))
            for k, v in sp.items()]
    g = geomean([r.speedup for r in rows if r.status == "passed" and r.speedup])
    e = T.Evaluation(time=60.0 * float(ev.get("t", 0)), speedups={r.scenario: r.speedup for r in rows},
                     geomean=g, statuses=st, label=str(ev.get("label", "")),
                     bound_fractions={str(k): float(v) for k, v in (ev.get("bound_fractions") or {}).items()})
    return e, rows


def _run_eval(ev: dict, where: str):
    """An Evaluation and its Rows from a committed run directory (data/runs/NAME)."""
    from . import store
    from .results import load
    d = RUNS_DIR / str(ev["run"])
    if not d.is_dir():
        raise BenchError(f"{where}: run {ev['run']!r} is not a directory under data/runs")
    rows, meta = load(store.results_file(d))
    if ev.get("rows"):
        keep = {int(x) for x in ev["rows"]}
        rows = [r for r in rows if r.row in keep]
    e = T.Evaluation.from_rows(rows, 60.0 * float(ev.get("t", 0)), label=str(ev["run"]))
    return e, rows


def situation(raw: dict, file: str) -> Situation:
    """One situation from its mapping; BenchError names the file, the id and the field."""
    sid = raw.get("id") if isinstance(raw, dict) else None
    where = f"{file}: {sid or '?'}"
    if not isinstance(sid, str) or not sid.strip():
        raise BenchError(f"{where}: field 'id' missing")
    unknown = set(raw) - KEYS
    if unknown:
        raise BenchError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    for k in ("reason", "moved", "source"):
        if not isinstance(raw.get(k), str) or not raw[k].strip():
            raise BenchError(f"{where}: field '{k}' missing or empty (every label needs its reason)")
    hist, exp = raw.get("history") or {}, raw.get("expect") or {}
    evs = hist.get("evaluations") or []
    if not evs:
        raise BenchError(f"{where}: history.evaluations is empty")
    evals, rows = [], []
    for i, ev in enumerate(evs):
        w = f"{where}: history.evaluations[{i}]"
        e, r = (_run_eval if "run" in ev else _inline_eval)(ev, w)
        evals.append(e)
        rows = r or rows
    msgs = [T.Message(m.get("role", "assistant"), str(m["text"]), 60.0 * float(m.get("t", 0)))
            for m in hist.get("messages") or []]
    moments, cats = tuple(exp.get("moments") or ()), tuple(exp.get("categories") or ())
    for m in moments:
        if m not in BK.MOMENTS:
            raise BenchError(f"{where}: expect.moments: {m!r} is not one of {', '.join(BK.MOMENTS)}")
    for c in cats:
        if c not in BK.GROUPS:
            raise BenchError(f"{where}: expect.categories: {c!r} is not a bank group")
    if bool(moments) != bool(cats):
        raise BenchError(f"{where}: expect needs both moments and categories, or neither (quiet)")
    return Situation(sid.strip(), T.History(evals, msgs, raw.get("noise")), rows, moments, cats,
                     " ".join(raw["reason"].split()), " ".join(raw["moved"].split()),
                     " ".join(raw["source"].split()), raw.get("arch"), file, raw.get("held_back") is True)


def load_bench(paths=None) -> list[Situation]:
    """Every situation of the benchmark files (default: data/questioner_bench/*.yaml)."""
    files: list[Path] = []
    for p in [Path(p) for p in (paths or [BENCH_DIR])]:
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    out: list[Situation] = []
    for f in files:
        doc = BK.read_yaml(f)
        items = doc.get("situations") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise BenchError(f"{f}: top level must be a mapping with a 'situations' list")
        out.extend(situation(raw, str(f)) for raw in items)
    ids = [s.id for s in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise BenchError(f"duplicate situation id(s): {', '.join(dup)}")
    if not out:
        raise BenchError(f"no situations in {', '.join(map(str, files)) or paths}")
    return out


# ---- scoring ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    id: str
    held_back: bool
    expected: tuple                 # moments that should fire
    fired: tuple                    # moments detect() returned, most urgent first
    moment_ok: bool                 # quiet when it should be, or the first fired moment expected
    rank: int | None                # rank of the first helpful question (1-based), None if none
    asked: list = field(default_factory=list)      # (id, group) in the order asked
    random_top1: float = 0.0        # baselines, at the moment that fired (0 if it was wrong)
    random_top3: float = 0.0
    common_top1: float = 0.0
    common_top3: float = 0.0


def ranked(moment: T.Moment, sit: Situation, entries, depth: int = DEPTH) -> list:
    """The questions the bank asks at `moment`, one after another (each joins `asked`)."""
    asked: list[str] = []
    out = []
    for _ in range(depth):
        q = BK.select(moment.kind, sit.rows, entries=entries, asked=asked, arch=sit.arch,
                      prefer_groups=moment.prefer_groups, noise=sit.history.noise)
        if q is None:
            break
        asked.append(q.id)
        out.append(q)
    return out


def pool(moment: str, entries, arch=None) -> list:
    """The entries selection may offer at `moment` (no reference implementation)."""
    return [e for e in entries if moment in e.moments and e.usable(False, arch)]


def random_baseline(groups: list[str], helpful, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """Share of seeded random picks (without replacement) whose first / any of three is helpful."""
    if not groups:
        return 0.0, 0.0
    h1 = h3 = 0
    for k in range(draws):
        pick = random.Random(seed * 100003 + k).sample(groups, min(3, len(groups)))
        h1 += pick[0] in helpful
        h3 += any(g in helpful for g in pick)
    return h1 / draws, h3 / draws


def common_baseline(groups: list[str], helpful) -> tuple[float, float]:
    """The fixed pick: the paper's most common categories that the moment's pool holds, in order."""
    order = [g for g in PAPER_ORDER if g in set(groups)]
    return float(bool(order) and order[0] in helpful), float(any(g in helpful for g in order[:3]))


def score(sit: Situation, entries=None, depth: int = DEPTH, draws: int = DRAWS, **detect_kw) -> Outcome:
    """Run the questioner on one situation."""
    entries = BK.load() if entries is None else entries
    found = T.detect(sit.history, **detect_kw)
    fired = tuple(m.kind for m in found)
    ok = (not fired) if not sit.moments else bool(fired) and fired[0] in sit.moments
    out = Outcome(sit.id, sit.held_back, sit.moments, fired, ok, None)
    if not (ok and fired):
        return out
    qs = ranked(found[0], sit, entries, depth)
    out.asked = [(q.id, q.group) for q in qs]
    out.rank = next((i + 1 for i, q in enumerate(qs) if q.group in sit.categories), None)
    groups = [e.group for e in pool(found[0].kind, entries, sit.arch)]
    out.random_top1, out.random_top3 = random_baseline(groups, sit.categories, draws,
                                                       zlib.crc32(sit.id.encode()))
    out.common_top1, out.common_top3 = common_baseline(groups, sit.categories)
    return out


def summarize(outs: list[Outcome]) -> dict:
    """Firing precision and recall, and top-1 / top-3 hit rates of the bank and the baselines.

    precision: of the situations where something fired, the share where the right moment fired
    first; recall: of those that should fire, the share where it did; hit rates over the
    situations that should fire (a wrong or missing moment is a miss for every arm)."""
    fired = [o for o in outs if o.fired]
    should = [o for o in outs if o.expected]
    quiet = [o for o in outs if not o.expected]

    def rate(xs):
        return sum(xs) / len(xs) if xs else float("nan")
    return {
        "situations": len(outs), "should_fire": len(should), "quiet": len(quiet),
        "precision": rate([o.moment_ok for o in fired]),
        "recall": rate([o.moment_ok for o in should]),
        "quiet_kept": rate([o.moment_ok for o in quiet]),
        "top1": rate([o.rank == 1 for o in should]),
        "top3": rate([o.rank is not None and o.rank <= 3 for o in should]),
        "random_top1": rate([o.random_top1 for o in should]),
        "random_top3": rate([o.random_top3 for o in should]),
        "common_top1": rate([o.common_top1 for o in should]),
        "common_top3": rate([o.common_top3 for o in should]),
    }


def evaluate(situations: list[Situation], entries=None, **kw) -> dict:
    """Outcomes per situation and summaries for the tuning part, the held-back part and all."""
    entries = BK.load() if entries is None else entries
    outs = [score(s, entries, **kw) for s in situations]
    return {"outcomes": outs,
            "tuning": summarize([o for o in outs if not o.held_back]),
            "held_back": summarize([o for o in outs if o.held_back]),
            "all": summarize(outs)}


def _pct(x: float) -> str:
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:4.0f}%"


def report(result: dict) -> str:
    """The per-situation table and the summary, as text for the console."""
    lines = [f"{'situation':30} {'part':5} {'expected':20} {'fired':28} {'ok':3} {'rank':>4}  first questions"]
    for o in result["outcomes"]:
        part = "held" if o.held_back else "tune"
        exp = ",".join(o.expected) or "(quiet)"
        fired = ",".join(o.fired) or "-"
        rank = "-" if o.rank is None else str(o.rank)
        qs = " ".join(q for q, _ in o.asked[:3])
        lines.append(f"{o.id:30} {part:5} {exp:20} {fired:28} {'yes' if o.moment_ok else 'NO':3} {rank:>4}  {qs}")
    lines.append("")
    lines.append(f"{'part':10} {'n':>3} {'fire?':>5} {'prec':>5} {'recall':>6} {'quiet':>5} | "
                 f"{'bank@1':>6} {'bank@3':>6} | {'rand@1':>6} {'rand@3':>6} | {'comm@1':>6} {'comm@3':>6}")
    for part in ("tuning", "held_back", "all"):
        s = result[part]
        lines.append(f"{part:10} {s['situations']:3} {s['should_fire']:5} {_pct(s['precision']):>5} "
                     f"{_pct(s['recall']):>6} {_pct(s['quiet_kept']):>5} | {_pct(s['top1']):>6} "
                     f"{_pct(s['top3']):>6} | {_pct(s['random_top1']):>6} {_pct(s['random_top3']):>6} | "
                     f"{_pct(s['common_top1']):>6} {_pct(s['common_top3']):>6}")
    return "\n".join(lines)


def table(result: dict):
    """The summary as a pandas DataFrame (rows: tuning, held_back, all)."""
    import pandas as pd
    return pd.DataFrame({p: result[p] for p in ("tuning", "held_back", "all")}).T


def figure(result: dict):
    """Top-1 and top-3 hit rates of the bank and the two baselines, tuning and held-back parts."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    arms = (("bank", "top1", "top3", "#2980b9"), ("random pick", "random_top1", "random_top3", "#95a5a6"),
            ("most common category", "common_top1", "common_top3", "#e67e22"))
    for i, part in enumerate(("tuning", "held_back")):
        ax = fig.add_subplot(1, 2, i + 1)
        s = result[part]
        for j, (name, k1, k3, c) in enumerate(arms):
            for x, k in ((0, k1), (1, k3)):
                v = 0.0 if math.isnan(s[k]) else s[k]
                ax.bar(x + 0.27 * (j - 1), v, width=0.26, color=c, label=name if x == 0 else None)
                ax.annotate(f"{100 * v:.0f}", (x + 0.27 * (j - 1), v), ha="center", va="bottom", fontsize=7)
        ax.set_xticks([0, 1], ["top-1", "top-3"])
        ax.set_ylim(0, 1.1)
        ax.set_title(f"{part.replace('_', '-')} ({s['should_fire']} should fire, "
                     f"precision {_pct(s['precision']).strip()})", fontsize=9)
        if i == 0:
            ax.set_ylabel("share with a helpful question")
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8)
    return fig
