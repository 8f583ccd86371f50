"""`kernelseek profile [--out DIR] -- CMD...`: Nsight Compute on one command (put it after --), parsed."""
from __future__ import annotations

from . import about
from .. import profile as P


def register(subparsers) -> None:
    p = subparsers.add_parser("profile", description=about(__doc__))
    p.add_argument("--out", default="runs/profile", help="directory for the report and tables")
    p.add_argument("--section", action="append", help=f"ncu section (repeat; default {' '.join(P.DEFAULT_SECTIONS)})")
    p.add_argument("--kernel", help="profile only kernels whose name matches this regex")
    p.add_argument("--launch-count", type=int, default=1)
    p.add_argument("--launch-skip", type=int, default=0)
    p.add_argument("--import", dest="rep", help="summarize an existing .ncu-rep instead of running")
    p.add_argument("cmd", nargs="*", help="the command to profile, after --")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.rep:
        table, src = P.read_report(args.rep)
        print(f"({src})\n" + P.format_summary(P.summarize_ncu(table)))
        return 0
    if not args.cmd:
        print("profile: give the command to profile after --")
        return 2
    try:
        r = P.run_ncu(args.cmd, args.out, tuple(args.section or P.DEFAULT_SECTIONS), args.kernel,
                      args.launch_count, args.launch_skip)
    except FileNotFoundError as e:
        print(e)
        return 2
    print(f"ncu exit {r.returncode}; files in {r.out_dir} ({r.source or 'no report'})")
    print(P.format_summary(r.summary) if r.summary else r.stdout[-4000:])
    return 0 if r.ok else 1
