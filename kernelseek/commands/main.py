"""`kernelseek main`: the README's main job (evaluate on a GPU, else replay the committed H200 results)."""
from __future__ import annotations

from pathlib import Path

from . import about
from .. import mainjob


def register(subparsers) -> None:
    p = subparsers.add_parser("main", description=about(__doc__))
    p.add_argument("--kernel", help="kernel file (default: kernels/fa3_hopper.cu if present, else naive_fwd.cu)")
    p.add_argument("--grid", default="bench26")
    p.add_argument("--out", default="out", help="where figures go")
    p.add_argument("--replay", action="store_true", help="replay even when a GPU is present")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.replay or not mainjob._has_gpu():
        return mainjob.replay(Path(args.out))
    from ..evaluate import evaluate, exit_code
    repo = mainjob.REPO
    kernel = args.kernel or next(str(p) for p in (repo / "kernels" / "fa3_hopper.cu", repo / "kernels" / "naive_fwd.cu")
                                 if p.exists())
    run_dir, rows, meta = evaluate(kernel, args.grid, "best", command=f"kernelseek main --grid {args.grid}")
    print(mainjob.describe(run_dir))
    return exit_code(rows)
