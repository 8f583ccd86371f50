"""`kernelseek profile [--out DIR] -- CMD...`: Nsight Compute on one command (put it after --), parsed.

Needs ncu (Nsight Compute): without it, one line and exit 2 before anything runs. Exit 1 when ncu
itself fails on the command.
"""
from __future__ import annotations

from pathlib import Path

from . import UserError, about, existing, user_input
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
    if not args.rep and not args.cmd:
        raise UserError("give the command to profile after --")
    if args.rep:
        existing(args.rep, "report file")
    with user_input():
        P.need_tool("ncu")
    if args.rep:
        with user_input(args.rep):
            table, src = P.read_report(args.rep)
        print(f"({src})\n" + P.format_summary(P.summarize_ncu(table)))
        return 0
    with user_input(args.out, errors=(OSError,)):
        Path(args.out).mkdir(parents=True, exist_ok=True)
    r = P.run_ncu(args.cmd, args.out, tuple(args.section or P.DEFAULT_SECTIONS), args.kernel,
                  args.launch_count, args.launch_skip)
    print(f"ncu exit {r.returncode}; files in {r.out_dir} ({r.source or 'no report'})")
    print(P.format_summary(r.summary) if r.summary else r.stdout[-4000:])
    return 0 if r.ok else 1
