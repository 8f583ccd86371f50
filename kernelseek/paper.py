"""The numbers the paper published, kept as data, drawn as charts, and set beside numbers from traces.

data/paper/<topic>.yaml holds one entry per number as a document states it:
    id, quantity, value, unit, subject, source (a file of ../shared/seeds/), as_written (the number's
    words, found verbatim in the sentence), sentence (verbatim from the source), note (optional),
    unit_assumed (true where the sentence states no unit and `unit` is ours)
left_out.yaml lists the numbers of the documents deliberately not kept, each with its reason
(kernelseek.seed_numbers checks that every number written in the documents is one or the other).
Documents that disagree on a quantity (0.50x and 0.48x for the equipped agent) keep both entries;
`disagreements` lists them and nothing here picks one. `recompute` asks kernelseek.analytics for the
same quantities from trace files and says plainly when analytics is unavailable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml
from matplotlib.figure import Figure

from . import store
from .paths import PAPER, SHARED

PAPER_DIR = Path(os.environ.get("KERNELSEEK_PAPER_DIR") or PAPER)
SEEDS_DIR = Path(os.environ.get("KERNELSEEK_SEEDS_DIR") or SHARED / "seeds")
FIELDS = ("id", "quantity", "value", "unit", "subject", "source", "as_written", "sentence")


@dataclass(frozen=True)
class Number:
    id: str
    quantity: str           # what is counted; entries of one quantity are comparable
    value: float
    unit: str
    subject: str            # the arm, kernel or category the number is about
    source: str             # file name under SEEDS_DIR
    as_written: str         # the number as the sentence writes it
    sentence: str           # verbatim from the source
    topic: str = ""
    note: str = ""
    unit_assumed: bool = False   # the sentence states no unit: `unit` is ours (seed_numbers.unit_stated)


def load(root=PAPER_DIR) -> list[Number]:
    """Every number of every topic file; a missing field or duplicate id raises ValueError naming the file."""
    out: list[Number] = []
    for path in sorted(Path(root).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for i, raw in enumerate(doc.get("numbers") or []):
            missing = [k for k in FIELDS if raw.get(k) in (None, "")]
            if missing:
                raise ValueError(f"{path}: numbers[{i}] ({raw.get('id')}) lacks {', '.join(missing)}")
            out.append(Number(**{k: raw[k] for k in FIELDS}, topic=doc.get("topic", path.stem),
                              note=raw.get("note", ""), unit_assumed=bool(raw.get("unit_assumed"))))
    ids = [n.id for n in out]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise ValueError(f"{root}: duplicate ids {', '.join(dups)}")
    return out


def sources(root=PAPER_DIR) -> dict[str, dict]:
    """file -> {short, title} from sources.yaml."""
    p = Path(root) / "sources.yaml"
    return (yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("sources", {}) if p.exists() else {}


def check(numbers: list[Number], seeds=SEEDS_DIR) -> list[str]:
    """Problems: a sentence not verbatim in its source, or as_written not in its sentence."""
    probs, texts = [], {}
    for n in numbers:
        if n.as_written not in n.sentence:
            probs.append(f"{n.id}: {n.as_written!r} is not in its sentence")
        p = Path(seeds) / n.source
        if p.name not in texts:
            texts[p.name] = p.read_text(encoding="utf-8") if p.exists() else None
        if texts[p.name] is None:
            probs.append(f"{n.id}: source {p} not found")
        elif n.sentence not in texts[p.name]:
            probs.append(f"{n.id}: sentence not found verbatim in {p.name}")
    return probs


def table(numbers: list[Number]) -> pd.DataFrame:
    """One line per number, with its sentence."""
    return pd.DataFrame([n.__dict__ for n in numbers])


def disagreements(numbers: list[Number]) -> pd.DataFrame:
    """Every entry of each quantity the documents give different values for (all kept, none chosen)."""
    df = table(numbers)
    if df.empty:
        return df
    split = df.groupby("quantity")["value"].transform("nunique") > 1
    return df[split].sort_values(["quantity", "value", "source"]).reset_index(drop=True)


def values(numbers: list[Number], quantity: str) -> list[float]:
    """The distinct values the documents give for one quantity, in file order."""
    seen: list[float] = []
    for n in numbers:
        if n.quantity == quantity and n.value not in seen:
            seen.append(n.value)
    return seen


# ---- charts ------------------------------------------------------------------------------------
WORDS = {"fa3": "vs FA3", "fa4": "vs FA4", "geomean": "geomean", "sass": "SASS", "hd256": "hd256",
         "question_driven": "question-driven"}


def pretty(quantity: str) -> str:
    """A quantity's name for a chart: words, not snake_case (fa3 -> vs FA3, question_driven -> question-driven)."""
    q = quantity.replace("question_driven", "question-driven")
    return " ".join(WORDS.get(w, w) for w in q.split("_"))


