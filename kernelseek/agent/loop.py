"""The agent loop: the Messages API with tool use, held to the goal, within a budget.

    outcome = Loop(campaign_dir).run()        # start, or continue a stopped or crashed campaign

Each step is one model call. Before it, the arm observes the campaign and the inbox is delivered;
tool calls run in the workspace (tools.Toolbox). When the model ends its turn the goal is judged on
the latest full evaluation of the current kernel; if unmet, the shortfall is the next user message.
The loop stops when the goal is met or the budget (steps, tokens, dollars, wall time) is spent.

Every reply is handled and recorded (platform.claude.com/docs/en/build-with-claude/handling-stop-reasons):
  tool_use        the tools run; each result goes back (bad arguments come back as error results)
  end_turn        the goal is checked (stop_sequence and unknown reasons alike)
  max_tokens      text: "continue"; a tool call cut by the limit is answered "not run, resend it"
  pause_turn      the paused assistant content is sent back as the last message, to continue
  refusal         recorded, left out of the conversation, the model is told; 2 in a row stop the run
  empty content   recorded, never sent back (the API refuses empty messages), the model is nudged;
                  3 in a row stop the run
  errors          retries (api.py), each a `retry` event; a 200 that is not a message is an
                  `error` event and a retry; "prompt is too long" compacts the conversation
                  (context.py) and tries once more; what cannot be retried is an `error` event
                  and CampaignCrash (`resume` continues from the trace)
One loop per campaign (lock.py): a second run or resume is refused, naming the holder. A tool call
never outlives the wall-time budget (procs.deadline); SIGTERM/SIGHUP kill the tools' process
groups, record a `stop` and exit 128+signal. Everything goes to the trace as it happens, so
`resume` rebuilds the conversation (conversation.py), the spend, the questions and the inbox
position from it. The API key comes from ANTHROPIC_API_KEY and goes to the client only.
"""
from __future__ import annotations

import dataclasses
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from .. import traces
from .api import ApiFailure, Caller, MissingKey, PromptTooLong, make_client
from .arms import make_arm
from .budget import Budget, Spend, session_seconds
from .config import Paths, check_config, load
from .host import host_info
from .context import Policy, bytes_per_token
from .conversation import outgoing, rebuild, trailing_drops
from .lock import CampaignLock, pid_alive
from .procs import CampaignKilled, Scope, ToolDeadline, deadline, descendants, in_workspace, kill_groups, signals_raise
from .prompts import (continue_message, empty_reply_message, go_on_message, no_results_message, refusal_message,
                      shortfall_message, system_prompt, task_message, truncated_call_message)
from .replay import make_evaluator
from .sandbox import Sandbox
from .tools import TOOLS, Toolbox

DEFAULT_API = "https://api.anthropic.com"
FULL_OUTPUT_CHARS = 4_000_000     # what the sandbox keeps of a command's output (saved whole; the model sees output_cap)
MAX_DROPS = {"empty": 3, "refusal": 2}
DEADLINE_GRACE_S = 2.0            # the shell's own timeout (the budget left) fires first


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


def _text(t: str) -> list[dict]:
    return [{"type": "text", "text": t}]


