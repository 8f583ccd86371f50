"""`kernelseek hook stop`: Claude Code's Stop hook (JSON payload on stdin; blocks while the goal is unmet).

Imports no torch and answers well within a second (tests/unit/test_hooks.py holds it to that). It
always exits 0: a payload it cannot read, or an error of its own, blocks once and then allows.
"""
from __future__ import annotations

import json
import sys

from . import about, needs_subcommand
from .. import hooks as H


def register(subparsers) -> None:
    hp = subparsers.add_parser("hook", description=about(__doc__))
    hs = hp.add_subparsers(dest="hook_cmd", metavar="HOOK")
    sp = hs.add_parser("stop", help="the Stop hook: JSON payload on stdin; blocks while the goal is unmet")
    sp.add_argument("--goal", help=f"goal YAML (default: ${H.ENV_GOAL}, the campaign's goal.yaml, goals/default.yaml)")
    sp.set_defaults(func=_stop)
    needs_subcommand(hp, hs)


def _stop(args) -> int:
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw) if raw.strip() else {}
        payload = payload if isinstance(payload, dict) else {}
    except ValueError:
        payload = {}
        print("kernelseek: the Stop payload is not JSON; judging from the current directory", file=sys.stderr)
    try:
        out, note = H.stop(payload, goal_path=args.goal)
    except Exception as e:  # fail closed once, then open: never trap the agent on our own bug
        if payload.get("stop_hook_active"):
            print(f"kernelseek: Stop hook error ({e!r}); allowing the stop", file=sys.stderr)
            return 0
        out, note = {"decision": "block", "reason": f"KernelSeek Stop hook error: {e!r}. "
                     "Check the campaign pointer and results, then try to stop again."}, ""
    if note:
        print(note, file=sys.stderr)
    if out is not None:
        print(json.dumps(out))
    return 0

