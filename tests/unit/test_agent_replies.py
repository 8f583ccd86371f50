"""Every reply the Messages API can give, handled and recorded: the real anthropic client against
the scripted server of tests/fixtures/fakeapi, which refuses what the real API refuses (empty
messages, broken alternation, unanswered tool_use ids) with a 400."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, check_conversation, last_user_text, text, tool, turn  # noqa: E402
from harness import KEY, events, make  # noqa: E402

from kernelseek.agent import CampaignCrash, Loop  # noqa: E402
from kernelseek.agent.prompts import empty_reply_message, refusal_message  # noqa: E402


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def quiet(*a, **k):
    pass


def run(tmp_path, script, waits=None, **cfg):
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, **cfg)
        out = Loop(root, log=quiet, sleep=(waits.append if waits is not None else None) or (lambda s: None)).run()
    return api, root, out


def assistant(root):
    return [e for e in events(root, "message") if e["role"] == "assistant"]


def test_the_server_refuses_what_the_real_api_refuses():
    u = {"role": "user", "content": [text("go")]}
    assert "non-empty content" in check_conversation({"messages": [u, {"role": "assistant", "content": []}, u]})
    assert "non-whitespace" in check_conversation({"messages": [u, {"role": "assistant", "content": [text(" ")]}, u]})
    assert check_conversation({"messages": [u, {"role": "assistant", "content": []}]}) is None   # final: allowed
    call = {"role": "assistant", "content": [dict(tool("read", path="x"), id="t1")]}
    assert "without tool_result" in check_conversation({"messages": [u, call, u]})
    res = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": "x"} for t in ("t1", "t2")]}
    assert "unexpected `tool_use_id`" in check_conversation({"messages": [u, call, res]})
    assert "alternate" in check_conversation({"messages": [u, u]})


def test_empty_replies_are_recorded_never_sent_back_and_three_stop_the_run(tmp_path):
    script = [turn(stop="end_turn"),                               # empty, end_turn (2-3 tokens, no content)
              turn(text("  \n"), stop="end_turn"),                 # whitespace only: as empty
              turn(tool("shell", command="echo hi")),
              turn(), turn(), turn()]                              # three empty replies in a row
    api, root, out = run(tmp_path, script, budget={"steps": 10})
    assert out.reason == "the model returned 3 empty replies in a row" and not out.met
    drops = [e.get("dropped") for e in assistant(root)]
    assert drops == ["empty", "empty", None, "empty", "empty", "empty"]
    assert len(api.requests) == 6 and len(events(root, "usage")) == 6     # every reply was paid for, and recorded
    # the empty replies never went back: request 2 re-sends the task with a nudge, no assistant message
    assert [m["role"] for m in api.requests[1]["messages"]] == ["user"]
    assert empty_reply_message() in last_user_text(api.requests[1])
    assert [m["role"] for m in api.requests[3]["messages"]] == ["user", "assistant", "user"]
    assert events(root, "stop")[-1]["reason"] == out.reason


def test_refusal_is_left_out_and_two_in_a_row_stop(tmp_path):
    script = [turn(text("I can't help with"), stop="refusal"), turn(tool("shell", command="echo ok")),
              turn(stop="refusal"), turn(text("partial"), stop="refusal")]
    api, root, out = run(tmp_path, script)
    assert out.reason == "the model refused 2 times in a row (stop_reason refusal)"
    assert [e.get("dropped") for e in assistant(root)] == ["refusal", None, "refusal", "refusal"]
    assert "I can't help with" not in str(api.requests[1]["messages"])
    assert refusal_message() in last_user_text(api.requests[1])


def test_max_tokens_cut_tool_call_is_not_run_and_text_is_continued(tmp_path):
    script = [turn(text("Writing the file"), tool("shell", command="echo first > a.txt"),
                   tool("write", path="b.txt", content="half of a fi"), stop="max_tokens"),
              turn(text("The analysis goes on and on"), stop="max_tokens"),
              turn(text("Done reading."), stop="end_turn")]
    api, root, out = run(tmp_path, script, budget={"steps": 3})
    ws = root / "workspace"
    assert (ws / "a.txt").read_text() == "first\n" and not (ws / "b.txt").exists()
    res = events(root, "tool_result")
    assert [r["name"] for r in res] == ["shell", "write"] and res[1]["is_error"]
    assert "not run: your reply reached the output limit" in res[1]["output"]
    assert "Your reply was cut at the output limit. Continue." in last_user_text(api.requests[2])


def test_pause_turn_is_sent_back_and_continued(tmp_path):
    script = [turn(text("Let me look at the kernel first."), stop="pause_turn"),
              turn(tool("read", path="kernel.cu")),
              turn(text("ok"), stop="end_turn")]
    api, root, out = run(tmp_path, script, budget={"steps": 3})
    second = api.requests[1]["messages"]
    assert second[-1]["role"] == "assistant"                     # the paused turn, sent back as the last message
    assert second[-1]["content"][0]["text"] == "Let me look at the kernel first."
    third = api.requests[2]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user"]     # one assistant turn, continued
    assert [b["type"] for b in third[1]["content"]] == ["text", "tool_use"]
    assert assistant(root)[1]["continues"] is True
    assert events(root, "tool_result")[0]["is_error"] is False


def test_malformed_200s_and_retries_are_recorded(tmp_path):
    script = [{"raw": "this is not JSON {"},
              {"json": {"type": "message", "role": "assistant", "content": [], "model": None}},   # no usage
              {"json": {"hello": "world"}},
              {"status": 429, "retry_after": 2, "error": "Number of request tokens has exceeded your rate limit"},
              {"status": 529, "retry_after_ms": 300, "error": "Overloaded"},
              {"status": 500, "error": "Internal server error"},
              turn(text("fine"), stop="end_turn")]
    waits = []
    api, root, out = run(tmp_path, script, waits, budget={"steps": 1}, api_max_retries=6)
    assert len(api.requests) == 7                            # the client itself never retried (max_retries=0)
    errs = [e for e in events(root, "error") if e["kind"] == "malformed_reply"]
    assert len(errs) == 3 and "not JSON" in errs[0]["message"] and "no integer usage" in errs[1]["message"]
    assert "not a message" in errs[2]["message"] and errs[2]["body_head"] == '{"hello": "world"}'
    retries = events(root, "retry")
    assert [r["status"] for r in retries] == [200, 200, 200, 429, 529, 500]
    assert [r["attempt"] for r in retries] == [1, 2, 3, 4, 5, 6]
    assert "rate_limit_error" in retries[3]["reason"] and "overloaded_error" in retries[4]["reason"]
    assert waits[3] == 2.0 and waits[4] == pytest.approx(0.3)     # the server's retry-after, then retry-after-ms
    assert 0.5 <= waits[5] <= 60                                 # no header: exponential backoff with jitter
    usage = events(root, "usage")
    assert len(usage) == 1 and usage[0]["retries"] == 6 and usage[0]["model"] == "fake-model"
    assert out.spend.steps == 1


def test_retries_exhausted_and_request_errors_crash_cleanly(tmp_path):
    script = [{"status": 529}, {"status": 529}]
    with FakeAPI(script, key=KEY) as api:
        root = make(tmp_path, api.base_url, api_max_retries=1)
        with pytest.raises(CampaignCrash, match="resume"):
            Loop(root, log=quiet, sleep=lambda s: None).run()
    assert [e["kind"] for e in events(root, "error")] == ["retries_exhausted"] and not events(root, "usage")
    with FakeAPI([{"status": 400, "error": "max_tokens: too large"}], key=KEY) as api:
        root = make(tmp_path, api.base_url, name="c2", api_max_retries=3)
        with pytest.raises(CampaignCrash):
            Loop(root, log=quiet, sleep=lambda s: None).run()
    assert len(api.requests) == 1 and events(root, "error")[0]["kind"] == "request_error"


def test_bad_tool_arguments_come_back_as_error_results(tmp_path):
    script = [turn(tool("read", path="kernel.cu", offset="abc"), tool("read", path="kernel.cu", offset="2", limit=1),
                   tool("read", path="kernel.cu", offset=1.5), tool("shell"), tool("edit", path="k", old="a", new="b", x=1),
                   tool("shell", command=["ls"]), tool("evaluate", check_only="yes"), tool("nope")),
              turn(text("ok"), stop="end_turn")]
    api, root, out = run(tmp_path, script, budget={"steps": 2})
    res = events(root, "tool_result")
    assert [r["is_error"] for r in res] == [True, False, True, True, True, True, True, True]
    assert res[0]["output"] == "bad arguments for read: field 'offset' must be an integer, got 'abc'"
    assert res[1]["output"].startswith("     2\t")                        # "2" taken as the number 2
    assert "missing required field(s) command" in res[3]["output"]
    assert "unknown field(s) x" in res[4]["output"] and "must be a string" in res[5]["output"]
    assert "must be true or false" in res[6]["output"] and "unknown tool 'nope'" in res[7]["output"]
    assert out.spend.steps == 2                                  # the loop went on
