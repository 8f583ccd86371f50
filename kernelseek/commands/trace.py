"""`kernelseek trace import-claude-code | stats`: import Claude Code sessions; print trace analytics.

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
