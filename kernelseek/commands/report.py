"""`kernelseek report RUN`: render a run's gap-triage and bounds notebooks to HTML.

Every input is read first (RUN or the campaign's evaluations, --compare, --ceilings): a missing or
bad one is one line naming it, exit 2, and no notebook runs. Exit 1 when a notebook itself fails.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import UserError, about, existing, user_input
from .. import report as RP
from .. import results, store
from ..bounds import load_ceilings


def register(subparsers) -> None:
    p = subparsers.add_parser("report", description=about(__doc__))
    p.add_argument("run", help="a run directory (with results.json), or a campaign directory")
    p.add_argument("--compare", metavar="RUN2", help="a later run to compare against RUN")
    p.add_argument("--ceilings", metavar="FILE", help="a ceilings JSON (default: by the run's GPU)")
    p.add_argument("--out", metavar="DIR", help="where to write (default out/report/<RUN's name>/ under the working directory)")
    p.add_argument("--no-code", action="store_true", help="leave the code cells out of the HTML")
    p.set_defaults(func=run)


def _check_inputs(args) -> None:
    run = existing(args.run, "run or campaign directory")
    if store.Campaign(run).evals.is_dir():
        runs = store.campaign_evals(run)
        if not runs:
            raise UserError(f"{run}: no evaluations under evals/")
    else:
        runs = [run]
    for r in runs + ([existing(args.compare, "run directory")] if args.compare else []):
        with user_input(r):
            results.load(r)
    if args.ceilings:
        existing(args.ceilings, "ceilings file")
        with user_input(args.ceilings):
            load_ceilings(path=args.ceilings)
    if args.out:
        with user_input(args.out, errors=(OSError,)):
            Path(args.out).mkdir(parents=True, exist_ok=True)


def run(args) -> int:
    _check_inputs(args)
    try:
        paths = RP.render(args.run, args.out, args.compare, args.ceilings, code=not args.no_code)
    except Exception as e:  # papermill's PapermillExecutionError names the failing cell
        print(f"kernelseek report: a notebook failed: {describe(e)}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


def describe(e: Exception) -> str:
    """A failed notebook in one line: papermill's error name and value, else the exception."""
    name, value = getattr(e, "ename", None), getattr(e, "evalue", None)
    return f"{name}: {value}" if name else " ".join(str(e).split())[:400]
