"""`kernelseek triage RUN`: which rows and feature groups bring the geometric mean down.

RUN is a run directory, its results.json, or a campaign directory (its timeline, then its latest
evaluation). A missing or bad results file (RUN, --compare, --repeat) is one line naming it, exit 2.
"""
from __future__ import annotations

from pathlib import Path

from . import UserError, about, user_input
from .. import compare as CMP
from .. import history, results, store
from .. import triage as T


def register(subparsers) -> None:
    p = subparsers.add_parser("triage", description=about(__doc__))
    p.add_argument("run_dir", help="a run directory (or results.json); a campaign dir prints its timeline")
    p.add_argument("--compare", metavar="RUN_DIR2", help="a later run to compare against RUN_DIR")
    p.add_argument("--noise", type=float, default=None,
                   help=f"relative noise for --compare (default: from p10/p90, else {CMP.DEFAULT_NOISE})")
    p.add_argument("--plot", metavar="OUT.png", help="write the per-row speedup bars")
    p.add_argument("--repeat", nargs="+", metavar="RUN_DIR", default=None,
                   help=f"later runs of the same kernel, in order: each consecutive pair's rows that moved "
                        f"more than {CMP.REPEAT_TOLERANCE:.0%} and which side moved them")
    p.set_defaults(func=run)


def _load(path) -> list:
    with user_input(path):
        return results.load(path)[0]


def run(args) -> int:
    target = Path(args.run_dir)
    if store.Campaign(target).evals.is_dir():
        evs = store.campaign_evals(target)
        if not evs:
            raise UserError(f"{target}: no evaluations under evals/")
        for ev in evs:
            _load(ev)
        print(history.timeline(evs).to_string(index=False))
        target = evs[-1]
        print(f"\nlatest evaluation: {target}\n")
    rows = _load(target)
    repeat = [(Path(d).name, _load(d)) for d in args.repeat or []]
    rows2 = _load(args.compare) if args.compare else None
    print(T.triage(rows).text())
    if repeat:
        print("\n== repeatability (consecutive runs)")
        print(CMP.format_repeatability(CMP.repeatability([(target.name, rows)] + repeat)))
    if rows2 is not None:
        print(f"\n== {target} -> {args.compare}")
        print(CMP.format_compare(CMP.compare(rows, rows2, args.noise), rows, rows2))
    if args.plot:
        from .. import plots
        shown = Path(args.compare) if rows2 is not None else target
        fig = plots.speedup_bars(rows2 if rows2 is not None else rows, meta=results.load(shown)[1], run=shown.name)
        with user_input(args.plot):
            fig.savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"\nwrote {args.plot}")
    return 0
