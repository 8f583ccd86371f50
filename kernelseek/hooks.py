"""Claude Code hooks: the goal as a Stop hook, and `kernelseek init claude-code` to install it.

`kernelseek hook stop` reads Claude Code's Stop payload (JSON on stdin: session_id,
transcript_path, cwd, hook_event_name, stop_hook_active, last_assistant_message). It prints nothing
to let the agent stop, or {"decision": "block", "reason": ...} naming the shortfall and a question
from the bank; it always exits 0, needs no GPU and answers well within a second.

The campaign: $KERNELSEEK_CAMPAIGN, else the first line of `.kernelseek/campaign` in the payload's
cwd: a campaign directory (its latest evals/<n>/results.json is judged) or a run directory
(results.json). A relative path is relative to that cwd. With no pointer at all the project runs
no campaign and the hook allows (with a note on stderr); missing, unreadable or stale results block.
The goal: --goal, $KERNELSEEK_GOAL, <campaign>/goal.yaml, .kernelseek/goal.yaml, goals/default.yaml.
The cap: consecutive blocks are counted in <campaign>/stop_hook.json (a campaign directory) or
.kernelseek/stop_hook.json, and reset when the hook allows. At the cap ($KERNELSEEK_MAX_BLOCKS,
else the goal's max_blocks, else 8) the hook allows and says so on stderr. A payload with
stop_hook_active true counts as at least one block already made.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from . import store
from .paths import REPO

POINTER = Path(".kernelseek") / "campaign"
ENV_CAMPAIGN, ENV_GOAL, ENV_MAX_BLOCKS = "KERNELSEEK_CAMPAIGN", "KERNELSEEK_GOAL", "KERNELSEEK_MAX_BLOCKS"
DEFAULT_MAX_BLOCKS = 8
STATE_NAME = "stop_hook.json"


def find_campaign(cwd: str | Path, env=None) -> Path | None:
    """The campaign or run directory this project points at; None when it points at none."""
    env = os.environ if env is None else env
    cwd = Path(cwd)
    raw = env.get(ENV_CAMPAIGN, "").strip()
    if not raw and (cwd / POINTER).is_file():
        lines = (cwd / POINTER).read_text().strip().splitlines()
        raw = lines[0].strip() if lines else ""
    if not raw:
        return None
    p = Path(raw).expanduser()
    return p if p.is_absolute() else cwd / p


def _goal_file(campaign: Path | None, cwd: Path, env, explicit=None):
    cands = [explicit, env.get(ENV_GOAL) or None]
    if campaign is not None:
        cands.append(store.Campaign(campaign).goal)
    cands.append(cwd / ".kernelseek" / store.GOAL)          # the project's own, named like a campaign's
    for c in cands:
        if c and (Path(c).is_file() or c in (explicit, env.get(ENV_GOAL))):
            return c
    return None   # goal.load_goal(None): goals/default.yaml, else parity


def _state_path(campaign: Path | None, cwd: Path) -> Path:
    if campaign is not None and store.Campaign(campaign).evals.is_dir() and os.access(campaign, os.W_OK):
        return campaign / STATE_NAME
    return cwd / ".kernelseek" / STATE_NAME


def _read_state(path: Path) -> dict:
    try:
        st = json.loads(path.read_text())
        return st if isinstance(st, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_state(path: Path, st: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(st))
        os.replace(tmp, path)
    except OSError:
        pass  # the cap then rests on stop_hook_active alone


def last_assistant_text(payload: dict) -> str:
    """last_assistant_message, else the last assistant text in the transcript (JSONL)."""
    text = payload.get("last_assistant_message")
    if isinstance(text, str):
        return text
    path = payload.get("transcript_path")
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 262144))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except (OSError, TypeError):
        return ""
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        if isinstance(msg, dict) and msg.get("role") == "assistant":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            parts = [c.get("text", "") for c in content or [] if isinstance(c, dict) and c.get("type") == "text"]
            if parts:
                return "\n".join(parts)
    return ""


def _question(rows, meta, moment, asked: list) -> tuple[str, str | None]:
    """(question line for the reason, its id), never raising: the bank is a help, not a gate."""
    try:
        from .bank import select
        kw = dict(meta=meta, asked=asked, prefer_groups=moment.prefer_groups)
        q = select(moment.kind, rows, **kw) or select(moment.kind, rows, allow_repeat=True, **kw)
    except Exception as e:  # a broken bank must not break the hook
        return f"(no question: the bank could not be read: {e})", None
    if q is None:
        return "", None
    return f"Before you stop, answer this ({q.group}): {q.text} Check it with: {q.check}.", q.id


def _max_blocks(env, goal) -> tuple[int, str]:
    raw = env.get(ENV_MAX_BLOCKS)
    if raw not in (None, ""):
        try:
            return max(0, int(raw)), ""
        except ValueError:
            note = f"{ENV_MAX_BLOCKS}={raw!r} is not an integer; "
    else:
        note = ""
    if goal is not None and goal.max_blocks is not None:
        return goal.max_blocks, note
    return DEFAULT_MAX_BLOCKS, note


def stop(payload: dict, env=None, goal_path=None) -> tuple[dict | None, str]:
    """The Stop hook's decision: (the JSON to print, or None to allow; a note for stderr)."""
    from .goal import GoalError, find_results, judge, load_goal
    from .results import load as load_results
    env = os.environ if env is None else env
    cwd = Path(payload.get("cwd") or os.getcwd())
    campaign = find_campaign(cwd, env)
    if campaign is None:
        return None, (f"kernelseek: no campaign ({ENV_CAMPAIGN} unset and no {POINTER} in {cwd}); "
                      "allowing the stop")
    state_path = _state_path(campaign, cwd)
    st = _read_state(state_path)
    if st.get("session_id") != payload.get("session_id"):
        st["blocks"] = 0
    goal, problem, rows, meta, verdict = None, None, None, None, None
    try:
        goal = load_goal(_goal_file(campaign, cwd, env, goal_path))
    except GoalError as e:
        problem = f"the goal file cannot be used: {e}"
    cap, note = _max_blocks(env, goal)
    saved = st.get("blocks") if isinstance(st.get("blocks"), int) else 0
    prior = max(saved, 1 if payload.get("stop_hook_active") else 0)
    if problem is None:
        try:
            res = find_results(campaign)
            rows, meta = load_results(res)
        except (OSError, ValueError) as e:
            problem = f"no readable results for {campaign}: {e}. Run `kernelseek eval` and try again"
        else:
            from .review import load_reviews, reviews_path
            search = [cwd, campaign, res.parent] + list(res.parent.parents)[:4]
            try:
                reviews = load_reviews(reviews_path(res.parent))
            except ValueError as e:       # a broken reviews file reviews nothing
                reviews, note = [], note + f"kernelseek: {e}; "
            verdict = judge(rows, meta, goal, search=search, where=str(res.parent), reviews=reviews)
    if verdict is not None and verdict.met:
        st.update(blocks=0, session_id=payload.get("session_id"))
        _write_state(state_path, st)
        return None, note + f"kernelseek: goal met ({verdict.where}); allowing the stop"
    if prior >= cap:
        st.update(blocks=0, session_id=payload.get("session_id"))
        _write_state(state_path, st)
        return None, note + (f"kernelseek: goal NOT met, but {prior} consecutive blocks reached the cap "
                             f"of {cap}; allowing the stop. Set {ENV_MAX_BLOCKS} to change the cap")
    shortfall = problem or verdict.shortfall()
    from .review import flag_signature
    from .triggers import Moment, explains_away
    moment = Moment("limit_claim", "the agent tried to stop", ("challenge a limit", "agent process"))
    unreviewed = [v for v in verdict.rows if v.flag.startswith("FLAGGED")] if verdict is not None else []
    sig = flag_signature((meta or {}).get("kernel_sha256"),
                         [r for r in rows or [] if any(v.scenario == r.scenario for v in unreviewed)])
    if rows and any(r.status == "failed" for r in rows) and explains_away(last_assistant_text(payload)):
        moment = Moment("correctness_excuse", "a failed check explained away",
                        ("correctness", "hypothesis check"))
    elif sig and sig != st.get("flag_signature"):      # the flag's question, once per change
        moment = Moment("suspicious_gain", "flagged rows not reviewed", ("benchmark validity", "measurement check"))
        st["flag_signature"] = sig
    asked = [a for a in st.get("asked", []) if isinstance(a, str)]
    qline, qid = _question(rows, meta, moment, asked)
    if qid:
        asked.append(qid)
    st.update(blocks=prior + 1, session_id=payload.get("session_id"), asked=asked)
    _write_state(state_path, st)
    where = verdict.where if verdict is not None else str(campaign)
    reason = (f"KernelSeek: the goal is not met, so keep working. {shortfall}. {qline} "
              f"(Block {prior + 1} of at most {cap}; `kernelseek goal {where}` prints the full verdict.)")
    return {"decision": "block", "reason": " ".join(reason.split())}, note


