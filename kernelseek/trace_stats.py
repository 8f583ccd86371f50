"""Every trace statistic the paper reports, computed from traces, named as data/paper/ names it.

    values = side_values(list_of_traces)                  # {stat key: value} for one arm's traces
    quantities(traces_by_file)                            # {paper quantity: value}, both arms

STATS lists each statistic once: its key, its family (messages, tools, reading, timeline: one
figure each in notebooks/paper_numbers.ipynb), the paper quantity it is compared with, and what it
counts. A paper quantity named with `{side}` exists per arm (question_driven, equipped); one named
without it is the question-driven arm's, and the equipped arm's value is `equipped_<key>`.
Over several traces of one arm: counts add up, shares are recomputed from the summed characters,
time spans and idle gaps are taken per campaign (Claude Code sessions of one working directory
together, so the gaps between sessions count; any other trace alone) and added up, and the start,
the best and what followed it come from the trace holding the best evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from . import analytics as A
from . import timeline

SIDES = ("question_driven", "equipped")
FAMILIES = ("messages", "tools", "reading", "timeline")
TOOL_KEYS = {"profiler_runs": "profiler", "sass_inspections": "sass/ptx", "builds": "build",
             "benchmark_runs": "benchmark", "subagents": "subagent", "doc_lookups": "docs"}
# the questions the articles single out whose geomean before and after a trace can give (by text)
TURNING = {"turning_point_fallback_geomean": "What configs are bringing down the geomean?",
           "turning_point_host_geomean": "Is this ceiling a property of the hardware, or of our design?"}


@dataclass(frozen=True)
class Stat:
    key: str
    family: str
    paper: str          # the paper quantity ({side} filled in), or "" when the paper has none
    what: str


def _s(key, family, paper, what):
    return Stat(key, family, paper, what)


STATS = [
    _s("human_messages", "messages", "human_messages", "messages of a person (sub-agents aside)"),
    *[_s(f"message_type_{k}", "messages", f"message_type_{k}", f"a person's messages of type {k}") for k in A.KINDS],
    _s("interrogative_messages", "messages", "interrogative_messages", "a person's messages phrased as a question"),
    _s("interrogative_mentioning_attention", "messages", "interrogative_mentioning_attention",
       "... of which name an attention concept (kernelseek.concepts)"),
    _s("interrogative_naming_cuda_construct", "messages", "interrogative_prescribing_construct",
       "... of which name a CUDA construct (an upper bound on those prescribing one)"),
    _s("question_categories", "messages", "question_categories_of_human_messages", "distinct question categories"),
    _s("tool_calls", "tools", "{side}_tool_calls", "tool calls, parent and sub-agents"),
    _s("tool_calls_parent", "tools", "{side}_tool_calls_parent", "tool calls of the parent session"),
    _s("tool_calls_subagents", "tools", "{side}_tool_calls_subagents", "tool calls of sub-agents"),
    _s("tool_calls_per_human_message", "tools", "tool_calls_per_human_message", "tool calls per message of a person"),
    _s("sessions", "tools", "{side}_sessions", "sessions (start and resume events)"),
    *[_s(k, "tools", f"{k}_{{side}}", f"tool calls of kind {v}") for k, v in TOOL_KEYS.items()],
    _s("profiler_runs_per_step", "tools", "profiler_runs_per_step_{side}", "profiler runs per model step"),
    _s("own_kernel_reading_share", "reading", "own_kernel_reading_share_{side}",
       "% of tool-result characters that re-read the agent's own kernel sources"),
    _s("readded_lines_share", "reading", "open_ended_readded_lines_share",
       "% of added lines identical to a line deleted earlier (the paper's value is other agents')"),
    _s("median_prompt_chars", "reading", "median_prompt_chars_{side}", "median prompt, characters"),
    _s("prompt_prefetched_share", "reading", "prompt_prefetched_share_{side}",
       "% of prompt characters pushed in unasked (pre-fetched), all steps pooled"),
    _s("geomean_fa3", "timeline", "{side}_geomean_fa3", "best geomean of a version that passed every row"),
    _s("start_geomean", "timeline", "{side}_start_geomean", "the first passed evaluation's geomean"),
    _s("worst_row", "timeline", "{side}_worst_row", "the best version's worst row"),
    _s("rows_at_parity", "timeline", "{side}_rows_at_parity", "the best version's rows at or above parity"),
    _s("steps", "timeline", "{side}_steps", "model steps (parent)"),
    _s("step_of_best", "timeline", "{side}_step_of_best", "model steps before the best evaluation"),
    _s("steps_without_gain", "timeline", "{side}_steps_without_gain", "model steps after the best evaluation"),
    _s("hours_to_best", "timeline", "{side}_hours_to_best", "hours from the start to the best evaluation"),
    _s("run_hours", "timeline", "{side}_run_hours", "hours from the first event to the last"),
    _s("idle_hours", "timeline", "{side}_idle_hours", "hours in gaps of 30 min or more with no tool running"),
    _s("api_cost", "timeline", "{side}_api_cost", "API dollars"),
    _s("branches", "timeline", "{side}_branches", "forks (branch events)"),
    _s("branches_from_best_step", "timeline", "{side}_branches_from_best_step", "forks from the best evaluation"),
    _s("human_rollbacks", "timeline", "{side}_human_rollbacks", "rollbacks made by a person"),
    _s("steps_discarded", "timeline", "{side}_steps_discarded", "model steps the rollbacks discarded"),
    *[_s(f"{k}_{w}", "timeline", f"{k}_{w}", f"geomean {w} the question: {q}")
      for k, q in TURNING.items() for w in ("before", "after")],
    _s("turning_point_fallback_hours", "timeline", "turning_point_fallback_hours",
       "hours from that question to the best evaluation before the next question"),
]
# the paper's trace statistics a trace's events cannot give, and why (shown beside the others)
_ROWS = "a row's speedup: evaluation events keep the summary, not the rows (the evaluation folders have them)"
NOT_RECOMPUTED = {
    "turning_point_fallback_row_speedup": ("timeline", _ROWS),
    "turning_point_splitkv_before": ("timeline", _ROWS), "turning_point_splitkv_after": ("timeline", _ROWS),
    **{f"turning_point_goal_fp8_decode_{w}_{k}": ("timeline", _ROWS)
       for w in ("before", "after") for k in ("first", "second")},
    "turning_point_host_fill_low": ("timeline", "a host-side profile's finding, not an event of the trace"),
    "turning_point_host_fill_high": ("timeline", "a host-side profile's finding, not an event of the trace"),
    **{q: ("timeline", "needs to know which evaluation first ran the ported grid: no event says so")
       for q in ("turning_point_coverage_correct_claimed", "turning_point_coverage_correct_before",
                 "turning_point_coverage_correct_after", "turning_point_coverage_geomean",
                 "turning_point_coverage_sink_error", "turning_point_coverage_leftpad_error",
                 "turning_point_coverage_fixes")},
    "turning_point_goal_levers_before": ("timeline", "the agent's own account in words, not a counted event"),
    "interrogative_prescribing_construct": ("messages", "prescribing is a judgement: the trace gives those naming "
                                            "a CUDA construct, an upper bound"),
}
BY_KEY = {s.key: s for s in STATS}


def paper_name(stat: Stat, side: str) -> str:
    if "{side}" in stat.paper:
        return stat.paper.format(side=side)
    return stat.paper if side == "question_driven" else f"equipped_{stat.key}"


def family_of(quantity: str) -> str | None:
    """The family of a paper quantity or recomputed name (None when no statistic gives it)."""
    for s in STATS:
        if quantity in {paper_name(s, side) for side in SIDES}:
            return s.family
    if quantity.startswith("category_") or quantity.startswith("equipped_category_"):
        return "messages"
    return NOT_RECOMPUTED.get(quantity, (None,))[0]


def _best_trace(ts):
    ends = [(t, A.start_and_end(t)) for t in ts]
    with_best = [x for x in ends if x[1]["best_geomean"] is not None]
    return max(with_best, key=lambda x: x[1]["best_geomean"]) if with_best else (None, None)


def _messages(ts) -> dict:
    kinds = sum(A.messages_by_kind(t).set_index("kind")[["messages", "interrogative"]] for t in ts)
    m = [A.question_mentions(t) for t in ts]
    out = {"human_messages": int(kinds.loc["total", "messages"]),
           "interrogative_messages": int(kinds.loc["total", "interrogative"]),
           "interrogative_mentioning_attention": sum(x["attention"] for x in m),
           "interrogative_naming_cuda_construct": sum(x["cuda_construct"] for x in m)}
    out.update({f"message_type_{k}": int(kinds.loc[k, "messages"]) for k in A.KINDS})
    cats: dict[str, int] = {c: 0 for c in A.CATEGORIES}
    for t in ts:
        for r in A.questions_by_category(t).itertuples():
            cats[str(r.category)] = cats.get(str(r.category), 0) + int(r.questions)
    out["question_categories"] = sum(1 for c, n in cats.items() if n and c != "uncategorized")
    out.update({"category_" + c.replace(" ", "_"): n for c, n in cats.items()})
    return out


def _tools(ts, n_people: int) -> dict:
    tools = sum(A.tool_use_by_kind(t).set_index("kind")[["calls", "parent", "subagents"]] for t in ts)
    steps = sum(timeline.steps(t) for t in ts)
    out = {"tool_calls": int(tools.loc["total", "calls"]), "tool_calls_parent": int(tools.loc["total", "parent"]),
           "tool_calls_subagents": int(tools.loc["total", "subagents"]),
           "sessions": sum(e.get("type") in ("start", "resume") for t in ts for e in t)}
    out.update({k: int(tools.loc[v, "calls"]) for k, v in TOOL_KEYS.items()})
    out["tool_calls_per_human_message"] = out["tool_calls"] / n_people if n_people else None
    out["profiler_runs_per_step"] = out["profiler_runs"] / steps if steps else None
    return out


def _reading(ts) -> dict:
    rr = [A.reread_share(t) for t in ts]
    rec = [A.recurrence_share(t) for t in ts]
    chars, added = sum(r["tool_result_chars"] for r in rr), sum(r["added_lines"] for r in rec)
    ps = pd.concat([A.prompt_sizes(t) for t in ts], ignore_index=True)
    tot = float(ps["prompt_chars"].sum()) if len(ps) else 0.0
    return {"own_kernel_reading_share": 100.0 * sum(r["own_source_chars"] for r in rr) / chars if chars else None,
            "readded_lines_share": 100.0 * sum(r["recurring_lines"] for r in rec) / added if added else None,
            "median_prompt_chars": float(ps["prompt_chars"].median()) if len(ps) else None,
            "prompt_prefetched_share": 100.0 * float(ps["prefetched_chars"].sum()) / tot if tot else None}


def _timeline(ts, prices) -> dict:
    spans = [A.span_and_idle([e for t in group for e in t]) for group in campaigns(ts).values()]
    span = {k: sum(x[k] for x in spans if x[k] is not None) if any(x[k] is not None for x in spans) else None
            for k in ("span_hours", "idle_hours")}
    br = [A.branches(t) for t in ts]
    best_t, end = _best_trace(ts)
    firsts = [(t, A.start_and_end(t)["start_geomean"]) for t in ts]
    firsts = [(t[0].get("t") or 0, g) for t, g in firsts if g is not None and t]
    out = {"steps": sum(timeline.steps(t) for t in ts), "run_hours": span["span_hours"],
           "idle_hours": span["idle_hours"], "api_cost": sum(A.dollars(t, prices)["usd"] for t in ts),
           "branches": sum(b["forks"] for b in br), "branches_from_best_step": sum(b["forks_from_best"] for b in br),
           "human_rollbacks": sum(b["human_rollbacks"] for b in br),
           "steps_discarded": sum(b["steps_discarded"] for b in br),
           "start_geomean": min(firsts, key=lambda x: x[0])[1] if firsts else None}
    if best_t is not None:
        tb = A.time_to_best(best_t)
        out.update(geomean_fa3=end["best_geomean"], worst_row=end["best_worst_row"],
                   rows_at_parity=end["best_rows_at_parity"], step_of_best=tb["step"],
                   steps_without_gain=end["steps_after_best"], hours_to_best=tb["hours"])
    for k, q in TURNING.items():
        hit = next((r for r in (A.turning_point(t, q) for t in ts) if r), None)
        if hit:
            out[f"{k}_before"], out[f"{k}_after"] = hit["geomean_before"], hit["best_after"]
            if k == "turning_point_fallback_geomean":
                out["turning_point_fallback_hours"] = hit["hours_to_best_after"]
    return out


def campaigns(ts: list[list[dict]]) -> dict:
    """The traces grouped by campaign: Claude Code sessions by their working directory (the sessions of
    one project), any other trace on its own (a KernelSeek campaign keeps all its sessions in one file)."""
    out: dict = {}
    for i, t in enumerate(ts):
        start = next((e for e in t if e.get("type") == "start"), {})
        key = ("claude_code", start.get("cwd")) if start.get("source_format") == "claude_code" and start.get("cwd") \
            else ("trace", i)
        out.setdefault(key, []).append(t)
    return out


def side_values(ts: list[list[dict]], prices=None) -> dict:
    """{stat key: value} over one arm's traces (None where a trace cannot give it)."""
    out = _messages(ts)
    out.update(_tools(ts, out["human_messages"]))
    out.update(_reading(ts))
    out.update(_timeline(ts, prices))
    return out


