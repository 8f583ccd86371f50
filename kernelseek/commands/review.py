"""`kernelseek review RUN --scenario NAME --note TEXT`: review a flagged row, so the goal can count it
(`--list` shows a run's flagged rows and their reviews).

A flagged row (a speedup above 1.6x over the best baseline) is not met until a review covers it:
same kernel, same scenario, speedup not grown by more than 10% (kernelseek/review.py). A run that
cannot be read, a row that is not there or not flagged, an empty note or a damaged reviews file
is one line naming it, exit 2.
"""
from __future__ import annotations

from . import about, user_input
from .. import review as RV
from ..results import load


def register(subparsers) -> None:
    p = subparsers.add_parser("review", description=about(__doc__))
    p.add_argument("run_dir", help="the run directory holding the flagged row")
    p.add_argument("--scenario", help="the flagged row: scenario name or bench row number")
    p.add_argument("--note", default="", help="what was checked, and why the row stands")
    p.add_argument("--list", action="store_true", help="list the run's flagged rows and their reviews")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.list or not args.scenario:
        with user_input(args.run_dir):
            rows, meta = load(args.run_dir)
            revs = RV.load_reviews(RV.reviews_path(args.run_dir))
        for r in rows:
            if r.suspicious:
                rev = RV.covering(revs, meta.get("kernel_sha256"), r)
                print(f"{r.scenario}: {r.suspicious_reason}: "
                      + (f"reviewed ({rev.time_utc}): {rev.note}" if rev else "NOT reviewed"))
        return 0
    with user_input():
        rev = RV.add_review(args.run_dir, args.scenario, args.note)
    print(f"{RV.reviews_path(args.run_dir)}: reviewed {rev.scenario} at {rev.speedup:.3f}x "
          f"(covers up to {rev.speedup * (1 + RV.REVIEW_BAND):.3f}x while kernel {rev.kernel_sha256[:12]} is unchanged)")
    return 0
