"""`kernelseek campaign run | matrix | resume | restore | status`: agent campaigns (kernelseek/campaign.py).

`restore RUN REF --fork | --rollback` also records the branch in the trace (kernelseek/branching.py).

A folder that is not a campaign (no config.json), a missing kernel or goal file, or a bad budget is
one line naming it, exit 2. run, resume: exit 0 when the goal was met, else 1.
"""
from __future__ import annotations

import json
import sys

from . import UserError, about, describe_error, existing, needs_subcommand, user_input
from .. import campaign as C
from ..agent.config import load as load_config


def _config_args(p) -> None:
    p.add_argument("--kernel", required=True, help="the starting kernel: a .cu file (copied with the local "
                   "headers it includes) or a kernel folder <name>/ (copied as a folder)")
    p.add_argument("--grid", default="bench26")
    p.add_argument("--baseline", default="best")
    p.add_argument("--scenarios")
    p.add_argument("--goal", help="goal YAML (default goals/default.yaml)")
    p.add_argument("--model", default=C.Config.model)
    p.add_argument("--max-tokens", type=int, default=C.Config.max_tokens, help="per model call")
    p.add_argument("--thinking", type=int, default=0, help="extended-thinking budget per call (0: off)")
    p.add_argument("--evaluator", default="harness", help="harness | replay:DIR[,DIR...]")
    p.add_argument("--base-url", help="the Messages API (default: the client's)")
    p.add_argument("--unconfined", action="store_true",
                   help="run the agent's shell and the candidates WITHOUT bubblewrap (recorded in the trace and "
                        "the summary); the default needs bubblewrap and refuses to start without it")
    p.add_argument("--docs", help="equipped arm: documentation folder for BM25 retrieval")
    p.add_argument("--plateau-evals", type=int, default=C.Config.plateau_evals,
                   help="bank arm: evaluations without a gain before the plateau moment")
    p.add_argument("--note", help="a line recorded in the trace at the start (e.g. that the model is a script)")
    p.add_argument("--campaigns-dir", default="campaigns")
    _budget_args(p)


def _budget_args(p, defaults: bool = True) -> None:
    d = (lambda v: v) if defaults else (lambda v: None)
    p.add_argument("--steps", type=int, default=d(200), help="model calls")
    p.add_argument("--tokens", type=int, default=None)
    p.add_argument("--dollars", type=float, default=d(50.0))
    p.add_argument("--wall-s", type=float, default=None)


def _config(a, arm: str = "bare", replicate: int = 0) -> C.Config:
    return C.Config(kernel=a.kernel, grid=a.grid, baseline=a.baseline, scenarios=a.scenarios, goal=a.goal,
                    arm=arm, model=a.model, max_tokens=a.max_tokens, thinking_budget=a.thinking,
                    evaluator=a.evaluator, base_url=a.base_url, sandbox="none" if a.unconfined else "bwrap",
                    docs=a.docs, replicate=replicate, plateau_evals=a.plateau_evals, note=a.note,
                    budget={"steps": a.steps, "tokens": a.tokens, "dollars": a.dollars, "wall_s": a.wall_s})


def register(subparsers) -> None:
    p = subparsers.add_parser("campaign", description=about(__doc__))
    s = p.add_subparsers(dest="campaign_cmd", metavar="CMD")
    r = s.add_parser("run", help="one campaign through notebooks/campaign.ipynb (papermill)")
    _config_args(r)
    r.add_argument("--arm", default="bare", choices=C.ARMS)
    r.add_argument("--replicate", type=int, default=0)
    r.add_argument("--id", help="campaign id (default: <utc>-<arm>-r<replicate>)")
    r.add_argument("--gpu", help="CUDA device for this campaign")
    r.set_defaults(func=_cmd_run)
    m = s.add_parser("matrix", help="arms x replicates in parallel on Dask, one GPU each")
    _config_args(m)
    m.add_argument("--arms", default=",".join(C.ARMS))
    m.add_argument("--replicates", type=int, default=1)
    m.add_argument("--scheduler", help="address of a running Dask scheduler (default: a LocalCluster)")
    m.add_argument("--workers", type=int, help="LocalCluster workers (default: one per --gpus entry, else 1)")
    m.add_argument("--gpus", help="comma-separated CUDA devices, one per worker")
    m.set_defaults(func=_cmd_matrix)
    u = s.add_parser("resume", help="continue a crashed (or budget-stopped) campaign from its trace")
    u.add_argument("run", help="the campaign directory")
    _budget_args(u, defaults=False)
    u.set_defaults(func=_cmd_resume)
    t = s.add_parser("restore", help="put a kept kernel version back into the workspace; --fork or --rollback "
                     "also records a branch event in the trace (nothing is deleted)")
    t.add_argument("run")
    t.add_argument("ref", help="an evaluation number or a version hash prefix")
    how = t.add_mutually_exclusive_group()
    how.add_argument("--fork", action="store_const", const="fork", dest="action",
                     help="open a new line from that evaluation (the current line stays a candidate)")
    how.add_argument("--rollback", action="store_const", const="rollback", dest="action",
                     help="give up the current line: its steps since that evaluation count as discarded")
    t.add_argument("--by", default="human", choices=("human", "agent", "harness"), help="who decided it")
    t.add_argument("--reason", default="", help="why, in a line (kept in the event)")
    t.set_defaults(func=_cmd_restore)
    st = s.add_parser("status", help="a campaign's outcome row")
    st.add_argument("run")
    st.set_defaults(func=_cmd_status)
    needs_subcommand(p, s)


