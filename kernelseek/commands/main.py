"""`kernelseek main`: the README's main job (evaluate on a GPU, else replay the committed H200 results)."""
from __future__ import annotations

import sys
from pathlib import Path

from . import about
from .. import mainjob
from ..kernel_source import format_defines, parse_defines


def register(subparsers) -> None:
    p = subparsers.add_parser("main", description=about(__doc__))
    p.add_argument("--kernel", help="kernel file or folder (default: kernels/fa3_hopper/, else "
                   "kernels/fa3_hopper.cu, else kernels/naive_fwd.cu)")
    p.add_argument("--grid", default="bench26")
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                   help="build variant of the kernel: -DNAME=VALUE (repeatable; not with the replay)")
    p.add_argument("--out", default="out", help="where figures go")
    p.add_argument("--replay", action="store_true", help="replay even when a GPU is present")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        defines = parse_defines(args.define)
    except ValueError as e:
        print(f"kernelseek main: {e}", file=sys.stderr)
        return 2
    if args.replay or not mainjob._has_gpu():
        if defines:
            print(f"kernelseek main: --define {format_defines(defines)} builds a variant to evaluate; "
                  "the replay of committed results builds nothing", file=sys.stderr)
            return 2
        return mainjob.replay(Path(args.out))
    from ..evaluate import evaluate, exit_code
    kernels = mainjob.REPO / "kernels"
    kernel = args.kernel or next(str(p) for p in (kernels / "fa3_hopper", kernels / "fa3_hopper.cu",
                                                  kernels / "naive_fwd.cu") if p.exists())
    cmd = f"kernelseek main --grid {args.grid}" + "".join(f" --define {k}={v}" for k, v in defines.items())
    run_dir, rows, meta = evaluate(kernel, args.grid, "best", command=cmd, defines=defines)
    print(mainjob.describe(run_dir))
    return exit_code(rows)
