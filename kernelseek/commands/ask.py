"""`kernelseek ask CAMPAIGN "question"`: put a question in a campaign's inbox for the agent's next turn."""
from __future__ import annotations

from pathlib import Path

from . import about
from .. import inbox


def register(subparsers) -> None:
    p = subparsers.add_parser("ask", description=about(__doc__))
    p.add_argument("run", help="the campaign directory (campaigns/<id>)")
    p.add_argument("question")
    p.add_argument("--source", default="cli")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        rec = inbox.ask(args.run, args.question, source=args.source)
    except (ValueError, FileNotFoundError) as e:
        print(f"kernelseek ask: {e}")
        return 2
    print(f"queued as inbox line {rec['line']} of {Path(args.run) / inbox.INBOX}")
    return 0
