"""A campaign's budget: model calls (steps), tokens, dollars and wall time, and what has been spent.

Dollars come from the API's reported usage times a price table (data/prices.yaml, US dollars per
million tokens; a model id matches the longest key it starts with):
    cost = (input * p.input + output * p.output + cache_creation * p.cache_write
            + cache_read * p.cache_read) / 1e6
Tokens count input, output and both cache kinds. Wall time is the time the loop was running, summed
over sessions (a crash's downtime is not spent). Everything spent is rebuilt from the trace on resume.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from ..paths import PRICES

PRICES_FILE = PRICES
PRICE_KEYS = ("input", "output", "cache_write", "cache_read")
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class BudgetError(ValueError):
    """A budget or price table that cannot be used."""


@dataclass
class Budget:
    steps: int | None = 200          # model calls
    tokens: int | None = None        # all tokens, summed over calls
    dollars: float | None = 50.0     # from usage and the price table
    wall_s: float | None = None      # seconds the loop ran

    @classmethod
    def from_dict(cls, d: dict | None) -> "Budget":
        d = dict(d or {})
        unknown = set(d) - {"steps", "tokens", "dollars", "wall_s"}
        if unknown:
            raise BudgetError(f"budget: unknown field(s) {', '.join(sorted(unknown))} "
                              "(known: steps, tokens, dollars, wall_s)")
        for k, v in d.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
                raise BudgetError(f"budget: field '{k}' must be a number >= 0 or null, got {v!r}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Spend:
    steps: int = 0
    tokens: int = 0
    dollars: float = 0.0
    wall_s: float = 0.0

    def exceeded(self, b: Budget) -> str | None:
        """Why the budget is spent, or None."""
        if b.steps is not None and self.steps >= b.steps:
            return f"budget: {self.steps} steps of {b.steps}"
        if b.tokens is not None and self.tokens >= b.tokens:
            return f"budget: {self.tokens} tokens of {b.tokens}"
        if b.dollars is not None and self.dollars >= b.dollars:
            return f"budget: ${self.dollars:.2f} of ${b.dollars:.2f}"
        if b.wall_s is not None and self.wall_s >= b.wall_s:
            return f"budget: {self.wall_s:.0f} s of wall time of {b.wall_s:.0f} s"
        return None

    def line(self, b: Budget) -> str:
        def of(x, lim, fmt):
            return format(x, fmt) + (f"/{format(lim, fmt)}" if lim is not None else "")
        return (f"steps {of(self.steps, b.steps, 'd')}  tokens {of(self.tokens, b.tokens, 'd')}  "
                f"${of(self.dollars, b.dollars, '.2f')}  wall {of(self.wall_s, b.wall_s, '.0f')} s")

    @classmethod
    def from_events(cls, events: list[dict]) -> "Spend":
        """What a trace says was spent: usage events, and the span of each session."""
        s = cls()
        for ev in events:
            if ev.get("type") == "usage":
                s.steps += 1
                s.tokens += sum(int(ev.get(k) or 0) for k in USAGE_KEYS)
                s.dollars += float(ev.get("cost_usd") or 0.0)
        s.wall_s = session_seconds(events)
        return s


def session_seconds(events: list[dict]) -> float:
    """Seconds from each start/resume event to the last event of that session, summed."""
    total, begin, last = 0.0, None, None
    for ev in events:
        t = ev.get("t")
        if not isinstance(t, (int, float)):
            continue
        if ev.get("type") in ("start", "resume"):
            if begin is not None and last is not None:
                total += last - begin
            begin = t
        last = t
    if begin is not None and last is not None:
        total += last - begin
    return total


class Prices:
    """A price table: model id prefix -> dollars per million tokens of each kind."""

    def __init__(self, table: dict, source: str = ""):
        self.source = source
        self.table = {}
        for model, p in (table or {}).items():
            if not isinstance(p, dict) or set(p) - set(PRICE_KEYS) or "input" not in p or "output" not in p:
                raise BudgetError(f"{source}: entry '{model}' needs input and output (and optionally "
                                  f"cache_write, cache_read) in dollars per million tokens")
            self.table[str(model)] = {k: float(p.get(k, 0.0)) for k in PRICE_KEYS}

    @classmethod
    def load(cls, path=None) -> "Prices":
        p = Path(path) if path else PRICES_FILE
        try:
            return cls(yaml.safe_load(p.read_text()) or {}, str(p))
        except OSError as e:
            raise BudgetError(f"{p}: cannot read the price table ({e.strerror})") from None
        except yaml.YAMLError as e:
            raise BudgetError(f"{p}: not valid YAML ({e})") from None

    def for_model(self, model: str) -> dict | None:
        keys = [k for k in self.table if model.startswith(k)]
        return self.table[max(keys, key=len)] if keys else None

    def cost(self, model: str, usage: dict) -> float:
        p = self.for_model(model)
        if p is None:
            return 0.0
        u = {k: float(usage.get(k) or 0) for k in USAGE_KEYS}
        return (u["input_tokens"] * p["input"] + u["output_tokens"] * p["output"]
                + u["cache_creation_input_tokens"] * p["cache_write"]
                + u["cache_read_input_tokens"] * p["cache_read"]) / 1e6
