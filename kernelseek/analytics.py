"""The numbers computed from traces, as tables (pandas DataFrames) and a few headline shares.

    messages_by_kind     a person's messages: directive, question, approval, correction, goal; and how
                         many were phrased interrogatively (paper: 58/44/30/19/11 of 162; 63 interrogative)
    question_mentions    a person's interrogative messages naming an attention concept or a CUDA
                         construct (paper: 17 of 63; none prescribed a construct)
    questions_by_category question events by bank group (or by keywords for unlabeled text)
    tool_use_by_kind     builds, benchmark runs, profiler runs, SASS/PTX inspections, documentation
                         lookups, subagents, reads, edits; parent session and subagents apart
    calls_per_message    tool calls per message of a person (paper: about 71)
    reread_share         share of tool-result characters that re-read the agent's own kernel sources
                         (paper: 82% equipped, 26% question-driven)
    recurrence_share     share of added lines identical to a line deleted earlier (AVO-style: ~30%)
    time_to_best, plateaus   over the campaign's full evaluations of versions that passed every row
    usage_by_step        tokens (input, cache read, cache write, output), cached share and dollars per step
    dollars              API dollars (priced from tokens for an import that records none)
Elsewhere, re-exported here: prompt size and its pre-fetched share (prompt_stats: paper 22.6K
characters, 37%); span, idle gaps, branches and rollbacks, start and end, question effects
(timeline: paper 68.0 h with 26.7 idle; 37 branches, 3 rollbacks discarding 117 steps). Every
statistic the paper reports, by family, with the paper quantity it is compared to: trace_stats.
A message event's explicit `kind` (and a question's `category`) wins over the classifiers; the
classifiers are keyword rules, good for a first look, not a substitute for labels.
"""
from __future__ import annotations

import difflib
import re
from pathlib import PurePath

import pandas as pd

from . import concepts
from .concepts import interrogative
from .prompt_stats import prompt_sizes, prompt_summary  # noqa: F401  (re-exported)
from .timeline import branches, question_effects, span_and_idle, start_and_end, turning_point  # noqa: F401
from .traces import passed_full, text_of, tool_calls

KINDS = ("directive", "question", "approval", "correction", "goal")
TOOL_KINDS = ("build", "benchmark", "profiler", "sass/ptx", "docs", "subagent", "read", "edit", "other")
SOURCE_EXT = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".cpp", ".cc")

_APPROVAL = re.compile(r"^\s*(yes|yep|yeah|ok(ay)?|sure|go ahead|go for it|sounds good|looks good|lgtm|great|"
                       r"perfect|nice|good|proceed|approved?|do it|continue|keep going|agreed)\b", re.I)
_CORRECTION = re.compile(r"^\s*(no\b|nope|wrong|that's not|that is not|don't|do not|stop\b|revert|undo)|"
                         r"\byou (shouldn't|should not|broke|forgot|missed|ignored)\b|\bnot what i\b|"
                         r"\b(is|are|was) (wrong|incorrect)\b|\bwe are still\b|\bstill (well )?below\b", re.I)
_GOAL = re.compile(r"\b(goal|target|objective)\b.*\b(is|are|:|=|reach|at least|must|should)\b|"
                   r"\b(reach|beat|get to|hit)\b.*(\d+(\.\d+)?x\b|parity)", re.I)