def _units(numbers: list[Number], quantities: list[str]) -> str:
    """The y-axis label: the unit of the charted quantities (several joined when they differ)."""
    units = list(dict.fromkeys(n.unit + (" (assumed)" if n.unit_assumed else "") for n in numbers
                               if n.quantity in quantities and n.unit))
    return " / ".join(units) if units else "value"


def bars(numbers: list[Number], quantities: list[str], title: str, labels: dict | None = None,
         short: dict | None = None, ylabel: str | None = None) -> Figure:
    """One bar per document and value of the given quantities, grouped by quantity; the colour names
    the document (one colour per document in every chart, in the legend), so two documents that
    disagree stand side by side. A document that repeats a value gets one bar; one that gives two
    different values gets two, the second hatched. The y label is `ylabel` with the quantities' units."""
    from matplotlib.patches import Patch
    fig = Figure(figsize=(max(6.5, 0.6 * len(quantities) + 4.5), 4.6), layout="constrained")
    ax = fig.add_subplot()
    short = short or {}
    x, ticks = 0.0, []
    palette = ["#2980b9", "#e67e22", "#16a085", "#8e44ad", "#c0392b"]
    order = sorted({n.source for n in numbers})     # one colour per document in every chart
    shown: dict[str, str] = {}
    hatched = False
    for q in quantities:
        ents = list({(n.source, n.value): n for n in numbers if n.quantity == q}.values())
        start = x
        for n in ents:
            c = palette[order.index(n.source) % len(palette)]
            second = any(m.source == n.source and m is not n for m in ents[:ents.index(n)])
            hatched |= second
            ax.bar(x, n.value, width=0.8, color=c, hatch="//" if second else None, edgecolor="white")
            ax.annotate(f"{n.value:g}", (x, n.value), ha="center", va="bottom", fontsize=7)
            shown[short.get(n.source, n.source)] = c
            x += 1
        if ents:
            ticks.append(((start + x - 1) / 2, (labels or {}).get(q) or pretty(q)))
        x += 0.6
    handles = [Patch(color=c, label=lab) for lab, c in shown.items()]
    if hatched:
        handles.append(Patch(facecolor="#bbbbbb", hatch="//", edgecolor="white", label="a second value, same document"))
    ax.legend(handles=handles, fontsize=7, title="document", title_fontsize=7)
    ax.set_xticks([t for t, _ in ticks], [lab for _, lab in ticks], rotation=25, ha="right", fontsize=8)
    units = _units(numbers, quantities)
    ax.set_ylabel(units if not ylabel else ylabel if all(u in ylabel for u in units.split(" / ")) else f"{ylabel} ({units})")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    ax.set_title(title, fontsize=10)
    return fig


