"""`kernelseek init claude-code`: add KernelSeek's Stop hook to a project's .claude/settings.json.

A settings file that is not a JSON object, or a folder that cannot be written, is one line naming
it, exit 2 (and the file is left as it was).
"""
from __future__ import annotations

from pathlib import Path

from . import about, needs_subcommand, user_input
from .. import hooks as H


def register(subparsers) -> None:
    ip = subparsers.add_parser("init", description=about(__doc__))
    is_ = ip.add_subparsers(dest="init_cmd", metavar="TARGET")
    cp = is_.add_parser("claude-code", help="add the Stop hook to <dir>/.claude/settings.json")
    cp.add_argument("--dir", default=".", help="the project directory (default: .)")
    cp.add_argument("--command", help="the hook command (default: this Python running kernelseek)")
    cp.add_argument("--campaign", help=f"also write {H.POINTER} pointing at this campaign or run directory")
    cp.set_defaults(func=_claude_code)
    needs_subcommand(ip, is_)


def _claude_code(args) -> int:
    with user_input(args.dir):
        path, changed = H.install_claude_code(args.dir, args.command, args.campaign)
    print(f"{path}: {'added the KernelSeek Stop hook' if changed else 'the KernelSeek Stop hook is already there'}")
    if args.campaign:
        print(f"{Path(args.dir) / H.POINTER}: points at {args.campaign}")
    return 0