_CATEGORIES = [  # first match wins
    ("scenario coverage", r"\bcover|test grid|shapes and features|actually called"),
    ("challenge a limit", r"\blimit|property of the hardware|ceiling\b.*\?|genuine|really (the|a) "),
    ("benchmark validity", r"\bbenchmark|\bvalid|\bfair\b|same work|\bwarm|\bcheat"),
    ("gap triage", r"which (configs?|rows?|scenarios?|shapes?)|bring(ing)? (the geomean )?down|\bworst\b|\bgap\b"),
    ("bound differencing", r"\bbound\b|roofline|\bpeak\b|speed of light|outside the kernel|where does the time go"),
    ("measurement check", r"measur|\btiming|\bcycles\b|wall[- ]clock|\bnoise|\bmedian|\bprofil"),
    ("hypothesis check", r"hypothes|\bverify|\bconfirm|how do you know|evidence|are you sure"),
    ("strategy options", r"\boptions?\b|alternative|other ways?|what else|\bapproach"),
    ("agent process", r"why do you think|why did you|what are you|\bplan\b|\bstuck|step back|what have you tried"),
    ("correctness", r"\bcorrect|\bwrong\b|tolerance|precision|\bfail"),
]
CATEGORIES = tuple(c for c, _ in _CATEGORIES)
_BUILD = re.compile(r"\b(nvcc|make|cmake|ninja|kernelseek build|setup\.py|g\+\+|clang\+\+)\b")
_BENCH = re.compile(r"kernelseek eval|\bbench|benchmark|timeit|\bpytest\b.*-k\s*perf")
_PROF = re.compile(r"\b(ncu|nsys|nv-nsight-cu-cli|kernelseek profile|torch\.profiler)\b")
_SASS = re.compile(r"\b(cuobjdump|nvdisasm|kernelseek sass)\b|\.ptx\b|\.sass\b|-keep\b|--ptx\b")
_DOCS = re.compile(r"\b(man|curl|wget)\s|docs?/|documentation|ptx_isa|programming[_ -]guide", re.I)
_READCMD = re.compile(r"^\s*(cat|sed|head|tail|grep|rg|awk|nl|less|more|diff|wc)\b")


def classify_message(text: str) -> str:
    """directive | question | approval | correction | goal, by keyword rules."""
    t = text.strip()
    if _APPROVAL.match(t) and len(t) < 80:
        return "approval"
    if _CORRECTION.search(t):
        return "correction"
    if _GOAL.search(t):
        return "goal"
    if interrogative(t):
        return "question"
    return "directive"


def classify_question(text: str) -> str:
    for cat, pat in _CATEGORIES:
        if re.search(pat, text, re.I):
            return cat
    return "uncategorized"


def person_messages(events: list[dict], authors=("human",)) -> list[dict]:
    return [e for e in events if e.get("type") == "message" and e.get("role") == "user"
            and e.get("author") in authors and not e.get("sidechain")]


def messages_by_kind(events: list[dict], authors=("human",)) -> pd.DataFrame:
    recs = []
    for e in person_messages(events, authors):
        t = text_of(e.get("content"))
        recs.append({"kind": e.get("kind") or classify_message(t),
                     "interrogative": e["interrogative"] if "interrogative" in e else interrogative(t)})
    df = pd.DataFrame(recs, columns=["kind", "interrogative"])
    out = pd.DataFrame({"kind": list(KINDS)})
    out["messages"] = [int((df["kind"] == k).sum()) for k in KINDS]
    out["interrogative"] = [int(((df["kind"] == k) & df["interrogative"].astype(bool)).sum()) for k in KINDS]
    tot = pd.DataFrame([{"kind": "total", "messages": len(df), "interrogative": int(df["interrogative"].astype(bool).sum())}])
    return pd.concat([out, tot], ignore_index=True)


def questions_by_category(events: list[dict]) -> pd.DataFrame:
    qs = [e for e in events if e.get("type") == "question"]
    if not qs:   # imported traces: a person's messages that are questions
        qs = [{"text": text_of(e.get("content")), "category": e.get("category")}
              for e in person_messages(events) if (e.get("kind") or classify_message(text_of(e.get("content")))) == "question"]
    cats = [q.get("category") or q.get("group") or classify_question(q.get("text", "")) for q in qs]
    s = pd.Series(cats, dtype=object).value_counts()
    return pd.DataFrame({"category": s.index, "questions": s.values.astype(int)})


def tool_kind(name: str, inp: dict) -> str:
    n = (name or "").lower()
    if n in ("task", "agent", "subagent"):
        return "subagent"
    if n == "evaluate":
        return "benchmark"
    if n in ("webfetch", "websearch", "docs", "search_docs"):
        return "docs"
    if n in ("write", "edit", "multiedit", "notebookedit"):
        return "edit"
    if n in ("read", "grep", "glob", "ls", "notebookread"):
        return "read"
    if n in ("shell", "bash"):
        cmd = str(inp.get("command", ""))
        for kind, pat in (("profiler", _PROF), ("sass/ptx", _SASS), ("benchmark", _BENCH), ("build", _BUILD),
                          ("docs", _DOCS)):
            if pat.search(cmd):
                return kind
        return "read" if _READCMD.match(cmd) else "other"
    return "other"


