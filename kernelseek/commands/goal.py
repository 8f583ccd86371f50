"""`kernelseek goal RUN...`: the goal verdict on a run directory (exit 0 only when met).

Exit 1 when the goal is not met (the verdict names the rows short of it); a missing or bad run,
results or goal file is one line naming it, exit 2.
"""
from __future__ import annotations

from . import about, user_input
from .. import goal as G


def register(subparsers) -> None:
    p = subparsers.add_parser("goal", description=about(__doc__))
    p.add_argument("run_dir", nargs="+",
                   help="run directory, results.json, or campaign directory (latest eval); several runs "
                        "of one kernel are judged on each scenario's median speedup")
    p.add_argument("--goal", help=f"goal YAML (default: {G.DEFAULT_GOAL_FILE.name} or parity)")
    p.add_argument("--kernel", help="the current kernel, file or folder (default: meta.kernel of the results)")
    p.set_defaults(func=run)


def run(args) -> int:
    with user_input(args.goal):
        goal = G.load_goal(args.goal)
    with user_input():
        v = G.judge_runs(args.run_dir, goal, kernel=args.kernel)
    print(v.format())
    return 0 if v.met else 1
