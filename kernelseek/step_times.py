"""Where a campaign's wall time goes, step by step, and what limits its steps per hour (issue 23).

    steps = step_times(events, root)     one row per model call (step): the call, its tools, its
                                         evaluation split into build / worker start / check / time,
                                         and the loop's own overhead; seconds throughout
    evals = eval_times(events, root)     one row per evaluation, from the run's meta (phases_s)
    text = limits(steps)                 steps per hour at these rates, and what dominates
    fig = step_plot(steps)               stacked bars per step
    spans = eval_spans({name: (events, root)})   evaluations of several campaigns on one clock,
    fig = spans_plot(spans)              with the GPU each ran on (a matrix: did they overlap?)

A step runs from the end of the step before (the trace's first event for step 1) to the last event
before the next model call. Its parts: `model_s`, from the last event before its `usage` event to
that event (the request, the API's latency and the reply); `tools_s`, the tool_result seconds;
`loop_s`, what is left (the questioner's triggers, the goal check, delivering the inbox, writing
the trace, building the request). An evaluation's tool seconds split into the harness phases of its
run (evaluate.py's meta phases_s: build_s, worker_start_s, then the worker's inputs, reference,
candidate_check, baseline_check as `check`, timing_setup, timing, last_call_check, graph_baselines,
runcheck as `time`), `harness_other_s` (the rest of the run's wall_s: writing results, the worker's
exit) and `toolbox_s` (the tool's seconds beyond the run's wall: keeping the version, judging the
goal). The defence's own costs (defence_refresh, _verify, _traps) are spent inside the worker's
`timing` and `last_call_check` steps, so they are shown as `defence_s`, a part of `time_s`, and never
added to it again (adding them made a step's parts exceed its wall time). Times are epoch seconds from the trace (`t`) and seconds from the run folders.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

CHECK = ("inputs", "reference", "candidate_check", "baseline_check")
TIME = ("timing_setup", "timing", "last_call_check", "graph_baselines", "runcheck")
DEFENCE = ("defence_refresh", "defence_verify", "defence_traps")   # nested in timing / last_call_check
PARTS = ("model_s", "build_s", "worker_start_s", "check_s", "time_s", "harness_other_s", "toolbox_s",
         "other_tools_s", "loop_s")


def _meta(root, ev: dict) -> dict:
    """The evaluation's run meta (kernelseek.store), or {} when its folder is not there."""
    from . import store
    if root is None or not ev.get("dir"):
        return {}
    try:
        return store.read_meta(Path(root) / ev["dir"])
    except (OSError, ValueError):
        return {}


def eval_times(events: list[dict], root=None) -> pd.DataFrame:
    """One row per evaluation: n, tool seconds, and its phases from the run's meta (NaN when the
    run folder is not there, as for a trace read alone)."""
    rows = []
    for ev in (e for e in events if e.get("type") == "evaluation"):
        meta = _meta(root, ev)
        ph = meta.get("phases_s") or {}
        wall = meta.get("wall_s")
        r = {"n": ev.get("n"), "seq": ev.get("seq"), "t": ev.get("t"), "tool_s": float(ev.get("seconds") or 0.0),
             "wall_s": wall, "build_s": ph.get("build_s"), "worker_start_s": ph.get("worker_start_s"),
             "check_s": sum(ph.get(k, 0.0) for k in CHECK) if ph else None,
             "time_s": sum(ph.get(k, 0.0) for k in TIME) if ph else None,
             "defence_s": sum(ph.get(k, 0.0) for k in DEFENCE) if ph else None,
             "cached_build": (meta.get("build") or {}).get("cached"),
             "passed": (ev.get("summary") or {}).get("passed"), "scenarios": (ev.get("summary") or {}).get("scenarios"),
             "geomean": ev.get("geomean"), "check_only": ev.get("check_only"),
             "gpu": (meta.get("env") or {}).get("gpu"), "gpu_uuid": (meta.get("env") or {}).get("gpu_uuid"),
             "cuda_visible_devices": (meta.get("env") or {}).get("cuda_visible_devices")}
        if wall is not None and ph:
            known = sum(ph.get(k, 0.0) for k in ("build_s", "worker_start_s", *CHECK, *TIME))
            r["harness_other_s"] = max(0.0, wall - known)
            r["toolbox_s"] = max(0.0, r["tool_s"] - wall)
        rows.append(r)
    return pd.DataFrame(rows)


