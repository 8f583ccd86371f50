"""`kernelseek show RUN`: print a run's results table and summary."""
from __future__ import annotations

from pathlib import Path

from . import about
from .. import mainjob


def register(subparsers) -> None:
    p = subparsers.add_parser("show", description=about(__doc__))
    p.add_argument("run", help="run directory or results.json")
    p.set_defaults(func=run)


def run(args) -> int:
    print(mainjob.describe(Path(args.run).parent if args.run.endswith(".json") else Path(args.run)))
    return 0
