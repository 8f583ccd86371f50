"""`kernelseek bounds RUN`: time against the roofline bound; time outside the kernel.

A missing or bad results file or ceilings file is one line naming it, exit 2.
"""
from __future__ import annotations

from . import about, user_input
from .. import bounds as BD
from .. import results


def register(subparsers) -> None:
    q = subparsers.add_parser("bounds", description=about(__doc__))
    q.add_argument("run_dir")
    q.add_argument("--ceilings", metavar="FILE", help="a ceilings JSON (default: by the run's GPU)")
    q.add_argument("--csv", metavar="OUT.csv", help="also write the table as CSV")
    q.set_defaults(func=run)


def run(args) -> int:
    with user_input(args.run_dir):
        rows, meta = results.load(args.run_dir)
    with user_input(args.ceilings):
        c = BD.load_ceilings(BD._gpu_name(meta), args.ceilings)
    df = BD.bounds_table(rows, c, meta)
    print(BD.format_bounds(df, c))
    if args.csv:
        with user_input(args.csv):
            df.to_csv(args.csv, index=False)
    return 0