def step_times(events: list[dict], root=None) -> pd.DataFrame:
    """One row per model call (see the module docstring); seconds."""
    evs = [e for e in events if isinstance(e.get("t"), (int, float)) and not e.get("sidechain")]
    ut = [i for i, e in enumerate(evs) if e.get("type") == "usage"]
    if not ut:
        return pd.DataFrame(columns=["step", "wall_s", *PARTS])
    ets = eval_times(events, root).set_index("seq") if any(e.get("type") == "evaluation" for e in evs) else None
    rows, prev_end = [], evs[0]["t"]
    for k, i in enumerate(ut):
        nxt = ut[k + 1] if k + 1 < len(ut) else len(evs)
        end = evs[nxt - 1]["t"] if nxt - 1 > i else evs[i]["t"]
        body = evs[i + 1:nxt]
        model = evs[i]["t"] - (evs[i - 1]["t"] if i > 0 else prev_end)
        tools = [e for e in body if e.get("type") == "tool_result"]
        r = {"step": int(evs[i].get("step") or k + 1), "start_t": prev_end, "end_t": end, "wall_s": end - prev_end,
             "model_s": model, "tools": ",".join(e.get("name", "") for e in tools), "eval_n": None}
        tool_s = sum(float(e.get("seconds") or 0.0) for e in tools)
        ev_s = 0.0
        for e in (x for x in body if x.get("type") == "evaluation"):
            x = ets.loc[e["seq"]] if ets is not None else None
            r["eval_n"] = e.get("n")
            ev_s += float(e.get("seconds") or 0.0)
            for c in ("build_s", "worker_start_s", "check_s", "time_s", "defence_s", "harness_other_s", "toolbox_s"):
                v = x.get(c) if x is not None else None
                r[c] = r.get(c, 0.0) + (float(v) if v is not None and v == v else 0.0)
        if r["eval_n"] is not None and all(r.get(c, 0.0) == 0.0 for c in ("build_s", "check_s", "time_s")):
            r["harness_other_s"] = ev_s           # no run folder: the evaluation as one block
        r["other_tools_s"] = max(0.0, tool_s - ev_s)
        r["loop_s"] = max(0.0, r["wall_s"] - model - tool_s)
        rows.append(r)
        prev_end = end
    df = pd.DataFrame(rows)
    for c in (*PARTS, "defence_s"):
        df[c] = df[c].fillna(0.0) if c in df else 0.0
    return df


def limits(steps: pd.DataFrame, model_latency_s: float | None = None) -> str:
    """What limits the steps per hour at the measured rates (a few sentences)."""
    if steps.empty:
        return "no steps in this trace"
    with_eval = steps[steps["eval_n"].notna()]
    mean = steps["wall_s"].mean()
    parts = steps[list(PARTS)].sum()
    top = parts.sort_values(ascending=False)
    share = {k: v / steps["wall_s"].sum() for k, v in top.items() if v > 0}
    lines = [f"{len(steps)} steps in {steps['wall_s'].sum():.0f} s: {mean:.1f} s per step on average, "
             f"so {3600 / mean:.0f} steps per hour at this rate."]
    if not with_eval.empty:
        ev_mean = with_eval["wall_s"].mean()
        split = ", ".join(f"{c[:-2].replace('_', ' ')} {with_eval[c].mean():.1f} s"
                          for c in ("build_s", "worker_start_s", "check_s", "time_s", "harness_other_s", "loop_s",
                                    "model_s"))
        lines.append(f"A step with an evaluation takes {ev_mean:.1f} s ({split}): at most "
                     f"{3600 / ev_mean:.0f} evaluating steps per hour.")
    lines.append("Shares of the wall time: " + ", ".join(f"{k[:-2].replace('_', ' ')} {v:.0%}" for k, v in share.items())
                 + f". The largest, {top.index[0][:-2].replace('_', ' ')}, is what limits the rate.")
    lat = model_latency_s
    if lat is not None:
        lines.append(f"With a model that answers in {lat:.0f} s per call instead, a step takes "
                     f"{mean - steps['model_s'].mean() + lat:.1f} s: "
                     f"{3600 / (mean - steps['model_s'].mean() + lat):.0f} steps per hour.")
    loop = steps["loop_s"]
    lines.append(f"The loop's own overhead: {loop.mean():.2f} s per step on average (at most {loop.max():.2f} s).")
    return " ".join(lines)