def tool_use_by_kind(events: list[dict]) -> pd.DataFrame:
    calls = tool_calls(events)
    recs = [{"kind": tool_kind(c["name"], c["input"]), "sidechain": c["sidechain"]} for c in calls]
    df = pd.DataFrame(recs, columns=["kind", "sidechain"])
    rows = [{"kind": k, "calls": int((df["kind"] == k).sum()),
             "parent": int(((df["kind"] == k) & ~df["sidechain"].astype(bool)).sum()),
             "subagents": int(((df["kind"] == k) & df["sidechain"].astype(bool)).sum())} for k in TOOL_KINDS]
    rows.append({"kind": "total", "calls": len(df), "parent": int((~df["sidechain"].astype(bool)).sum()),
                 "subagents": int(df["sidechain"].astype(bool).sum())})
    return pd.DataFrame(rows)


def question_mentions(events: list[dict], authors=("human",)) -> dict:
    """A person's interrogative messages, and how many name an attention concept or a CUDA construct
    (kernelseek.concepts; a message's own `attention_concept` / `cuda_construct` label wins)."""
    qs = [e for e in person_messages(events, authors)
          if e.get("interrogative", interrogative(text_of(e.get("content"))))]
    return {"interrogative": len(qs),
            "attention": sum(concepts.names_attention(text_of(e.get("content")), e.get("attention_concept")) for e in qs),
            "cuda_construct": sum(concepts.names_cuda(text_of(e.get("content")), e.get("cuda_construct")) for e in qs)}


def dollars(events: list[dict], prices=None) -> dict:
    """API dollars: each usage event's own cost_usd; one without it (an imported transcript) is
    priced from its tokens with `prices` (agent.budget.Prices) when given. usd, priced_steps (how
    many were priced from tokens here), unpriced_steps (no cost and no price for the model)."""
    model = next((e.get("model") for e in events if e.get("type") == "start"), None) or ""
    usd, priced, unpriced = 0.0, 0, 0
    for e in events:
        if e.get("type") != "usage":
            continue
        if isinstance(e.get("cost_usd"), (int, float)):
            usd += float(e["cost_usd"])
        elif prices is not None and prices.for_model(e.get("model") or model):
            usd += prices.cost(e.get("model") or model, e)
            priced += 1
        else:
            unpriced += 1
    return {"usd": usd, "priced_steps": priced, "unpriced_steps": unpriced}


def calls_per_message(events: list[dict], authors=("human",)) -> float | None:
    n = len(person_messages(events, authors))
    return len(tool_calls(events)) / n if n else None


# ---- reading and rewriting its own code ---------------------------------------------------------
def _path(inp: dict) -> str:
    return str(inp.get("path") or inp.get("file_path") or inp.get("notebook_path") or "")


def own_sources(events: list[dict]) -> set[str]:
    """Basenames of kernel source files the agent wrote or edited (and the campaign's kernel)."""
    names = set()
    for e in events:
        if e.get("type") == "start" and (e.get("config") or {}).get("kernel"):
            names.add(PurePath(e["config"]["kernel"]).name)
    for c in tool_calls(events):
        if c["name"].lower() in ("write", "edit", "multiedit"):
            p = PurePath(_path(c["input"])).name
            if p.endswith(SOURCE_EXT):
                names.add(p)
    return names


def reread_share(events: list[dict]) -> dict:
    """Tool-result characters spent reading the agent's own kernel sources, and their share."""
    own = own_sources(events)
    calls = {c["id"]: c for c in tool_calls(events)}
    total = mine = 0
    for e in events:
        if e.get("type") != "tool_result":
            continue
        k = len(e.get("output") or "")
        total += k
        c = calls.get(e.get("tool_use_id"))
        if not c:
            continue
        n, inp = c["name"].lower(), c["input"]
        if n == "read" and PurePath(_path(inp)).name in own:
            mine += k
        elif n in ("shell", "bash"):
            cmd = str(inp.get("command", ""))
            if _READCMD.match(cmd) and any(re.search(rf"(^|[\s/'\"]){re.escape(o)}\b", cmd) for o in own):
                mine += k
    return {"own_source_chars": mine, "tool_result_chars": total, "share": mine / total if total else None}


