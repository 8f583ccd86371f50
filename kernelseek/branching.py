"""Fork a campaign from, or roll it back to, any of its evaluations, recorded as a trace event.

    kernelseek campaign restore campaigns/<id> 7 --fork [--by agent] [--reason "..."]
    kernelseek campaign restore campaigns/<id> 7 --rollback [--by human] [--reason "..."]

Both put evaluation 7's kernel version back into the workspace (agent.tools.restore) and append one
`branch` event to the trace; nothing is deleted (the campaign stays append-only: every evaluation,
version and event of the abandoned line is still there). The two differ in what they say about the
line being left:
    fork       a new line from that evaluation; the current one stays a candidate (paper: "Thirty-seven
               branches were opened along the way, 36 of them from that same step")
    rollback   the current line is given up: its model steps since that evaluation are discarded
               (paper: "3 human rollbacks discarded 117 steps")
The event: action, from_eval, kernel_sha256, by (human | agent | harness), reason, from_step (model
steps before that evaluation), at_step (model steps so far), discarded_steps (a rollback's steps of
the current line after that evaluation: at_step - max(from_step, the last branch event's at_step)),
branch ("b<k>", the k-th branch event), restored (the workspace file).
A loop running the campaign holds its lock: a fork or rollback then is refused (agent/lock.py) rather
than changing the kernel under the running agent. The conversation a later `resume` rebuilds is the
loop's business; the event is what analytics counts (kernelseek.timeline.branches).
"""
from __future__ import annotations

import json

from . import store, traces
from .timeline import BRANCH

ACTIONS = ("fork", "rollback")
BY = ("human", "agent", "harness")


def _evaluation(events: list[dict], ref: str) -> dict:
    """The evaluation event `ref` names: its number, or a prefix of its kernel hash (the latest)."""
    evs = [e for e in events if e.get("type") == "evaluation"]
    if ref.isdigit():
        hit = [e for e in evs if str(e.get("n")) == ref]
    else:
        hit = [e for e in evs if str(e.get("kernel_sha256", "")).startswith(ref.lower())]
    if not hit:
        raise KeyError(f"{ref}: no evaluation in the trace has this number or kernel hash prefix")
    return hit[-1]


def _steps(events: list[dict], before_seq: float = float("inf")) -> int:
    return sum(1 for e in events if e.get("type") == "usage" and not e.get("sidechain") and e.get("seq", 0) < before_seq)


def branch(root, ref: str, action: str, by: str = "human", reason: str = "") -> dict:
    """Restore evaluation `ref`'s kernel into the workspace and append the branch event; returns it."""
    from .agent.lock import CampaignLock
    from .agent.tools import restore
    if action not in ACTIONS:
        raise ValueError(f"action {action!r}: one of {', '.join(ACTIONS)}")
    if by not in BY:
        raise ValueError(f"--by {by}: one of {', '.join(BY)}")
    camp = store.Campaign(root)
    lock = CampaignLock(root).acquire()          # CampaignLocked (an OSError) while a loop runs
    try:
        events = traces.read(camp.trace)
        ev = _evaluation(events, ref)
        dest = restore(root, str(ev["n"]))
        from_step, at_step = _steps(events, ev["seq"]), _steps(events)
        last = [e for e in events if e.get("type") == BRANCH]
        line_start = int(last[-1].get("at_step") or 0) if last else 0
        out = traces.TraceWriter(camp.trace).write(
            BRANCH, action=action, from_eval=ev["n"], kernel_sha256=ev.get("kernel_sha256"), by=by, reason=reason,
            from_step=from_step, at_step=at_step,
            discarded_steps=max(0, at_step - max(from_step, line_start)) if action == "rollback" else 0,
            branch=f"b{len(last) + 1}", restored=str(dest.relative_to(camp.root)))
    finally:
        lock.release()
        if lock.previous:                        # a dead loop's record: left for the next loop to act on
            camp.lock.write_text(json.dumps(lock.previous))
    return out
