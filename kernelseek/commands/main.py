"""`kernelseek main`: the README's main job: evaluate on a GPU, else replay the committed H200 results.

An explicit --kernel or --grid is checked first, even when the job replays (one line, exit 2), and
so is the folder for the figures; on a GPU machine without nvcc the job stops before building.
"""
from __future__ import annotations

from pathlib import Path

from . import UserError, about, user_input
from .. import mainjob
from ..kernel_source import format_defines, parse_defines
from ..paths import KERNELS


def register(subparsers) -> None:
    p = subparsers.add_parser("main", description=about(__doc__))
    p.add_argument("--kernel", help="kernel file or folder (default: kernels/fa3_hopper/, else kernels/naive_fwd.cu)")
    p.add_argument("--grid", default="bench26")
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                   help="build variant of the kernel: -DNAME=VALUE (repeatable; not with the replay)")
    p.add_argument("--out", default="out", help="where figures go")
    p.add_argument("--replay", action="store_true", help="replay even when a GPU is present")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..evaluate import check_inputs, evaluate, exit_code, machine_problem
    kernel = args.kernel or next(str(p) for p in (KERNELS / "fa3_hopper",
                                                  KERNELS / "naive_fwd.cu") if p.exists())
    with user_input():
        defines = parse_defines(args.define)
        check_inputs(kernel, args.grid, defines=defines)
    with user_input(args.out):
        Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.replay or not mainjob._has_gpu():
        if defines:
            raise UserError(f"--define {format_defines(defines)} builds a variant to evaluate; "
                            "the replay of committed results builds nothing")
        return mainjob.replay(Path(args.out))
    problem = machine_problem()
    if problem:
        raise UserError(problem)
    cmd = f"kernelseek main --grid {args.grid}" + "".join(f" --define {k}={v}" for k, v in defines.items())
    run_dir, rows, meta = evaluate(kernel, args.grid, "best", command=cmd, defines=defines)
    print(mainjob.describe(run_dir))
    return exit_code(rows)