def _edits(c: dict) -> list[tuple[str, str]]:
    inp = c["input"]
    if "edits" in inp:
        return [(x.get("old_string", ""), x.get("new_string", "")) for x in inp.get("edits") or []]
    return [(inp.get("old", inp.get("old_string", "")), inp.get("new", inp.get("new_string", "")))]


_TRIVIAL = re.compile(r"^[\s{}();,\[\]]*$")


def recurrence_share(events: list[dict]) -> dict:
    """Added lines (non-blank, not braces alone) identical, trailing space aside, to a line deleted
    by an earlier edit or write, over all added lines."""
    deleted: set[str] = set()
    files: dict[str, str] = {}
    added = recurring = 0
    for c in tool_calls(events):
        n = c["name"].lower()
        if n not in ("write", "edit", "multiedit"):
            continue
        path = _path(c["input"])
        pairs = [(files.get(path, ""), c["input"].get("content", ""))] if n == "write" else _edits(c)
        gone: list[str] = []
        for old, new in pairs:
            a, b = old.splitlines(), new.splitlines()
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
                if tag in ("replace", "delete"):
                    gone += [x.rstrip() for x in a[i1:i2]]
                if tag in ("replace", "insert"):
                    for x in b[j1:j2]:
                        if not _TRIVIAL.match(x):
                            added += 1
                            recurring += x.rstrip() in deleted
            if n != "write" and path in files and old in files[path]:
                files[path] = files[path].replace(old, new, 1)
        if n == "write":
            files[path] = c["input"].get("content", "")
        deleted.update(x for x in gone if not _TRIVIAL.match(x))
    return {"added_lines": added, "recurring_lines": recurring, "share": recurring / added if added else None}


# ---- progress over evaluations ------------------------------------------------------------------
def _full_evals(events):
    """Full, timed evaluations of versions whose every row passed the check (traces.passed_full):
    a version that fails the check has no speed worth counting, however fast its passing rows."""
    return [e for e in events if passed_full(e)]


def _steps_before(events, ev) -> int:
    return sum(1 for e in events if e.get("type") == "usage" and e["seq"] < ev["seq"])


def time_to_best(events: list[dict]) -> dict:
    ev = _full_evals(events)
    if not ev:
        return {"best_geomean": None, "eval": None, "step": None, "hours": None}
    best = max(ev, key=lambda e: e["geomean"])      # the first evaluation reaching the best
    t0 = next((e["t"] for e in events if e.get("type") == "start"), events[0].get("t"))
    return {"best_geomean": best["geomean"], "eval": best.get("n"), "step": _steps_before(events, best),
            "hours": (best["t"] - t0) / 3600 if t0 is not None else None}


def plateaus(events: list[dict], noise: float = 0.0) -> pd.DataFrame:
    """Stretches without a new best (above best * (1 + noise)): from which evaluation, for how many
    evaluations, model steps and hours; the last one may still be going on."""
    ev = _full_evals(events)
    recs, best, since = [], None, None
    last_t = max((e.get("t") or 0) for e in events) if events else 0
    for e in ev:
        if best is None or e["geomean"] > best["geomean"] * (1 + noise):
            if since is not None and since["n_after"]:
                recs.append(_plateau(events, best, since["n_after"], e))
            best, since = e, {"n_after": 0}
        else:
            since["n_after"] += 1
    if best is not None and since["n_after"]:
        recs.append(_plateau(events, best, since["n_after"], None, last_t))
    return pd.DataFrame(recs, columns=["from_eval", "best_geomean", "evaluations", "steps", "hours", "ended"])


def _plateau(events, best, n, nxt, last_t=None):
    end_t = nxt["t"] if nxt else last_t
    end_steps = _steps_before(events, nxt) if nxt else sum(e.get("type") == "usage" for e in events)
    return {"from_eval": best.get("n"), "best_geomean": best["geomean"], "evaluations": n,
            "steps": end_steps - _steps_before(events, best), "hours": (end_t - best["t"]) / 3600,
            "ended": nxt is not None}