COLORS = {"model_s": "#8c8c8c", "build_s": "#1f77b4", "worker_start_s": "#9467bd", "check_s": "#2ca02c",
          "time_s": "#ff7f0e", "harness_other_s": "#bcbd22", "toolbox_s": "#17becf", "other_tools_s": "#e377c2",
          "loop_s": "#d62728"}


def step_plot(steps: pd.DataFrame, title: str | None = None):
    """Stacked horizontal bars: each step's wall time by part (seconds)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8.0, 0.9 + 0.32 * max(3, len(steps))), layout="constrained")
    ax = fig.add_subplot()
    left = [0.0] * len(steps)
    y = list(range(len(steps)))
    for c in PARTS:
        v = steps[c].astype(float).tolist()
        ax.barh(y, v, left=left, color=COLORS[c], label=c[:-2].replace("_", " "))
        left = [a + b for a, b in zip(left, v)]
    ax.set_yticks(y, [f"step {s}" + (f" (eval {int(n)})" if n == n and n is not None else "")
                      for s, n in zip(steps["step"], steps["eval_n"])], fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.legend(fontsize=7, loc="lower right", ncols=3)
    ax.set_title(title or "Wall time per step: model call, evaluation (build, check, time) and the loop", fontsize=9)
    return fig


def eval_spans(campaigns: dict) -> pd.DataFrame:
    """Evaluations of several campaigns on one clock: campaign, n, start (s from the earliest
    campaign start), end, gpu (the run's CUDA_VISIBLE_DEVICES and GPU UUID when recorded).
    `campaigns`: name -> (events, campaign folder or None)."""
    rows = []
    t0 = min([e["t"] for events, _ in campaigns.values() for e in events
              if e.get("type") in ("start", "resume") and "t" in e] or [0.0])
    for name, (events, root) in campaigns.items():
        et = eval_times(events, root)
        for _, r in et.iterrows():
            gpu = "/".join(str(x) for x in (r.get("cuda_visible_devices"), r.get("gpu_uuid")) if x is not None and x == x)
            rows.append({"campaign": name, "n": r["n"], "start": r["t"] - r["tool_s"], "end": r["t"],
                         "gpu": gpu or "?"})
    df = pd.DataFrame(rows, columns=["campaign", "n", "start", "end", "gpu"])
    if not df.empty:
        df[["start", "end"]] -= t0
    return df


def overlap_s(spans: pd.DataFrame) -> float:
    """Seconds during which evaluations of two or more campaigns ran at the same time."""
    pts = sorted([(s, 1, c) for s, c in zip(spans["start"], spans["campaign"])]
                 + [(e, -1, c) for e, c in zip(spans["end"], spans["campaign"])])
    live: dict = {}
    total, last = 0.0, None
    for t, d, c in pts:
        if last is not None and sum(1 for v in live.values() if v > 0) >= 2:
            total += t - last
        live[c] = live.get(c, 0) + d
        last = t
    return total


def spans_plot(spans: pd.DataFrame, title: str | None = None):
    """One lane per campaign, a bar per evaluation coloured by the GPU it ran on."""
    from matplotlib.figure import Figure
    names = list(dict.fromkeys(spans["campaign"]))
    gpus = list(dict.fromkeys(spans["gpu"]))
    cmap = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    fig = Figure(figsize=(8.0, 1.2 + 0.5 * len(names)), layout="constrained")
    ax = fig.add_subplot()
    for g, col in zip(gpus, cmap * 4):
        s = spans[spans["gpu"] == g]
        ax.barh([names.index(c) for c in s["campaign"]], s["end"] - s["start"], left=s["start"], color=col,
                edgecolor="black", lw=0.5, label=f"GPU {g}")
    ax.set_yticks(range(len(names)), names, fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first campaign started")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title or f"Evaluations of each campaign ({overlap_s(spans):.0f} s with two or more at once)",
                 fontsize=9)
    return fig