class Loop:
    """One campaign's agent loop. Holds the campaign's lock from construction to the end of run()."""

    def __init__(self, root, client=None, evaluator=None, budget: Budget | dict | None = None, log=print,
                 sleep=time.sleep):
        self.lock = CampaignLock(Paths(root).root).acquire()
        try:
            self._setup(root, client, evaluator, budget, log, sleep)
        except BaseException:
            self.lock.release()
            raise

    def _setup(self, root, client, evaluator, budget, log, sleep):
        self.cfg, self.paths = load(root)
        if budget is not None:   # a new budget (resume with more): kept in config.json
            b = budget if isinstance(budget, Budget) else Budget.from_dict(budget)
            self.cfg = dataclasses.replace(self.cfg, budget=b.to_dict())
        self.prices = check_config(self.cfg)
        if budget is not None:
            self.paths.config.write_text(json.dumps(self.cfg.to_dict(), indent=1))
        self.budget = self.cfg.budget_obj
        self.log = log or (lambda *a, **k: None)
        self.writer = traces.TraceWriter(self.paths.trace)
        self.events = traces.read(self.paths.trace)
        self.sandbox = Sandbox(self.paths.workspace, self.cfg.shell_timeout_s, FULL_OUTPUT_CHARS, self.cfg.sandbox,
                               hide=[self.paths.root.parent])
        if self.lock.previous:
            self.took_over(self.lock.previous)
        self.tools = Toolbox(self.cfg, self.paths, self.sandbox, evaluator or make_evaluator(self.cfg.evaluator))
        self.arm = make_arm(self.cfg, self.paths)
        self.arm.restore(self.events)
        self.caller = Caller(client if client is not None else make_client(self.cfg.base_url), self.emit,
                             self.cfg.api_max_retries, sleep)
        windows = [e["window"] for e in self.events if e.get("type") == "context" and e.get("window")]
        self.policy = Policy(min([self.cfg.context_tokens] + windows), self.cfg.context_trigger,
                             self.cfg.context_target, self.cfg.keep_turns)
        self.system = system_prompt(self.cfg.kernel_name, self.cfg.grid, self.cfg.baseline, self.tools.goal,
                                    self.cfg.scenarios)

    def emit(self, type: str, **fields) -> dict:
        ev = self.writer.write(type, **fields)
        self.events.append(ev)
        return ev

    def took_over(self, prev: dict) -> None:
        """The last loop died holding the lock: record it and kill what its tools left running."""
        alive = pid_alive(prev.get("pid")) if prev.get("host") == platform.node() else None
        n = kill_groups(in_workspace(self.paths.workspace))
        self.emit("lock_takeover", previous=prev, previous_alive=alive, strays_killed=n)
        self.log(f"took over the lock of a loop that died (pid {prev.get('pid')}); killed {n} stray process(es)")

    # ---- the run ---------------------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            with signals_raise():
                return self._run()
        except CampaignKilled as e:
            self.killed(str(e))
            raise SystemExit(128 + e.signum) from None
        except KeyboardInterrupt:
            self.killed("SIGINT")
            raise
        finally:
            n = kill_groups(in_workspace(self.paths.workspace))   # what tools left running in the background
            if n:
                self.emit("note", text=f"killed {n} process(es) the tools left running in the workspace")
            self.lock.release()

    def killed(self, name: str) -> None:
        n = kill_groups(descendants() | in_workspace(self.paths.workspace))
        self.emit("stop", reason=f"killed by {name}", met=False, processes_killed=n)
        self.log(f"killed by {name}; {n} tool process(es) killed; `kernelseek campaign resume` continues")

    def _run(self) -> Outcome:
        started = any(e.get("type") == "start" for e in self.events)
        last_stop = next((e for e in reversed(self.events) if e.get("type") == "stop"), None)
        if last_stop is not None and (last_stop.get("met") or Spend.from_events(self.events).exceeded(self.budget)):
            self.log(f"campaign already stopped: {last_stop.get('reason')}")
            return self.outcome(last_stop.get("reason", ""), bool(last_stop.get("met")))
        info = dict(host_info(), sandbox=self.sandbox.protection, confined=self.sandbox.confined,
                    api=self.cfg.base_url or DEFAULT_API, arm=self.cfg.arm, model=self.cfg.model,
                    budget=self.budget.to_dict())
        if not started:
            self.emit("start", config=self.cfg.to_dict(), system=self.system, tools=[t["name"] for t in TOOLS], **info)
            if self.cfg.note:
                self.emit("note", text=self.cfg.note, source="config")
            self.emit("message", role="user", author="harness",
                      content=_text(task_message(self.cfg.kernel_name, self.cfg.grid, self.cfg.baseline)))
        else:
            self.emit("resume", **info)
        self.log(f"sandbox: {self.sandbox.protection}")
        messages, pending, _ = rebuild(self.events)
        if messages and messages[-1]["role"] == "assistant":
            calls = [b for b in messages[-1]["content"] if b.get("type") == "tool_use"]
            answered = {b.get("tool_use_id") for b in pending}
            for b in calls:
                if b["id"] not in answered:
                    self.emit("tool_result", tool_use_id=b["id"], name=b["name"], is_error=True, seconds=0.0,
                              output="interrupted: the campaign stopped (crashed) before this tool call finished; "
                                     "its effects are unknown, check the workspace")
            last = self.events[self._last_assistant()]
            if (not calls and last.get("stop_reason") != "pause_turn"
                    and not any(e.get("type") == "goal_check" for e in self.events[self._last_assistant():])):
                self.check_goal()
        return self.steps()

    def steps(self) -> Outcome:
        retried_long = False
        while True:
            why = Spend.from_events(self.events).exceeded(self.budget)
            if why:
                return self.stop_budget(why)
            if not retried_long:
                self.deliver()
                self.ensure_user_turn()
            kw, nbytes = self.request()
            step = Spend.from_events(self.events).steps + 1
            try:
                reply = self.caller.create(self.with_timeout(kw), step, self.wall_left)
            except PromptTooLong as e:
                if retried_long or not self.compact(f"the API refused the request: {e}", e.tokens, e.limit):
                    raise self.crash(e) from e
                retried_long = True
                continue
            except ApiFailure as e:
                if e.out_of_time or Spend.from_events(self.events).exceeded(self.budget):
                    return self.stop_budget(f"budget: wall time ran out while the API was failing ({e})")
                raise self.crash(e) from e
            retried_long = False
            out = self.handle(reply, nbytes)
            if out is not None:
                return out

    def stop_budget(self, why: str) -> Outcome:
        v = self.tools.verdict()
        self.emit("stop", reason=why, met=False, shortfall=v.shortfall() if v else "no full evaluation")
        self.log(f"stopped: {why}")
        return self.outcome(why, False)

    def crash(self, e: ApiFailure) -> CampaignCrash:
        return CampaignCrash(f"the API call failed ({e}); the trace is intact: "
                             f"`kernelseek campaign resume {self.paths.root}` continues")

    # ---- the request -----------------------------------------------------------------------------
    def base_request(self) -> dict:
        kw = dict(model=self.cfg.model, max_tokens=self.cfg.max_tokens, tools=TOOLS)
        if self.cfg.thinking_budget:
            kw["thinking"] = {"type": "enabled", "budget_tokens": self.cfg.thinking_budget}
        return kw

    def request(self) -> tuple[dict, int]:
        """The next request, compacted first when its measured size passes the trigger."""
        kw, nbytes = self.policy.request(self.base_request(), self.system, self.events)
        est = int(nbytes / bytes_per_token(self.events))
        if self.policy.needs(est) and self.compact(
                f"estimated {est} prompt tokens > {self.policy.trigger:g} x {self.policy.window} (request {nbytes} bytes)"):
            kw, nbytes = self.policy.request(self.base_request(), self.system, self.events)
        return kw, nbytes

    def compact(self, why: str, tokens: int | None = None, limit: int | None = None) -> bool:
        if limit and limit < self.policy.window:      # the API's window is smaller than configured: use it
            self.policy.window = limit
        f = self.policy.compact(self.base_request(), self.system, self.events, why, tokens, limit)
        if f is None:
            return False
        self.emit("context", window=self.policy.window, **f)
        self.log(f"context: {f['action']} up to event {f['upto_seq']}: ~{f['tokens_before']} -> ~{f['tokens_after']} tokens")
        return True

    def with_timeout(self, kw: dict) -> dict:
        left = self.wall_left()
        return kw if left is None else dict(kw, timeout=max(5.0, min(900.0, left)))

    def wall_left(self) -> float | None:
        if self.budget.wall_s is None:
            return None
        last = self.events[-1].get("t") if self.events else None
        running = time.time() - last if isinstance(last, (int, float)) else 0.0
        return self.budget.wall_s - session_seconds(self.events) - max(0.0, running)

    def deliver(self) -> None:
        for inj in self.arm.observe(self) + self.arm.inbox_injections(self):
            self.emit("message", role="user", author=inj.author, content=_text(inj.text), **inj.meta)
            if "inbox_line" in inj.meta:
                self.emit("inbox_consumed", line=inj.meta["inbox_line"])

    def ensure_user_turn(self) -> None:
        """A recorded user message when there is nothing to send (a paused turn is sent as it is)."""
        messages, pending, _ = rebuild(self.events)
        if pending or not messages:
            return
        if self.events[self._last_assistant()].get("stop_reason") != "pause_turn":
            self.emit("message", role="user", author="harness", content=_text(go_on_message()))

    # ---- the reply -------------------------------------------------------------------------------
    def handle(self, reply, nbytes: int) -> Outcome | None:
        messages, pending, _ = rebuild(self.events)
        continues = not pending and bool(messages) and messages[-1]["role"] == "assistant"
        spent = Spend.from_events(self.events)
        model = reply.model or self.cfg.model
        cost = self.prices.cost(self.cfg.model, reply.usage)
        self.emit("usage", step=spent.steps + 1, model=model, cost_usd=cost, total_cost_usd=spent.dollars + cost,
                  stop_reason=reply.stop_reason, request_bytes=nbytes, retries=len(reply.retries), **reply.usage)
        kept = outgoing(reply.content)
        calls = [b for b in kept if b["type"] == "tool_use"]
        stop = reply.stop_reason
        dropped = "refusal" if stop == "refusal" else (
            "empty" if not calls and not traces.text_of(kept).strip() else None)
        fields = dict(role="assistant", author="agent", content=reply.content, stop_reason=stop)
        fields.update({"dropped": dropped} if dropped else {}, **({"continues": True} if continues else {}))
        self.emit("message", **fields)
        text = traces.text_of(kept).strip()
        if text:
            self.log(f"[step {spent.steps + 1}] {text[:300]}")
        if dropped:
            return self.after_drop(dropped)
        if calls:
            cut = calls[-1] if stop == "max_tokens" else None
            for b in calls:
                if b is cut:
                    self.emit("tool_result", tool_use_id=b["id"], name=b["name"], is_error=True, seconds=0.0,
                              output=truncated_call_message(self.cfg.max_tokens))
                else:
                    self.run_tool(b)
            return None
        if stop == "pause_turn":
            return None                   # the next request sends this turn back to be continued
        if stop in ("max_tokens", "model_context_window_exceeded"):
            self.emit("message", role="user", author="harness", content=_text(continue_message()))
            return None
        return self.outcome("goal met", True) if self.check_goal() else None

    def after_drop(self, kind: str) -> Outcome | None:
        n = trailing_drops(self.events, kind)
        if n >= MAX_DROPS[kind]:
            why = (f"the model returned {n} empty replies in a row" if kind == "empty"
                   else f"the model refused {n} times in a row (stop_reason refusal)")
            self.emit("stop", reason=why, met=False)
            self.log(f"stopped: {why}")
            return self.outcome(why, False)
        msg = empty_reply_message() if kind == "empty" else refusal_message()
        self.emit("message", role="user", author="harness", content=_text(msg))
        return None

    def run_tool(self, b: dict) -> None:
        t0 = time.monotonic()
        before = self.tools.last_eval
        self.log(f"  tool {b['name']}: {json.dumps(b.get('input'))[:160]}")
        left = self.wall_left()
        full = None
        if left is not None and left <= 0:
            out, err = "not run: the campaign's wall-time budget is spent", True
        else:
            with Scope(self.paths.workspace) as scope:
                try:
                    with deadline(None if left is None else left + DEADLINE_GRACE_S, scope.kill):
                        out, err, full = self.tools.call(b["name"], b.get("input"), b["id"], left)
                except ToolDeadline:
                    out, err = (f"stopped: the campaign's wall-time budget ran out during this {b['name']} call "
                                f"(after {time.monotonic() - t0:.1f} s); its processes were killed"), True
        rec = self.tools.last_eval
        if rec is not None and rec is not before:
            self.emit("evaluation", **rec.event(self.paths.root))
        extra = {}
        if full:
            extra = dict(full_output=full, chars=(self.paths.workspace / full).stat().st_size)
        self.emit("tool_result", tool_use_id=b["id"], name=b["name"], output=out, is_error=err,
                  seconds=round(time.monotonic() - t0, 3), **extra)

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
        self.emit("message", role="user", author="harness", content=_text(msg))
        self.log(f"goal not met: {msg[:200]}")
        return False

    def _last_assistant(self) -> int:
        for i in range(len(self.events) - 1, -1, -1):
            if self.events[i].get("type") == "message" and self.events[i].get("role") == "assistant":
                return i
        return 0

    def outcome(self, reason: str, met: bool) -> Outcome:
        evs = [e for e in self.events if e.get("type") == "evaluation"]
        gms = [e["geomean"] for e in evs if traces.passed_full(e)]
        return Outcome(self.paths.root, reason, met, Spend.from_events(self.events), len(evs),
                       max(gms) if gms else None)


def run_campaign(root, **kw) -> Outcome:
    """Start or continue the campaign in `root` (see Loop). What it prints and any error it raises
    leave with secrets redacted (an API error may echo the key; a notebook records both)."""
    from ..redact import redacting, redacting_errors
    if "log" in kw:
        kw["log"] = redacting(kw["log"])
    with redacting_errors():
        return Loop(root, **kw).run()


__all__ = ["Loop", "Outcome", "MissingKey", "CampaignCrash", "make_client", "run_campaign", "rebuild", "Paths",
           "check_config"]
