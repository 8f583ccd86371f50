"""The agent loop: the Messages API with tool use, held to the goal, within a budget.

    outcome = Loop(campaign_dir).run()        # start, or continue a crashed campaign from its trace

Each step is one model call. Before it, the arm observes the campaign and the inbox is delivered;
tool calls run in the workspace (tools.Toolbox). When the model ends its turn the goal is judged on
the latest full evaluation of the current kernel; if unmet, the shortfall is the next user message.
The loop stops when the goal is met or the budget (steps, tokens, dollars, wall time) is spent.
Everything goes to the trace as it happens, so `resume` rebuilds the conversation, the spend, the
questions asked and the inbox position from it; a tool call cut off by a crash is answered as
interrupted. The API key comes from ANTHROPIC_API_KEY and goes to the client only.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import inbox, traces
from .arms import Injection, make_arm
from .budget import Budget, BudgetError, Prices, Spend
from .config import Paths, load
from .prompts import continue_message, no_results_message, shortfall_message, system_prompt, task_message
from .replay import make_evaluator
from .sandbox import Sandbox
from .tools import TOOLS, Toolbox

DEFAULT_API = "https://api.anthropic.com"


class MissingKey(RuntimeError):
    """ANTHROPIC_API_KEY is not set."""


class CampaignCrash(RuntimeError):
    """The API failed; the trace holds everything up to here and `resume` continues."""


@dataclass
class Outcome:
    campaign: Path
    reason: str
    met: bool
    spend: Spend
    evaluations: int
    best_geomean: float | None

    def line(self) -> str:
        gm = f"{self.best_geomean:.3f}x" if self.best_geomean is not None else "n/a"
        return (f"{self.campaign.name}: {'goal met' if self.met else 'stopped'} ({self.reason}); "
                f"{self.evaluations} evaluations, best geomean {gm}; steps {self.spend.steps}, "
                f"${self.spend.dollars:.2f}")


def make_client(base_url: str | None = None, max_retries: int = 4):
    """The anthropic client, the key from ANTHROPIC_API_KEY (a clear error when it is missing)."""
    key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    if not key:
        raise MissingKey("ANTHROPIC_API_KEY is not set: export the API key of your Anthropic account "
                         "before running a campaign (only the API client gets it; the agent's shell and "
                         "the trace never see it)")
    import anthropic
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=max_retries, timeout=900.0)


def gpu_name() -> str | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def to_param(b) -> dict:
    """A response content block as the block to send back."""
    t = getattr(b, "type", None)
    if t == "text":
        return {"type": "text", "text": b.text}
    if t == "thinking":
        return {"type": "thinking", "thinking": b.thinking, "signature": b.signature}
    if t == "redacted_thinking":
        return {"type": "redacted_thinking", "data": b.data}
    if t == "tool_use":
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    return b.model_dump(exclude_none=True) if hasattr(b, "model_dump") else dict(b)


def rebuild(events: list[dict]) -> tuple[list[dict], list[dict]]:
    """The API conversation from trace events: (messages sent, blocks of the next user message)."""
    messages, pending = [], []
    for ev in events:
        if ev.get("type") == "message" and ev.get("role") == "assistant" and not ev.get("sidechain"):
            if pending:
                messages.append({"role": "user", "content": pending})
                pending = []
            messages.append({"role": "assistant", "content": ev["content"]})
        elif ev.get("type") == "message" and ev.get("role") == "user":
            pending.append({"type": "text", "text": traces.text_of(ev["content"])})
        elif ev.get("type") == "tool_result":
            pending.append({"type": "tool_result", "tool_use_id": ev["tool_use_id"], "content": ev.get("output", ""),
                            "is_error": bool(ev.get("is_error"))})
    return messages, pending


class Loop:
    """One campaign's agent loop."""

    def __init__(self, root, client=None, evaluator=None, budget: Budget | dict | None = None, log=print):
        self.cfg, self.paths = load(root)
        if budget is not None:   # a new budget (resume with more): kept in config.json
            b = budget if isinstance(budget, Budget) else Budget.from_dict(budget)
            self.cfg = dataclasses.replace(self.cfg, budget=b.to_dict())
            self.paths.config.write_text(json.dumps(self.cfg.to_dict(), indent=1))
        self.budget = self.cfg.budget_obj
        self.prices = Prices.load(self.cfg.prices)
        if self.budget.dollars is not None and self.prices.for_model(self.cfg.model) is None:
            raise BudgetError(f"model {self.cfg.model!r} has no entry in the price table {self.prices.source}, "
                              "so a dollar budget cannot be kept; add it there or set the dollar budget to null")
        if self.cfg.thinking_budget and self.cfg.thinking_budget >= self.cfg.max_tokens:
            raise BudgetError(f"thinking_budget {self.cfg.thinking_budget} must be below max_tokens {self.cfg.max_tokens}")
        self.log = log or (lambda *a, **k: None)
        self.writer = traces.TraceWriter(self.paths.trace)
        self.events = traces.read(self.paths.trace)
        self.sandbox = Sandbox(self.paths.workspace, self.cfg.shell_timeout_s, self.cfg.output_cap, self.cfg.sandbox,
                               hide=[self.paths.root.parent])
        self.tools = Toolbox(self.cfg, self.paths, self.sandbox, evaluator or make_evaluator(self.cfg.evaluator))
        self.arm = make_arm(self.cfg, self.paths)
        self.arm.restore(self.events)
        self.client = client if client is not None else make_client(self.cfg.base_url, self.cfg.api_max_retries)
        self.system = system_prompt(self.cfg.kernel_name, self.cfg.grid, self.cfg.baseline, self.tools.goal,
                                    self.cfg.scenarios)

    def emit(self, type: str, **fields) -> dict:
        ev = self.writer.write(type, **fields)
        self.events.append(ev)
        return ev

    # ---- the run ---------------------------------------------------------------------------------
    def run(self) -> Outcome:
        started = any(e.get("type") == "start" for e in self.events)
        last_stop = next((e for e in reversed(self.events) if e.get("type") == "stop"), None)
        if last_stop is not None and (last_stop.get("met") or Spend.from_events(self.events).exceeded(self.budget)):
            self.log(f"campaign already stopped: {last_stop.get('reason')}")
            return self.outcome(last_stop.get("reason", ""), bool(last_stop.get("met")))
        info = dict(git_rev=_git_rev(), gpu=gpu_name(), sandbox=self.sandbox.protection, confined=self.sandbox.confined,
                    api=self.cfg.base_url or DEFAULT_API,
                    arm=self.cfg.arm, model=self.cfg.model, budget=self.budget.to_dict(), host=platform.node(),
                    python=sys.version.split()[0])
        if not started:
            self.emit("start", config=self.cfg.to_dict(), system=self.system, tools=[t["name"] for t in TOOLS], **info)
            self.emit("message", role="user", author="harness",
                      content=[{"type": "text", "text": task_message(self.cfg.kernel_name, self.cfg.grid, self.cfg.baseline)}])
        else:
            self.emit("resume", **info)
        self.log(f"sandbox: {self.sandbox.protection}")
        messages, pending = rebuild(self.events)
        if messages and messages[-1]["role"] == "assistant":
            calls = [b for b in messages[-1]["content"] if b.get("type") == "tool_use"]
            answered = {b.get("tool_use_id") for b in pending}
            for b in calls:
                if b["id"] not in answered:
                    self.emit("tool_result", tool_use_id=b["id"], name=b["name"], is_error=True, seconds=0.0,
                              output="interrupted: the campaign stopped (crashed) before this tool call finished; "
                                     "its effects are unknown, check the workspace")
            if not calls and not any(e.get("type") == "goal_check" for e in self.events[self._last_assistant():]):
                self.check_goal()
            messages, pending = rebuild(self.events)
        return self.steps(messages)

    def steps(self, messages: list[dict]) -> Outcome:
        while True:
            why = Spend.from_events(self.events).exceeded(self.budget)
            if why:
                v = self.tools.verdict()
                self.emit("stop", reason=why, met=False, shortfall=v.shortfall() if v else "no full evaluation")
                self.log(f"stopped: {why}")
                return self.outcome(why, False)
            for inj in self.arm.observe(self) + self.inbox_injections():
                self.emit("message", role="user", author=inj.author,
                          content=[{"type": "text", "text": inj.text}], **inj.meta)
                if "inbox_line" in inj.meta:
                    self.emit("inbox_consumed", line=inj.meta["inbox_line"])
            messages, pending = rebuild(self.events)
            if not pending:
                pending = [{"type": "text", "text": continue_message()}]
            resp = self.call(messages + [{"role": "user", "content": pending}])
            usage = {k: getattr(resp.usage, k, 0) or 0 for k in ("input_tokens", "output_tokens",
                     "cache_creation_input_tokens", "cache_read_input_tokens")}
            cost = self.prices.cost(self.cfg.model, usage)
            spent = Spend.from_events(self.events)
            self.emit("usage", step=spent.steps + 1, model=getattr(resp, "model", self.cfg.model), cost_usd=cost,
                      total_cost_usd=spent.dollars + cost, stop_reason=resp.stop_reason, **usage)
            blocks = [to_param(b) for b in resp.content]
            self.emit("message", role="assistant", author="agent", content=blocks, stop_reason=resp.stop_reason)
            text = traces.text_of(blocks).strip()
            if text:
                self.log(f"[step {spent.steps + 1}] {text[:300]}")
            calls = [b for b in blocks if b["type"] == "tool_use"]
            if calls:
                for b in calls:
                    self.run_tool(b)
            elif resp.stop_reason == "max_tokens":
                self.emit("message", role="user", author="harness", content=[{"type": "text", "text": continue_message()}])
            elif self.check_goal():
                return self.outcome("goal met", True)

    def call(self, messages: list[dict]):
        import anthropic
        kw = dict(model=self.cfg.model, max_tokens=self.cfg.max_tokens, system=self.system, tools=TOOLS,
                  messages=messages)
        if self.cfg.thinking_budget:
            kw["thinking"] = {"type": "enabled", "budget_tokens": self.cfg.thinking_budget}
        try:
            return self.client.messages.create(**kw)
        except anthropic.APIError as e:
            self.emit("error", where="api", message=f"{type(e).__name__}: {e}")
            raise CampaignCrash(f"the API call failed ({type(e).__name__}: {e}); the trace is intact: "
                                f"`kernelseek campaign resume {self.paths.root}` continues") from e

    def run_tool(self, b: dict) -> None:
        import time
        t0 = time.monotonic()
        before = self.tools.last_eval
        self.log(f"  tool {b['name']}: {json.dumps(b.get('input'))[:160]}")
        out, err = self.tools.call(b["name"], b.get("input") or {})
        rec = self.tools.last_eval
        if rec is not None and rec is not before:
            self.emit("evaluation", **rec.event(self.paths.root))
        self.emit("tool_result", tool_use_id=b["id"], name=b["name"], output=out, is_error=err,
                  seconds=round(time.monotonic() - t0, 3))

    def check_goal(self) -> bool:
        """Judge the goal; on a shortfall queue it as the next user message. True when met."""
        v = self.tools.verdict()
        n = self.paths.eval_dirs()[-1].name if self.paths.eval_dirs() else None
        if v is not None and v.met:
            self.emit("goal_check", met=True, eval=n, geomean=v.geomean, shortfall="")
            self.emit("stop", reason="goal met", met=True, eval=n)
            self.log("goal met")
            return True
        msg = shortfall_message(v.shortfall()) if v is not None else no_results_message()
        self.emit("goal_check", met=False, eval=n, geomean=getattr(v, "geomean", None),
                  shortfall=v.shortfall() if v is not None else "no full evaluation")
        self.emit("message", role="user", author="harness", content=[{"type": "text", "text": msg}])
        self.log(f"goal not met: {msg[:200]}")
        return False

    def inbox_injections(self) -> list[Injection]:
        out = []
        for rec in inbox.pending(self.paths.root):
            src = rec.get("source", "cli")
            if not self.arm.accepts(src):
                continue
            meta = {"inbox_line": rec["line"], "source": src}
            meta.update({k: rec[k] for k in ("bank_id", "moment") if rec.get(k)})
            if src != "bank":      # a person's question: the bank arm logged its own when it fired
                self.emit("question", text=rec["text"], source=src, moment=rec.get("moment"),
                          bank_id=rec.get("bank_id"), inbox_line=rec["line"])
            out.append(Injection(rec["text"], "bank" if src == "bank" else "human", meta))
        return out

    def _last_assistant(self) -> int:
        for i in range(len(self.events) - 1, -1, -1):
            if self.events[i].get("type") == "message" and self.events[i].get("role") == "assistant":
                return i
        return 0

    def outcome(self, reason: str, met: bool) -> Outcome:
        evs = [e for e in self.events if e.get("type") == "evaluation"]
        gms = [e["geomean"] for e in evs if e.get("geomean") is not None and not e.get("filtered")]
        return Outcome(self.paths.root, reason, met, Spend.from_events(self.events), len(evs),
                       max(gms) if gms else None)


def _git_rev() -> str:
    from ..evaluate import git_revision
    return git_revision()


def run_campaign(root, **kw) -> Outcome:
    """Start or continue the campaign in `root` (see Loop). What it prints and any error it raises
    leave with secrets redacted (an API error may echo the key; a notebook records both)."""
    from ..redact import redacting, redacting_errors
    if "log" in kw:
        kw["log"] = redacting(kw["log"])
    with redacting_errors():
        return Loop(root, **kw).run()


__all__ = ["Loop", "Outcome", "MissingKey", "CampaignCrash", "make_client", "run_campaign", "rebuild", "Paths"]