# ---- init claude-code ------------------------------------------------------------------------
def default_command() -> str:
    """How Claude Code should run the hook: this Python, finding this package."""
    root = REPO                                     # the directory holding the kernelseek package
    py = shlex.quote(sys.executable)
    if "site-packages" in root.parts or "dist-packages" in root.parts:
        return f"{py} -m kernelseek hook stop"
    return f"PYTHONPATH={shlex.quote(str(root))}${{PYTHONPATH:+:$PYTHONPATH}} {py} -m kernelseek hook stop"


def install_claude_code(project: str | Path, command: str | None = None,
                        campaign: str | None = None) -> tuple[Path, bool]:
    """Add the Stop hook to <project>/.claude/settings.json, keeping everything already there.
    Returns (settings path, whether it changed). Raises ValueError on a settings file it cannot
    read as a JSON object (and leaves that file alone)."""
    project = Path(project)
    path = project / ".claude" / "settings.json"
    data: dict = {}
    if path.exists():
        try:
            data = json.loads(path.read_text() or "{}")
        except ValueError as e:
            raise ValueError(f"{path}: not valid JSON ({e}); fix it first, nothing was changed") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object; nothing was changed")
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict) or not isinstance(hooks.setdefault("Stop", []), list):
        raise ValueError(f"{path}: 'hooks' or 'hooks.Stop' has an unexpected type; nothing was changed")
    present = any("kernelseek" in str(h.get("command", "")) and "hook stop" in str(h.get("command", ""))
                  for grp in hooks["Stop"] if isinstance(grp, dict)
                  for h in grp.get("hooks", []) if isinstance(h, dict))
    if not present:
        hooks["Stop"].append({"hooks": [{"type": "command", "command": command or default_command(),
                                         "timeout": 30}]})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    if campaign:
        (project / POINTER).parent.mkdir(parents=True, exist_ok=True)
        (project / POINTER).write_text(str(campaign) + "\n")
    return path, not present