def _campaign_dir(path) -> None:
    """A UserError unless `path` is a campaign directory (it holds config.json)."""
    existing(path, "campaign directory")
    with user_input(path):
        load_config(path)


def _cmd_status(a) -> int:
    _campaign_dir(a.run)
    print(json.dumps(C.outcome(a.run), indent=1))
    return 0


def _check_config(a) -> None:
    """The inputs of a new campaign, before any folder is made: kernel, grid, goal, budget."""
    from ..goal import load_goal
    from ..scenarios import load_grid, select
    existing(a.kernel, "kernel file or folder")
    if not a.unconfined:
        from ..confine import unavailable
        why = unavailable()
        if why:                            # no silent fallback: say how to proceed
            raise UserError(f"a campaign runs confined and needs bubblewrap, but {why}. To run it unconfined "
                            "instead, say so: --unconfined (recorded in the trace and the summary)")
    if a.goal:
        existing(a.goal, "goal file")
        with user_input(a.goal):
            load_goal(a.goal)
    if not str(a.evaluator).startswith("replay:"):
        with user_input(a.grid):
            select(load_grid(a.grid), a.scenarios)
    _check_budget(a)
    if a.plateau_evals < 1:
        raise UserError(f"--plateau-evals {a.plateau_evals}: expected at least 1")


def _check_budget(a) -> None:
    for name in ("steps", "tokens", "dollars", "wall_s"):
        v = getattr(a, name, None)
        if v is not None and v <= 0:
            raise UserError(f"--{name.replace('_', '-')} {v}: expected a positive budget")


def _cmd_run(a) -> int:
    from papermill.exceptions import PapermillExecutionError
    _check_config(a)
    try:
        root = C.run(_config(a, a.arm, a.replicate), a.campaigns_dir, a.id, gpu=a.gpu)
    except PapermillExecutionError as e:
        print(_redacted(f"kernelseek campaign: the notebook failed: {e.ename}: {e.evalue}"), file=sys.stderr)
        return 1
    except (OSError, ValueError, RuntimeError) as e:
        raise UserError(_redacted(describe_error(e))) from None
    print(json.dumps(C.outcome(root), indent=1))
    return 0 if C.outcome(root)["met"] else 1


def _redacted(text: str) -> str:
    """An error line with secrets redacted (an API error may echo the key)."""
    from ..redact import Redactor
    return Redactor.from_env().text(text)


def _cmd_matrix(a) -> int:
    gpus = [g.strip() for g in a.gpus.split(",")] if a.gpus else None
    arms = [x.strip() for x in a.arms.split(",") if x.strip()]
    unknown = [x for x in arms if x not in C.ARMS]
    if unknown or not arms:
        raise UserError(f"--arms {a.arms}: unknown arm {unknown[0] if unknown else '(none)'} (arms: {', '.join(C.ARMS)})")
    _check_config(a)
    with user_input():
        df = C.matrix(_config(a), arms, a.replicates, a.campaigns_dir, a.scheduler, a.workers, gpus)
    print(df.to_string(index=False))
    return 0


def _cmd_resume(a) -> int:
    from ..agent import run_campaign
    from ..agent.loop import CampaignCrash, MissingKey
    _campaign_dir(a.run)
    _check_budget(a)
    try:
        cfg, _ = load_config(a.run)
        b = dict(cfg.budget)
        b.update({k: v for k, v in (("steps", a.steps), ("tokens", a.tokens), ("dollars", a.dollars),
                                    ("wall_s", a.wall_s)) if v is not None})
        out = run_campaign(a.run, budget=b)
    except (MissingKey, CampaignCrash, OSError, ValueError, RuntimeError) as e:
        raise UserError(_redacted(describe_error(e))) from None
    print(out.line())
    return 0 if out.met else 1


def _cmd_restore(a) -> int:
    from ..agent.tools import restore
    _campaign_dir(a.run)
    if a.action:
        from ..branching import branch
        with user_input(errors=(OSError, KeyError, ValueError)):
            ev = branch(a.run, a.ref, a.action, a.by, a.reason)
        print(f"{a.action} {ev['branch']} from evaluation {ev['from_eval']} (step {ev['from_step']} of "
              f"{ev['at_step']}; {ev['discarded_steps']} steps discarded): restored {ev['restored']}")
        return 0
    with user_input(errors=(OSError, KeyError, ValueError)):
        dest = restore(a.run, a.ref)
    print(f"restored {dest}")
    return 0
