"""`kernelseek review RUN --scenario NAME --note TEXT`: review a flagged row, so the goal can count it
(`--list` shows a run's flagged rows and their reviews)."""
from __future__ import annotations

from . import about, fail
from .. import review as RV


def register(subparsers) -> None:
    p = subparsers.add_parser("review", description=about(__doc__))
    p.add_argument("run_dir", help="the run directory holding the flagged row")
    p.add_argument("--scenario", help="the flagged row: scenario name or bench row number")
    p.add_argument("--note", default="", help="what was checked, and why the row stands")
    p.add_argument("--list", action="store_true", help="list the run's flagged rows and their reviews")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..results import load
    try:
        if args.list or not args.scenario:
            rows, meta = load(args.run_dir)
            revs = RV.load_reviews(RV.reviews_path(args.run_dir))
            for r in rows:
                if r.suspicious:
                    rev = RV.covering(revs, meta.get("kernel_sha256"), r)
                    print(f"{r.scenario}: {r.suspicious_reason}: "
                          + (f"reviewed ({rev.time_utc}): {rev.note}" if rev else "NOT reviewed"))
            return 0
        rev = RV.add_review(args.run_dir, args.scenario, args.note)
    except (OSError, ValueError) as e:
        return fail("review", e)
    print(f"{RV.reviews_path(args.run_dir)}: reviewed {rev.scenario} at {rev.speedup:.3f}x "
          f"(covers up to {rev.speedup * (1 + RV.REVIEW_BAND):.3f}x while kernel {rev.kernel_sha256[:12]} is unchanged)")
    return 0
