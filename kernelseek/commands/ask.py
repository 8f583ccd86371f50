"""`kernelseek ask CAMPAIGN "question"`: put a question in a campaign's inbox for the agent's next turn.

A folder that is not a campaign directory, or an empty question, is one line, exit 2.
"""
from __future__ import annotations

from . import UserError, about, existing, user_input
from .. import inbox
from ..store import Campaign


def register(subparsers) -> None:
    p = subparsers.add_parser("ask", description=about(__doc__))
    p.add_argument("run", help="the campaign directory (campaigns/<id>)")
    p.add_argument("question")
    p.add_argument("--source", default="cli")
    p.set_defaults(func=run)


def run(args) -> int:
    if not args.question.strip():
        raise UserError("the question is empty")
    existing(args.run, "campaign directory")
    with user_input(args.run):
        rec = inbox.ask(args.run, args.question, source=args.source)
    print(f"queued as inbox line {rec['line']} of {Campaign(args.run).inbox}")
    return 0
