"""The paper's trace statistics beside the same statistics from traces: one table and one figure per
family (messages, tools, reading, timeline), for notebooks/paper_numbers.ipynb.

Counts of a campaign of a few steps cannot be set beside the paper's 162 messages or 11,532 tool
calls as they are, so the figures compare what does compare: shares (of messages by kind, of
tool calls by kind, of characters read) and rates; the timeline draws the traces' own course
with the paper's end points as reference lines. The tables give every value as it is.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from . import paper, timeline, trace_stats
from .traces import passed_full, text_of

PAPER_C, TRACE_C = "#2980b9", "#27ae60"


def family_table(numbers, rec, family: str) -> pd.DataFrame:
    """side_by_side's rows of one family, with what each statistic counts."""
    sbs = paper.side_by_side(numbers, rec)
    fam = sbs["quantity"].map(trace_stats.family_of)
    what = {trace_stats.paper_name(s, side): s.what for s in trace_stats.STATS for side in trace_stats.SIDES}
    out = sbs[fam == family].copy()
    what.update({f"category_{c.replace(' ', '_')}": f"questions of category {c} (analytics.classify_question)"
                 for c in trace_stats.A.CATEGORIES})
    out.insert(1, "what", out["quantity"].map(lambda q: what.get(q, "")))
    out["not from a trace"] = out["quantity"].map(lambda q: trace_stats.NOT_RECOMPUTED.get(q, ("", ""))[1])
    return out.reset_index(drop=True)


def _first(numbers, q):
    v = paper.values(numbers, q)
    return v[0] if v else None


