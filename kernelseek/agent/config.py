"""A campaign's configuration and the layout of its directory (the layout: kernelseek.store).

    campaigns/<id>/
      config.json      this Config
      goal.yaml        the goal (a copy; the Stop hook reads it too)
      trace.jsonl      events, append-only (kernelseek.traces)
      inbox.jsonl      questions waiting (kernelseek.inbox)
      workspace/       the agent's files: the kernel (a file with the local headers it includes, or a
                       kernel folder), kseek.h; all the shell sees besides the toolchain;
                       .kseek/outputs/ holds the full text of tool outputs cut for the model
      versions/<sha256>.cu   every kernel version evaluated (versions/<sha256>/ when it has local headers)
      evals/<n>/       run directories of its evaluations, in order
      notebooks/       executed notebooks
      lock             who runs the campaign now (agent/lock.py); empty when no loop runs
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import KSEEK_H
from ..store import Campaign
from .budget import Budget, BudgetError, Prices

ARMS = ("bare", "bank", "human", "equipped")
DEFAULT_MODEL = "claude-opus-4-5"


@dataclass
class Config:
    kernel: str                          # the starting kernel (.cu file or kernel folder), copied into the workspace
    grid: str = "bench26"
    baseline: str = "best"
    arm: str = "bare"                    # bare | bank | human | equipped
    model: str = DEFAULT_MODEL
    max_tokens: int = 16000              # per model call
    thinking_budget: int = 0             # extended thinking tokens per call (0: off)
    budget: dict = field(default_factory=lambda: Budget().to_dict())
    replicate: int = 0                   # repeated campaigns with the same configuration
    seed: int = 0
    scenarios: str | None = None         # grid filter for every evaluation the goal is judged on
    goal: str | None = None              # goal YAML (None: goals/default.yaml)
    evaluator: str = "harness"           # harness | replay:DIR[,DIR...] (a stand-in, for tests)
    eval_timeout_s: float = 300.0
    eval_budget_s: float = 0.4
    shell_timeout_s: float = 600.0
    output_cap: int = 8000               # characters of one tool result the model sees (the full
    #                                      text is saved in the workspace: agent/context.py)
    context_tokens: int = 200_000        # the model's context window (tokens)
    context_trigger: float = 0.70        # compact the conversation above this share of the window
    context_target: float = 0.40         # ... down to this share
    keep_turns: int = 8                  # assistant turns always kept verbatim
    sandbox: str = "bwrap"               # bwrap (required) | none: unconfined, only by an explicit --unconfined
    base_url: str | None = None          # the Messages API (None: the anthropic client's default)
    prices: str | None = None            # price table (None: data/prices.yaml)
    api_max_retries: int = 4             # retries of one API call, each recorded (agent/api.py)
    plateau_evals: int = 5               # bank arm: evaluations without a gain before `plateau`
    plateau_minutes: float | None = None
    note: str | None = None              # a line the trace records as a `note` at the start (e.g. "the
    #                                      model is a script": tools/scripted_model.py)
    docs: str | None = None              # equipped arm: documentation folder for BM25 retrieval
    notes: str | None = None             # equipped arm: seeded notes (default: the shipped notes)
    profile_csv: str | None = None       # equipped arm: replay this ncu raw CSV instead of profiling
    sass: list = field(default_factory=list)  # equipped arm: SASS dumps to replay, in order

    def __post_init__(self):
        if self.arm not in ARMS:
            raise ValueError(f"arm {self.arm!r}: one of {', '.join(ARMS)}")
        if self.sandbox not in ("bwrap", "none", "auto"):        # auto: older configs, now means bwrap
            raise ValueError(f"sandbox {self.sandbox!r}: bwrap (the default) or none (unconfined, explicit)")
        Budget.from_dict(self.budget)

    @property
    def budget_obj(self) -> Budget:
        return Budget.from_dict(self.budget)

    @property
    def kernel_name(self) -> str:
        return Path(self.kernel).name

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def absolute(self, base=None) -> "Config":
        """A copy with every file path made absolute (relative to `base`, default the cwd)."""
        b = Path(base or Path.cwd())

        def ab(x):
            return str((b / x).resolve()) if x else x
        ev = self.evaluator
        if ev.startswith("replay:"):
            ev = "replay:" + ",".join(ab(s) for s in ev[len("replay:"):].split(",") if s)
        grid = ab(self.grid) if (b / self.grid).is_file() else self.grid
        return dataclasses.replace(self, kernel=ab(self.kernel), goal=ab(self.goal), evaluator=ev, grid=grid,
                                   prices=ab(self.prices), docs=ab(self.docs), notes=ab(self.notes),
                                   profile_csv=ab(self.profile_csv), sass=[ab(s) for s in self.sass])

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"config: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(**d)


@dataclass
class Paths(Campaign):
    """The campaign folder (kernelseek.store.Campaign) with its root made absolute for the loop."""

    def __post_init__(self):
        self.root = Path(self.root).resolve()


def check_config(cfg: Config) -> Prices:
    """What the loop refuses before anything is written: a dollar budget without a price, a
    thinking budget at or above max_tokens, a context policy that cannot work."""
    prices = Prices.load(cfg.prices)
    if cfg.budget_obj.dollars is not None and prices.for_model(cfg.model) is None:
        raise BudgetError(f"model {cfg.model!r} has no entry in the price table {prices.source}, "
                          "so a dollar budget cannot be kept; add it there or set the dollar budget to null")
    if cfg.thinking_budget and cfg.thinking_budget >= cfg.max_tokens:
        raise BudgetError(f"thinking_budget {cfg.thinking_budget} must be below max_tokens {cfg.max_tokens}")
    if not 0 < cfg.context_target < cfg.context_trigger < 1 or cfg.keep_turns < 1 or cfg.output_cap < 200:
        raise BudgetError("config: need 0 < context_target < context_trigger < 1, keep_turns >= 1 and "
                          f"output_cap >= 200 (got {cfg.context_target}, {cfg.context_trigger}, "
                          f"{cfg.keep_turns}, {cfg.output_cap})")
    return prices


def new_campaign_id(cfg: Config) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{cfg.arm}-r{cfg.replicate}"


def create(cfg: Config, root) -> Paths:
    """Lay out a new campaign directory: config.json, goal.yaml, the workspace with the kernel (a
    file with its local include closure, or a kernel folder as a folder)."""
    from ..kernel_source import copy_kernel, kernel_files
    p = Paths(root)
    if p.config.exists():
        raise FileExistsError(f"{p.root}: a campaign already lives here; resume it instead")
    src = Path(cfg.kernel)
    kernel_files(src)          # a missing kernel, a folder without its entry file, headers outside it
    for d in (p.workspace, p.versions, p.evals, p.notebooks):
        d.mkdir(parents=True, exist_ok=True)
    copy_kernel(src, p.workspace, whole_folder=True)
    if KSEEK_H.is_file() and not (p.workspace / KSEEK_H.name).exists():
        shutil.copyfile(KSEEK_H, p.workspace / KSEEK_H.name)
    from ..goal import DEFAULT_GOAL_FILE, load_goal
    goal_src = Path(cfg.goal) if cfg.goal else DEFAULT_GOAL_FILE
    load_goal(goal_src if goal_src.is_file() else None)        # refuse a broken goal up front
    if goal_src.is_file():
        shutil.copyfile(goal_src, p.goal)
    p.config.write_text(json.dumps(cfg.to_dict(), indent=1))
    return p


def load(root) -> tuple[Config, Paths]:
    p = Paths(root)
    return Config.from_dict(p.read_config()), p
