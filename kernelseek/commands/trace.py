"""`kernelseek trace import-claude-code | stats`: import Claude Code sessions; print trace analytics."""
from __future__ import annotations

from pathlib import Path

from . import about
from .. import analytics, traces


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
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _import(args) -> int:
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[2] / "data" / "traces" / \
        (Path(args.session).stem + ".jsonl")
    try:
        events = traces.import_session(args.session, label=args.label)
        traces.write_all(out, events)
    except FileExistsError:
        print(f"kernelseek trace: {out} exists; choose another --out")
        return 2
    except (OSError, ValueError) as e:
        print(f"kernelseek trace: {e}")
        return 2
    print(f"{len(events)} events -> {out}")
    return 0


def _stats(args) -> int:
    try:
        print(analytics.report([traces.read(t) for t in args.traces], names=args.traces))
    except (OSError, ValueError) as e:
        print(f"kernelseek trace: {e}")
        return 2
    return 0
