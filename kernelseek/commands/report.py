"""`kernelseek report RUN`: render a run's gap-triage and bounds notebooks to HTML."""
from __future__ import annotations

from . import about
from .. import report as RP


def register(subparsers) -> None:
    p = subparsers.add_parser("report", description=about(__doc__))
    p.add_argument("run", help="a run directory (with results.json), or a campaign directory")
    p.add_argument("--compare", metavar="RUN2", help="a later run to compare against RUN")
    p.add_argument("--ceilings", metavar="FILE", help="a ceilings JSON (default: by the run's GPU)")
    p.add_argument("--out", metavar="DIR", help="where to write (default RUN/notebooks/)")
    p.add_argument("--no-code", action="store_true", help="leave the code cells out of the HTML")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        paths = RP.render(args.run, args.out, args.compare, args.ceilings, code=not args.no_code)
    except FileNotFoundError as e:
        print(f"kernelseek report: {e}")
        return 2
    except Exception as e:  # papermill's PapermillExecutionError names the failing cell
        print(f"kernelseek report: a notebook failed: {e}")
        return 1
    for p in paths:
        print(p)
    return 0
