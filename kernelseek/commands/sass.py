"""`kernelseek sass A [B]`: the instruction mix of a built kernel, or the difference of two."""
from __future__ import annotations

from pathlib import Path

from . import about
from .. import profile as P


def register(subparsers) -> None:
    q = subparsers.add_parser("sass", description=about(__doc__))
    q.add_argument("binary", help=".so, .cubin, or a saved SASS dump (.sass/.txt)")
    q.add_argument("other", nargs="?", help="a second build to compare against")
    q.add_argument("--kernel", help="kernel name (or a part of it)")
    q.add_argument("--ptxas", help="a -Xptxas -v log to summarize")
    q.set_defaults(func=run)


def _load_sass(path: str) -> str:
    return Path(path).read_text() if path.endswith((".sass", ".txt")) else P.sass(path)


def run(args) -> int:
    try:
        a = P.instruction_mix(_load_sass(args.binary), args.kernel)
        if args.other:
            print(P.mix_diff(a, P.instruction_mix(_load_sass(args.other), args.kernel)).to_string(index=False))
        else:
            print("\n".join(f"{k:12} {v}" for k, v in sorted(a.items(), key=lambda kv: (-kv[1], kv[0]))))
    except (FileNotFoundError, RuntimeError, KeyError) as e:
        print(e)
        return 2
    if args.ptxas:
        print(P.ptxas_table(Path(args.ptxas).read_text()).to_string(index=False))
    return 0
