"""`kernelseek triage RUN`: which rows and feature groups bring the geometric mean down."""
from __future__ import annotations

from pathlib import Path

from . import about
from .. import results
from .. import triage as T


def register(subparsers) -> None:
    p = subparsers.add_parser("triage", description=about(__doc__))
    p.add_argument("run_dir", help="a run directory (or results.json); a campaign dir prints its timeline")
    p.add_argument("--compare", metavar="RUN_DIR2", help="a later run to compare against RUN_DIR")
    p.add_argument("--noise", type=float, default=None,
                   help=f"relative noise for --compare (default: from p10/p90, else {T.DEFAULT_NOISE})")
    p.add_argument("--plot", metavar="OUT.png", help="write the per-row speedup bars")
    p.add_argument("--repeat", nargs="+", metavar="RUN_DIR", default=None,
                   help=f"later runs of the same kernel, in order: each consecutive pair's rows that moved "
                        f"more than {T.REPEAT_TOLERANCE:.0%} and which side moved them")
    p.set_defaults(func=run)


def run(args) -> int:
    target = Path(args.run_dir)
    if (target / "evals").is_dir():
        evs = T.campaign_evals(target)
        if not evs:
            print(f"{target}: no evaluations under evals/")
            return 2
        tl = T.timeline(evs)
        print(tl.to_string(index=False))
        target = evs[-1]
        print(f"\nlatest evaluation: {target}\n")
    try:
        rows, _ = results.load(target)
    except (FileNotFoundError, ValueError) as e:
        print(e)
        return 2
    t = T.triage(rows)
    print(t.text())
    if args.repeat:
        runs = [(target.name, rows)]
        for d in args.repeat:
            try:
                runs.append((Path(d).name, results.load(d)[0]))
            except (FileNotFoundError, ValueError) as e:
                print(e)
                return 2
        print("\n== repeatability (consecutive runs)")
        print(T.format_repeatability(T.repeatability(runs)))
    if args.compare:
        try:
            rows2, _ = results.load(args.compare)
        except (FileNotFoundError, ValueError) as e:
            print(e)
            return 2
        print(f"\n== {target} -> {args.compare}")
        print(T.format_compare(T.compare(rows, rows2, args.noise), rows, rows2))
    if args.plot:
        from .. import plots
        fig = plots.speedup_bars(rows2 if args.compare else rows)
        fig.savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"\nwrote {args.plot}")
    return 0
