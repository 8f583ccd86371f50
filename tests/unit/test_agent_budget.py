"""Budgets and prices: dollars from usage and the price table; spend rebuilt from a trace."""
import pytest

from kernelseek.agent.budget import Budget, BudgetError, Prices, Spend, session_seconds


def test_prices_longest_prefix_and_cost():
    p = Prices.load()                                  # data/prices.yaml
    assert p.for_model("claude-opus-4-1-20250805")["input"] == 15.0
    assert p.for_model("claude-opus-4-5-20251101")["input"] == 5.0     # longer key wins over claude-opus-4
    assert p.for_model("gpt-whatever") is None
    u = {"input_tokens": 1_000_000, "output_tokens": 100_000, "cache_creation_input_tokens": 200_000,
         "cache_read_input_tokens": 1_000_000}
    assert p.cost("claude-sonnet-4-5", u) == pytest.approx(3.0 + 1.5 + 0.75 + 0.30)
    with pytest.raises(BudgetError, match="needs input and output"):
        Prices({"m": {"input": 1.0}}, "table.yaml")


def test_budget_validation_and_exceeded():
    with pytest.raises(BudgetError, match="unknown field"):
        Budget.from_dict({"step": 3})
    with pytest.raises(BudgetError, match="'dollars' must be a number"):
        Budget.from_dict({"dollars": "ten"})
    b = Budget(steps=10, tokens=None, dollars=1.0, wall_s=None)
    assert Spend(steps=3, dollars=0.5).exceeded(b) is None
    assert Spend(steps=10).exceeded(b) == "budget: 10 steps of 10"
    assert Spend(dollars=1.25).exceeded(b) == "budget: $1.25 of $1.00"
    assert Spend(wall_s=61).exceeded(Budget(steps=None, dollars=None, wall_s=60)).startswith("budget: 61 s")


def test_spend_from_events_counts_sessions_not_downtime():
    evs = [{"type": "start", "t": 0}, {"type": "usage", "t": 10, "input_tokens": 100, "output_tokens": 5,
                                      "cost_usd": 0.25},
           {"type": "message", "t": 20},
           {"type": "resume", "t": 1000}, {"type": "usage", "t": 1030, "input_tokens": 10, "output_tokens": 1,
                                           "cache_read_input_tokens": 4, "cost_usd": 0.5}]
    s = Spend.from_events(evs)
    assert (s.steps, s.tokens, s.dollars) == (2, 120, 0.75)
    assert session_seconds(evs) == 50 and s.wall_s == 50
