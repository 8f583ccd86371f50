"""`kernelseek show RUN`: print a run's results table and summary.

RUN is a run directory or its results.json; committed H200 runs are under data/runs/. A missing
folder or a results file that is not KernelSeek's is one line naming it, exit 2.
"""
from __future__ import annotations

from pathlib import Path

from . import UserError, about, user_input
from .. import mainjob, results, store


def register(subparsers) -> None:
    p = subparsers.add_parser("show", description=about(__doc__))
    p.add_argument("run", help="run directory or results.json")
    p.set_defaults(func=run)


def run(args) -> int:
    path = Path(args.run)
    run_dir = path.parent if path.suffix == ".json" or path.name == store.RESULTS_GZ else path
    if not path.exists():
        raise UserError(f"{path}: no such run directory (committed H200 runs are under data/runs/)")
    with user_input(path):
        results.load(path)          # the file's problems, named, before anything is printed
    print(mainjob.describe(run_dir))
    return 0
