"""Long campaigns fit: bounded tool output, prompt caching on a byte-identical prefix, the context
policy (agent/context.py), and a 200-step scripted campaign that finishes. The scripted server
counts tokens from the request's bytes and reports cached tokens only for byte-identical prefixes
up to a cache_control breakpoint (tests/fixtures/fakeapi/fakeapi.py)."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, last_user_text, prefix_units, text, tool, turn  # noqa: E402
from harness import KEY, events, make  # noqa: E402
from long_campaign import steps as long_steps  # noqa: E402

from kernelseek.agent import Loop  # noqa: E402
from kernelseek.agent.context import bound_output  # noqa: E402

NO_LIMITS = {"steps": 400, "dollars": None, "wall_s": None}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def quiet(*a, **k):
    pass


def test_tool_output_is_bounded_and_the_full_text_kept_for_the_agent(tmp_path):
    script = [turn(tool("shell", command="seq 1 20000")),
              turn(tool("read", path=".kseek/outputs/shell-toolu_fake_1_0.txt", offset=10001, limit=2)),
              turn(text("ok"), stop="end_turn")]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, budget={"steps": 3})
        Loop(root, log=quiet).run()
    res = events(root, "tool_result")
    shown, full = res[0]["output"], res[0]["full_output"]
    assert full == ".kseek/outputs/shell-toolu_fake_1_0.txt" and res[0]["chars"] > 100_000
    assert len(shown) < 8400 and "characters not shown" in shown and full in shown
    whole = (root / "workspace" / full).read_text()
    assert whole.splitlines()[1:] == [str(i) for i in range(1, 20001)]       # every line, after the header
    assert shown.startswith(whole[:3000]) and shown.endswith(whole[-4000:])  # head and tail, verbatim
    assert "\t10000" in res[1]["output"] and "\t10001" in res[1]["output"]
    assert full in last_user_text(api.requests[1])


def test_bound_output_of_a_read_points_at_lines_not_a_copy(tmp_path):
    shown, full = bound_output("x" * 50_000, 8000, tmp_path, "read-1", source="big.txt")
    assert full is None and "read big.txt with offset and limit" in shown and len(shown) < 8200
    assert not (tmp_path / ".kseek").exists()


def test_prompt_caching_reads_the_byte_identical_prefix(tmp_path):
    script = [turn(text(f"step {i}"), tool("shell", command=f"seq 1 {1500 + i}")) for i in range(6)]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, budget={"steps": 6})
        Loop(root, log=quiet).run()
    reqs, stats = api.requests, api.stats
    # breakpoints: system (tools + system), the task, the previous last user message, the new last one
    assert reqs[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
    for k in range(1, 6):
        marks = [i for i, (_, cc) in enumerate(prefix_units(reqs[k])) if cc]
        assert 3 <= len(marks) <= 4
        prev = [u for u, _ in prefix_units(reqs[k - 1])]
        cur = [u for u, _ in prefix_units(reqs[k])]
        assert cur[:len(prev)] == prev                       # the previous request is a byte-identical prefix
        if stats[k - 1]["total"] < 1024:                    # below the minimum cacheable prefix: no entry
            assert stats[k]["cache_read_input_tokens"] == 0
            continue
        assert stats[k]["cache_read_input_tokens"] >= 0.9 * stats[k - 1]["total"]
        assert stats[k]["cache_creation_input_tokens"] > 0 and stats[k]["input_tokens"] < 200
    assert sum(s["cache_read_input_tokens"] > 0 for s in stats) == 4
    usage = events(root, "usage")
    assert [u["cache_read_input_tokens"] for u in usage] == [s["cache_read_input_tokens"] for s in stats]
    assert all(u["request_bytes"] > 0 for u in usage)


def test_context_policy_elides_then_summarises_within_a_small_window(tmp_path):
    script = [turn(text(f"step {i}"), tool("shell", command=f"seq 1 {1000 + i}")) for i in range(60)]
    script.append(turn(text("done"), stop="end_turn"))
    with FakeAPI(script, key=KEY, context_tokens=12_000) as api:
        root = make(tmp_path, api.base_url, budget=dict(NO_LIMITS, steps=61), context_tokens=12_000, keep_turns=2)
        out = Loop(root, log=quiet).run()
    assert out.spend.steps == 61 and not events(root, "error")        # never refused by the server
    assert max(s["total"] for s in api.stats) <= 0.75 * 12_000
    ctx = events(root, "context")
    actions = [c["action"] for c in ctx]
    assert "elide" in actions and "summarize" in actions
    assert all(c["tokens_before"] > 0.7 * 12_000 and c["tokens_after"] <= 0.4 * 12_000 for c in ctx)
    first_elide = next(i for i, r in enumerate(api.requests) if "elided by the context policy" in json.dumps(r))
    first_summary = next(i for i, r in enumerate(api.requests) if "Summary of the first" in json.dumps(r))
    assert first_elide < first_summary
    last = api.requests[-1]["messages"]
    assert "Summary of the first" in last[0]["content"][-1]["text"] and "Make kernel.cu faster" in last[0]["content"][0]["text"]
    # the kept turns are verbatim: the last tool result the model saw is the whole output
    assert last[-1]["content"][0]["type"] == "tool_result" and "\n1059" in last[-1]["content"][0]["content"]


def test_prompt_too_long_from_the_api_compacts_and_goes_on(tmp_path):
    script = [turn(text(f"step {i}"), tool("shell", command=f"seq 1 {1500 + i}")) for i in range(12)]
    with FakeAPI(script, key=KEY, context_tokens=8_000) as api:
        # the loop believes the window is 200k: only the API's refusal tells it otherwise
        root = make(tmp_path, api.base_url, budget={"steps": 12})
        out = Loop(root, log=quiet).run()
    errs = events(root, "error")
    assert out.spend.steps == 12 and errs and all(e["kind"] == "prompt_too_long" for e in errs)
    assert "prompt is too long" in errs[0]["message"] and "> 8000 maximum" in errs[0]["message"]
    ctx = events(root, "context")
    assert ctx[0]["reason"].startswith("the API refused the request") and ctx[0]["window"] == 8000
    assert len(errs) == 1                 # after that the loop keeps to the API's window by itself


def test_200_step_campaign_finishes_with_caching_and_compaction(tmp_path):
    script = long_steps(200)
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, budget=dict(NO_LIMITS, steps=120), api_max_retries=4)
        first = Loop(root, log=quiet, sleep=lambda s: None).run()
        assert first.reason == "budget: 120 steps of 120"
        n = len(api.stats)
        out = Loop(root, budget=dict(NO_LIMITS, steps=250), log=quiet, sleep=lambda s: None).run()   # resume
    assert out.met and out.reason == "goal met" and out.spend.steps == 200
    stats = api.stats
    assert len(stats) == 200 and not [e for e in events(root, "error") if e["kind"] != "malformed_reply"]
    assert max(s["total"] for s in stats) < 0.75 * 200_000              # never near the window
    assert events(root, "context") and events(root, "context")[0]["action"] == "elide"
    assert [r["status"] for r in events(root, "retry")] == [429]
    assert [e.get("dropped") for e in events(root, "message") if e.get("dropped")] == ["empty"]
    total = sum(s["total"] for s in stats)
    cached = sum(s["cache_read_input_tokens"] for s in stats)
    assert cached / total > 0.85                                        # the prefix is stable between compactions
    assert stats[n]["cache_read_input_tokens"] > 0.9 * stats[n - 1]["total"]   # resume rebuilt the same bytes
    usage = events(root, "usage")
    assert len(usage) == 200 and sum(u["cost_usd"] for u in usage) == pytest.approx(usage[-1]["total_cost_usd"])
    outputs = [e for e in events(root, "tool_result") if e.get("full_output")]
    assert outputs and all((root / "workspace" / e["full_output"]).is_file() for e in outputs)