def arm_side(events: list[dict]) -> str:
    """'equipped' for a trace of the tool-rich arm, else 'question_driven': the bare and bank arms,
    like the human one, are set beside the paper's question-driven campaign (the harness it used)."""
    arm = next((e.get("arm") for e in events if e.get("type") == "start"), None) or ""
    return "equipped" if arm == "equipped" else "question_driven"


def quantities(traces_events: list[list[dict]], prices=None) -> dict:
    """{paper quantity: value} for every statistic of every arm the traces hold (None left out)."""
    out: dict = {}
    for side in SIDES:
        ts = [t for t in traces_events if arm_side(t) == side]
        if not ts:
            continue
        for key, v in side_values(ts, prices).items():
            st = BY_KEY.get(key)
            name = paper_name(st, side) if st else (key if side == "question_driven" else f"equipped_{key}")
            out[name] = v
    return {k: v for k, v in out.items() if v is not None}


MODEL_DRIVEN = "model-driven"
_HAND = ("fixture", "hand-built", "handmade", "hand-made", "invented", "not a recorded")


def provenance(events: list[dict]) -> str:
    """What drove a trace, from its start event (and its notes): the start's own `provenance` when
    it gives one; else 'scripted model' (a model named scripted-*, or a note saying the model is a
    script), 'fake API (tests)', 'hand-built' (a fixture, an invented example), 'model-driven' (a
    model is named and none of those applies), or 'unknown'."""
    start = next((e for e in events if e.get("type") == "start"), {})
    if start.get("provenance"):
        return str(start["provenance"])
    cfg = start.get("config") or {}
    model = str(start.get("model") or cfg.get("model") or "").lower()
    notes = " ".join(str(x).lower() for x in [start.get("label"), cfg.get("note"), start.get("session_id")] +
                     [e.get("text") for e in events if e.get("type") == "note"] if x)
    if model.startswith("scripted") or "scripted model" in notes or "model is a script" in notes:
        return "scripted model"
    if "fake" in model:
        return "fake API (tests)"
    if any(h in model or h in notes for h in _HAND):
        return "hand-built"
    return MODEL_DRIVEN if model else "unknown"


def describe(files, traces_events) -> pd.DataFrame:
    """One row per trace: file, format, arm side, model, provenance, events, steps, person messages."""
    rows = []
    for f, ev in zip(files, traces_events):
        start = next((e for e in ev if e.get("type") == "start"), {})
        rows.append({"trace": str(f), "format": start.get("source_format", "kernelseek"), "side": arm_side(ev),
                     "model": start.get("model") or (start.get("config") or {}).get("model"),
                     "provenance": provenance(ev), "events": len(ev), "steps": timeline.steps(ev),
                     "person_messages": len(A.person_messages(ev))})
    return pd.DataFrame(rows, columns=["trace", "format", "side", "model", "provenance", "events", "steps",
                                       "person_messages"])


def load_prices():
    """The price table (data/prices.yaml) or None when it cannot be read."""
    from .agent.budget import Prices
    try:
        return Prices.load()
    except ValueError:               # BudgetError: a missing or bad table only leaves imports unpriced
        return None
