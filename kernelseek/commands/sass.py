"""`kernelseek sass A [B]`: the instruction mix of a built kernel, or the difference of two.

A missing file, a file cuobjdump cannot read, no cuobjdump, or a --kernel matching nothing is one
line naming it, exit 2.
"""
from __future__ import annotations

from pathlib import Path

from . import about, existing, user_input
from .. import sass as S


def register(subparsers) -> None:
    q = subparsers.add_parser("sass", description=about(__doc__))
    q.add_argument("binary", help=".so, .cubin, or a saved SASS dump (.sass/.txt)")
    q.add_argument("other", nargs="?", help="a second build to compare against")
    q.add_argument("--kernel", help="kernel name (or a part of it)")
    q.add_argument("--ptxas", help="a -Xptxas -v log to summarize")
    q.set_defaults(func=run)


def _mix(path: str, kernel: str | None):
    """The instruction mix of one binary or saved dump; its problems as one line naming it."""
    existing(path, "file")
    with user_input(path, errors=(OSError, ValueError, RuntimeError, KeyError)):
        text = Path(path).read_text(encoding="utf-8") if path.endswith((".sass", ".txt")) else S.sass(path)
        return S.instruction_mix(text, kernel)


def run(args) -> int:
    a = _mix(args.binary, args.kernel)
    if args.other:
        print(S.mix_diff(a, _mix(args.other, args.kernel)).to_string(index=False))
    else:
        print("\n".join(f"{k:12} {v}" for k, v in sorted(a.items(), key=lambda kv: (-kv[1], kv[0]))))
    if args.ptxas:
        existing(args.ptxas, "file")
        with user_input(args.ptxas):
            print(S.ptxas_table(Path(args.ptxas).read_text(encoding="utf-8")).to_string(index=False))
    return 0