def summary(events: list[dict]) -> dict:
    """Headline numbers of one trace."""
    start = next((e for e in events if e.get("type") in ("start",)), {})
    rr, rec, tb = reread_share(events), recurrence_share(events), time_to_best(events)
    ps, sp, br, qm = prompt_summary(events), span_and_idle(events), branches(events), question_mentions(events)
    return {"arm": start.get("arm"), "model": start.get("model"), "confined": start.get("confined"),
            "source": start.get("source_format", "kernelseek"),
            "person_messages": len(person_messages(events)),
            "bank_questions": sum(e.get("type") == "question" and e.get("source") == "bank" for e in events),
            "tool_calls": len(tool_calls(events)), "calls_per_person_message": calls_per_message(events),
            "reread_share": rr["share"], "recurrence_share": rec["share"],
            "best_geomean": tb["best_geomean"], "steps_to_best": tb["step"], "hours_to_best": tb["hours"],
            "dollars": sum(float(e.get("cost_usd") or 0) for e in events if e.get("type") == "usage"),
            "median_prompt_chars": ps["median_prompt_chars"], "prefetched_share": ps["prefetched_share"],
            "run_hours": sp["span_hours"], "idle_hours": sp["idle_hours"], "forks": br["forks"],
            "rollbacks": br["rollbacks"], "steps_discarded": br["steps_discarded"],
            "questions_naming_attention": qm["attention"]}


def report(traces: list[list[dict]], names=None) -> str:
    """Every table of every trace, as text (what `kernelseek trace stats` prints)."""
    names = names or [f"trace {i}" for i in range(len(traces))]
    out = [pd.DataFrame([dict(summary(t), trace=str(n)) for t, n in zip(traces, names)]).to_string(index=False)]
    for t, n in zip(traces, names):
        out += [f"\n== {n}", messages_by_kind(t).to_string(index=False), questions_by_category(t).to_string(index=False),
                tool_use_by_kind(t).to_string(index=False), plateaus(t).to_string(index=False),
                question_effects(t).to_string(index=False)]
    return "\n".join(out)


# ---- tokens and dollars per step -------------------------------------------------------------------
def usage_by_step(events: list[dict], prices=None, model: str | None = None) -> pd.DataFrame:
    """One row per model call: tokens of each kind, the cached share of the prompt, dollars.

    prompt_tokens = input + cache read + cache write (what the request held); cached_share =
    cache read / prompt; usd is the trace's own cost_usd. With `prices` (agent.budget.Prices),
    uncached_usd is what the same call would have cost with no prompt cache (every prompt token at
    the input price). attrs["compaction_steps"]: the steps right after each `context` event."""
    rows = []
    for e in events:
        if e.get("type") != "usage" or e.get("sidechain"):
            continue
        r = {k: int(e.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                             "cache_creation_input_tokens", "output_tokens")}
        r["prompt_tokens"] = r["input_tokens"] + r["cache_read_input_tokens"] + r["cache_creation_input_tokens"]
        r["cached_share"] = r["cache_read_input_tokens"] / r["prompt_tokens"] if r["prompt_tokens"] else 0.0
        r["usd"] = float(e.get("cost_usd") or 0.0)
        if prices is not None:
            p = prices.for_model(model or e.get("model") or "") or {}
            r["uncached_usd"] = (r["prompt_tokens"] * p.get("input", 0.0) + r["output_tokens"] * p.get("output", 0.0)) / 1e6
        rows.append(dict(step=len(rows) + 1, **r))
    cols = ["step", "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens",
            "prompt_tokens", "cached_share", "usd"] + (["uncached_usd"] if prices is not None else [])
    df = pd.DataFrame(rows, columns=cols)
    df["cumulative_usd"] = df["usd"].cumsum()
    if prices is not None:
        df["cumulative_uncached_usd"] = df["uncached_usd"].cumsum()
    compactions = [e for e in events if e.get("type") == "context"]
    df.attrs["compaction_steps"] = [sum(1 for u in events if u.get("type") == "usage" and u["seq"] < c["seq"]) + 1
                                    for c in compactions]
    return df
