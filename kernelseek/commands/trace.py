"""`kernelseek trace import-claude-code | stats | steps | timeline`: import Claude Code sessions; print
trace analytics; a campaign's wall time per step (kernelseek.step_times); campaigns on one clock.

A missing file, a file with no trace event in it (stats) or no user/assistant line (import), or an
--out that already exists is one line naming it, exit 2.
"""
from __future__ import annotations

from pathlib import Path

from . import UserError, about, existing, needs_subcommand, user_input
from .. import analytics, traces
from ..paths import TRACES


def register(subparsers) -> None:
    p = subparsers.add_parser("trace", description=about(__doc__))
    s = p.add_subparsers(dest="trace_cmd", metavar="CMD")
    i = s.add_parser("import-claude-code", help="convert a Claude Code session transcript (JSONL)")
    i.add_argument("session", help="the session's .jsonl (~/.claude/projects/<project>/<session>.jsonl)")
    i.add_argument("--out", help="where to write (default data/traces/<session name>.jsonl)")
    i.add_argument("--label", default="", help="a note kept on the start event")
    i.set_defaults(func=_import)
    st = s.add_parser("stats", help="the analytics tables of one or more traces")
    st.add_argument("traces", nargs="+", help="trace files or campaign directories")
    st.set_defaults(func=_stats)
    sp = s.add_parser("steps", help="a campaign's wall time per step: model call, evaluation (build, check, "
                      "time), the loop's overhead; and what limits the steps per hour")
    sp.add_argument("campaign", help="a campaign directory (its evals/ give the evaluation phases)")
    sp.add_argument("--figure", help="write the stacked-bar figure here (PNG)")
    sp.add_argument("--csv", help="write the table here")
    sp.add_argument("--model-latency", type=float, help="seconds per call of a real model, for the estimate")
    sp.set_defaults(func=_steps)
    tl = s.add_parser("timeline", help="the evaluations of several campaigns on one clock, by GPU")
    tl.add_argument("campaigns", nargs="+", help="campaign directories")
    tl.add_argument("--figure", help="write the timeline figure here (PNG)")
    tl.set_defaults(func=_timeline)
    needs_subcommand(p, s)


def _import(args) -> int:
    out = Path(args.out) if args.out else TRACES / (Path(args.session).stem + ".jsonl")
    existing(args.session, "session file")
    if out.exists():
        raise UserError(f"{out} exists; choose another --out")
    with user_input(args.session):
        events = traces.import_session(args.session, label=args.label)
    with user_input(out):
        traces.write_all(out, events)
    print(f"{len(events)} events -> {out}")
    return 0


def read_trace(path) -> list[dict]:
    """A trace's events; a UserError when the file is missing or holds no event at all (torn lines
    are skipped, as traces.read does, but a file of nothing else is not a trace)."""
    p = Path(path)
    f = p / traces.TRACE if p.is_dir() else p
    existing(f, "trace file")
    with user_input(f):
        evs = traces.read(f)
    if not evs:
        raise UserError(f"{f}: no trace event in it (each line should be a JSON object with a 'type')")
    return evs


def _stats(args) -> int:
    print(analytics.report([read_trace(t) for t in args.traces], names=args.traces))
    return 0


def _steps(args) -> int:
    from .. import step_times as S
    events = read_trace(args.campaign)
    root = Path(args.campaign) if Path(args.campaign).is_dir() else None
    steps = S.step_times(events, root)
    cols = ["step", "eval_n", "tools", "wall_s", *S.PARTS]
    import pandas as pd
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(steps[cols].round(2).to_string(index=False))
    print()
    print(S.limits(steps, args.model_latency))
    if args.csv:
        steps.to_csv(args.csv, index=False)
    if args.figure:
        S.step_plot(steps, title=f"{Path(args.campaign).name}: wall time per step").savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")
    return 0


def _timeline(args) -> int:
    from .. import step_times as S
    spans = S.eval_spans({Path(c).name: (read_trace(c), Path(c) if Path(c).is_dir() else None)
                          for c in args.campaigns})
    print(spans.round(1).to_string(index=False))
    print(f"\n{S.overlap_s(spans):.1f} s with evaluations of two or more campaigns running at once; "
          f"GPUs: {', '.join(sorted(set(spans['gpu'])))}")
    if args.figure:
        S.spans_plot(spans).savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")
    return 0