def _pair_bars(ax, labels, paper_v, trace_v, ylabel, legend=True):
    """Paper and traces side by side per label; a missing value is a gap labelled n/a."""
    for off, vs, lab, c in ((-0.2, paper_v, "the paper's documents", PAPER_C), (0.2, trace_v, "the traces given", TRACE_C)):
        for i, v in enumerate(vs):
            if v is None:
                ax.annotate("n/a", (i + off, 0), ha="center", va="bottom", fontsize=7, color=c)
                continue
            ax.bar(i + off, v, width=0.4, color=c, label=lab if i == next(k for k, x in enumerate(vs) if x is not None) else None)
            ax.annotate(f"{v:.3g}", (i + off, v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    if legend:
        ax.legend(fontsize=7)


def _shares(values: dict, keys: list[str]) -> list:
    vs = [float(values.get(k) or 0.0) for k in keys]
    tot = sum(vs)
    return [v / tot for v in vs] if tot else [None] * len(keys)


def _ratio(a, b):
    return a / b if a is not None and b else None


def messages_figure(numbers, rec) -> Figure:
    v = rec.values if rec.available else {}
    fig = Figure(figsize=(12.5, 4.2), layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3, width_ratios=[5, 8, 3])
    kinds = [f"message_type_{k}" for k in ("directive", "question", "approval", "correction", "goal")]
    _pair_bars(ax1, [k.removeprefix("message_type_") for k in kinds],
               _shares({k: _first(numbers, k) for k in kinds}, kinds), _shares(v, kinds), "share of a person's messages")
    ax1.set_title("messages by kind", fontsize=9)
    cats = list(dict.fromkeys([n.quantity for n in numbers if n.quantity.startswith("category_")]
                              + [k for k in v if k.startswith("category_")]))
    _pair_bars(ax2, [c.removeprefix("category_").replace("_", " ") for c in cats],
               _shares({c: _first(numbers, c) for c in cats}, cats), _shares(v, cats), "share of the questions", False)
    ax2.set_title("questions by category", fontsize=9)
    p = [_ratio(_first(numbers, "interrogative_messages"), _first(numbers, "human_messages")),
         _ratio(_first(numbers, "interrogative_mentioning_attention"), _first(numbers, "interrogative_messages"))]
    t = [_ratio(v.get("interrogative_messages"), v.get("human_messages")),
         _ratio(v.get("interrogative_mentioning_attention"), v.get("interrogative_messages"))]
    _pair_bars(ax3, ["phrased as a question\n(of all)", "naming attention\n(of those)"], p, t, "share", False)
    ax3.set_title("questions and attention", fontsize=9)
    fig.suptitle("Messages: the paper's question-driven campaign and the traces given (shares)", fontsize=10)
    return fig


def tools_figure(numbers, rec) -> Figure:
    v = rec.values if rec.available else {}
    fig = Figure(figsize=(11.0, 4.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[3, 2])
    keys = [f"{k}_question_driven" for k in ("profiler_runs", "sass_inspections", "builds", "benchmark_runs", "subagents")]
    _pair_bars(ax1, [k.removesuffix("_question_driven").replace("_", " ") for k in keys],
               _shares({k: _first(numbers, k) for k in keys}, keys), _shares(v, keys), "share of these tool calls")
    ax1.set_title("question-driven: tool calls by kind", fontsize=9)
    p = [_first(numbers, "tool_calls_per_human_message"),
         _ratio(_first(numbers, "question_driven_tool_calls_subagents"), _first(numbers, "question_driven_tool_calls")),
         _first(numbers, "profiler_runs_per_step_equipped")]
    t = [v.get("tool_calls_per_human_message"),
         _ratio(v.get("question_driven_tool_calls_subagents"), v.get("question_driven_tool_calls")),
         v.get("profiler_runs_per_step_equipped")]
    ax2.set_yscale("symlog", linthresh=1.0)
    _pair_bars(ax2, ["tool calls per\nperson's message", "share of calls\nin sub-agents", "equipped: profiler\nruns per step"],
               p, t, "rate (symlog scale)")
    ax2.set_title("rates", fontsize=9)
    fig.suptitle("Tools: what the agents ran", fontsize=10)
    return fig


def reading_figure(numbers, rec) -> Figure:
    v = rec.values if rec.available else {}
    keys = ["own_kernel_reading_share_question_driven", "own_kernel_reading_share_equipped",
            "prompt_prefetched_share_equipped", "prompt_prefetched_share_question_driven", "open_ended_readded_lines_share"]
    labels = ["question-driven: tool-result text\non its own kernel", "equipped: the same",
              "equipped: prompt\npre-fetched", "question-driven: prompt\npre-fetched",
              "added lines re-adding\ndeleted ones (paper: other agents)"]
    fig = Figure(figsize=(10.0, 4.4), layout="constrained")
    ax = fig.add_subplot()
    _pair_bars(ax, labels, [_first(numbers, k) for k in keys], [v.get(k) for k in keys], "% (0 to 100)")
    ax.set_title("Reading: what share of what the agent read was its own kernel, or pushed to it", fontsize=10)
    return fig


def timeline_figure(numbers, named_traces: list[tuple[str, list[dict]]], rec=None) -> Figure:
    """Left: each trace's passed full evaluations over hours (best so far as a step line), a person's
    questions (dotted), forks and rollbacks (triangles), idle gaps (shaded); the paper's end points
    as reference lines. Right: the share of the run spent idle and before the best, paper beside
    traces."""
    fig = Figure(figsize=(13.0, 4.8), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, width_ratios=[3, 1])
    v = rec.values if rec is not None and rec.available else {}
    p = [_ratio(_first(numbers, "question_driven_idle_hours"), _first(numbers, "question_driven_run_hours")),
         _ratio(_first(numbers, "equipped_hours_to_best"), _first(numbers, "equipped_run_hours")),
         _ratio(_first(numbers, "equipped_step_of_best"), _first(numbers, "equipped_steps"))]
    t = [_ratio(v.get("question_driven_idle_hours"), v.get("question_driven_run_hours")),
         _ratio(v.get("equipped_hours_to_best"), v.get("equipped_run_hours")),
         _ratio(v.get("equipped_step_of_best"), v.get("equipped_steps"))]
    _pair_bars(ax2, ["question-driven:\nidle / run hours", "equipped: hours to\nbest / run hours",
                     "equipped: steps to\nbest / all steps"], p, t, "fraction of the run")
    ax2.set_title("where the time went", fontsize=9)
    colors = ["#27ae60", "#8e44ad", "#d35400", "#16a085", "#c0392b"]
    for i, (name, ev) in enumerate(named_traces):
        c = colors[i % len(colors)]
        ts = [e["t"] for e in ev if isinstance(e.get("t"), (int, float))]
        if not ts:
            continue
        t0 = min(ts)
        full = [e for e in ev if passed_full(e)]
        hx = [(e["t"] - t0) / 3600 for e in full]
        best = pd.Series([e["geomean"] for e in full], dtype=float).cummax().tolist()
        ax.plot(hx, [e["geomean"] for e in full], "o", color=c, ms=4, label=f"{name}: passed evaluations")
        if hx:
            ax.step(hx, best, where="post", color=c, lw=1.2)
        for e in ev:
            h = (e["t"] - t0) / 3600 if isinstance(e.get("t"), (int, float)) else None
            if h is None:
                continue
            if e.get("type") == "message" and e.get("role") == "user" and e.get("author") == "human" \
                    and not e.get("sidechain") and "?" in text_of(e.get("content")):
                ax.axvline(h, color=c, ls=":", lw=0.8)
            elif e.get("type") == timeline.BRANCH:
                ax.plot([h], [0.02], "^" if e.get("action") == "fork" else "v", color=c, ms=7)
        for a, b in timeline.idle_gaps(ev):
            ax.axvspan((a - t0) / 3600, (b - t0) / 3600, color=c, alpha=0.12)
    for q, lab, ls in (("question_driven_geomean_fa3", "paper: question-driven best", "--"),
                       ("equipped_geomean_fa3", "paper: equipped best", "-."),
                       ("question_driven_start_geomean", "paper: question-driven start", ":")):
        vals = paper.values(numbers, q)
        if vals:
            ax.axhline(vals[0], color="#7f8c8d", ls=ls, lw=1, label=f"{lab} ({' / '.join(f'{x:g}x' for x in vals)})")
    ax.set_xlabel("hours since the trace's first event")
    ax.set_ylabel("geomean speedup over the campaign's baseline (x)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("Timeline: progress, a person's questions (dotted), forks ▲ and rollbacks ▼, idle gaps (shaded)",
                 fontsize=9)
    return fig


FIGURES = {"messages": messages_figure, "tools": tools_figure, "reading": reading_figure}
