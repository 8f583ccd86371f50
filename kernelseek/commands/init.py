"""`kernelseek init claude-code`: add KernelSeek's Stop hook to a project's .claude/settings.json."""
from __future__ import annotations

import sys
from pathlib import Path

from . import about
from .. import hooks as H


def register(subparsers) -> None:
    ip = subparsers.add_parser("init", description=about(__doc__))
    is_ = ip.add_subparsers(dest="init_cmd", metavar="TARGET")
    cp = is_.add_parser("claude-code", help="add the Stop hook to <dir>/.claude/settings.json")
    cp.add_argument("--dir", default=".", help="the project directory (default: .)")
    cp.add_argument("--command", help="the hook command (default: this Python running kernelseek)")
    cp.add_argument("--campaign", help=f"also write {H.POINTER} pointing at this campaign or run directory")
    cp.set_defaults(func=_claude_code)
    ip.set_defaults(func=lambda a: (ip.print_help(), 2)[1])


def _claude_code(args) -> int:
    try:
        path, changed = H.install_claude_code(args.dir, args.command, args.campaign)
    except (OSError, ValueError) as e:
        print(f"kernelseek init: {e}", file=sys.stderr)
        return 2
    print(f"{path}: {'added the KernelSeek Stop hook' if changed else 'the KernelSeek Stop hook is already there'}")
    if args.campaign:
        print(f"{Path(args.dir) / H.POINTER}: points at {args.campaign}")
    return 0