def before_after(numbers: list[Number], pairs: list[tuple[str, str, str]], title: str) -> Figure:
    """Arrows from a before value to an after value: (label, before quantity, after quantity)."""
    from matplotlib.lines import Line2D
    fig = Figure(figsize=(9.0, 0.65 * len(pairs) + 2.0), layout="constrained")
    ax = fig.add_subplot()
    xs = [1.0]
    for i, (label, qb, qa) in enumerate(pairs):
        b, a = values(numbers, qb), values(numbers, qa)
        if not b or not a:
            continue
        ax.annotate("", (a[0], i), (b[0], i), arrowprops={"arrowstyle": "->", "color": "#27ae60", "lw": 1.5})
        ax.plot([b[0]], [i], "o", color="#7f8c8d")
        xs += [b[0], a[0]]
        for v in (b[0], a[0]):
            ax.annotate(f"{v:g}", (v, i), xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8)
    ax.set_yticks(range(len(pairs)), [p[0] for p in pairs], fontsize=8)
    ax.set_ylim(-0.6, len(pairs) - 0.3)
    pad = 0.08 * (max(xs) - min(xs))                 # annotate() arrows do not widen the axis by themselves
    ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.set_xlabel("speedup vs the baseline (baseline time / kernel time; 1 = parity)")
    ax.legend(handles=[Line2D([], [], marker="o", color="#7f8c8d", ls="none", label="before the question"),
                       Line2D([], [], marker=">", color="#27ae60", label="after it"),
                       Line2D([], [], color="black", ls="--", label="parity (1)")], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=10)
    return fig


# ---- recomputed from traces --------------------------------------------------------------------
@dataclass
class Recomputed:
    """Quantities computed from traces, or why none could be."""
    available: bool
    reason: str = ""
    values: dict = field(default_factory=dict)     # quantity -> value
    traces: list = field(default_factory=list)     # the trace files read


def recompute(paths) -> Recomputed:
    """The paper's quantities recomputed from trace JSONL files, campaign directories or folders of
    traces (every *.jsonl in them) through kernelseek.trace_stats; when that cannot be imported,
    says so and computes nothing."""
    files = trace_files(paths)
    if not files:
        return Recomputed(False, "no trace given", traces=[])
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        return Recomputed(False, f"trace file(s) not found: {', '.join(missing)}", traces=[str(p) for p in files])
    try:
        from kernelseek import trace_stats, traces
    except ImportError as e:
        return Recomputed(False, f"kernelseek.analytics is unavailable ({e}); no number is recomputed",
                          traces=[str(p) for p in files])
    evs = [traces.read(p) for p in files]
    empty = [str(p) for p, e in zip(files, evs) if not e]
    if empty:
        return Recomputed(False, f"no trace events in {', '.join(empty)}", traces=[str(p) for p in files])
    raw = [str(p) for p, e in zip(files, evs) if not any("seq" in x for x in e)]
    if raw:                              # a Claude Code transcript's lines have a type but no seq
        return Recomputed(False, f"not in the trace schema (no event has a seq): {', '.join(raw)}; a Claude Code "
                          "transcript is imported first: kernelseek trace import-claude-code", traces=[str(p) for p in files])
    vals = trace_stats.quantities(evs, trace_stats.load_prices())
    return Recomputed(True, values=vals, traces=[str(p) for p in files])


def trace_files(paths) -> list[Path]:
    """The trace files named by `paths`: a file as given; a campaign directory's trace.jsonl; any
    other directory's *.jsonl files (a folder of traces such as data/traces/), sorted."""
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in (paths or [])]
    out: list[Path] = []
    for p in paths:
        if p.is_dir() and not (p / store.TRACE).exists():
            out += sorted(p.glob("*.jsonl"))
        else:
            out.append(store.trace_file(p))
    return out


def side_by_side(numbers: list[Number], rec: Recomputed) -> pd.DataFrame:
    """Per quantity: the paper's value(s) as the documents give them, and the recomputed value."""
    recs = []
    for q in dict.fromkeys(n.quantity for n in numbers):
        ents = [n for n in numbers if n.quantity == q]
        stated = [n for n in ents if not n.unit_assumed]
        unit = stated[0].unit if stated else ents[0].unit + " (assumed)"
        recs.append({"quantity": q, "unit": unit, "paper": " | ".join(f"{v:g}" for v in values(numbers, q)),
                     "sources": ", ".join(sorted({n.source[:3] for n in ents})),
                     "recomputed": rec.values.get(q) if rec.available else None})
    for q, v in (rec.values.items() if rec.available else []):
        if q not in {r["quantity"] for r in recs}:
            recs.append({"quantity": q, "unit": "", "paper": "", "sources": "", "recomputed": v})
    return pd.DataFrame(recs, columns=["quantity", "unit", "paper", "sources", "recomputed"])
