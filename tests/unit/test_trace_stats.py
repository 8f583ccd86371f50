"""The statistics the paper reports that analytics.py did not compute before: prompt size and its
pre-fetched share, idle time, branches and rollbacks, mentions of attention concepts, the start and
end of a campaign, what followed a question. Each on a trace built here whose answer is known by
construction (the comments give the arithmetic)."""
import json

import pytest

from kernelseek import analytics as A
from kernelseek import trace_stats, traces

H = 3600.0


class Trace:
    """Events in the KernelSeek schema, seq and t assigned in order (t in hours from 0)."""

    def __init__(self, arm="human", model="claude-test"):
        self.ev = []
        self.add("start", 0, arm=arm, model=model, config={"kernel": "kernels/attn.cu"})

    def add(self, type_, t_h, **f):
        self.ev.append({"id": f"ev-{len(self.ev)}", "seq": len(self.ev), "type": type_, "t": t_h * H, **f})
        return self.ev[-1]

    def say(self, t, text, author="human", **f):
        return self.add("message", t, role="user", author=author, content=[{"type": "text", "text": text}], **f)

    def step(self, t, text="", tool=None, output="", cost=0.0):
        self.add("usage", t, input_tokens=100, output_tokens=10, cost_usd=cost)
        blocks = ([{"type": "text", "text": text}] if text else []) + (
            [{"type": "tool_use", "id": f"c{len(self.ev)}", "name": tool[0], "input": tool[1]}] if tool else [])
        m = self.add("message", t, role="assistant", author="agent", content=blocks)
        return m["content"][-1]["id"] if tool else None

    def result(self, t, tid, output):
        self.add("tool_result", t, tool_use_id=tid, name="shell", output=output, is_error=False)

    def evaluation(self, t, n, gm, worst=0.5, parity=3, failed=0):
        self.add("evaluation", t, n=n, geomean=gm, filtered=False, check_only=False, kernel_sha256=f"{n:064x}",
                 summary={"scenarios": 26, "passed": 26 - failed, "failed": failed, "all_correct": failed == 0,
                          "worst": {"scenario": "s", "speedup": worst}, "at_parity": parity})


def test_prompt_size_and_prefetched_share():
    t = Trace(arm="equipped")
    t.say(0.0, "T" * 100)                                   # the task: 100 characters, not pre-fetched
    t.say(0.0, "B" * 300, author="equipped")                # a briefing: 300 pushed characters
    tid = t.step(0.1, "x" * 50, ("shell", {"command": "ls"}))   # step 1 sees 400 (300 pushed)
    t.result(0.2, tid, "r" * 33)
    t.step(0.3, "y" * 10)                                   # step 2: 400 + 50 + len('{"command": "ls"}')=17 + 33
    t.say(0.4, "Q" * 40, author="human", prefetched_chars=15)   # a message saying 15 of its 40 were pushed
    t.add("context", 0.5, action="summarize", upto_seq=t.ev[-1]["seq"], summary="S" * 20)
    t.step(0.6)                                             # step 3: the task and the digest: 120, none pushed
    df = A.prompt_sizes(t.ev)
    assert df["prompt_chars"].tolist() == [400, 500, 120]
    assert df["prefetched_chars"].tolist() == [300, 300, 0]
    s = A.prompt_summary(t.ev)
    assert s["median_prompt_chars"] == 400 and s["prefetched_share"] == pytest.approx(600 / 1020)
    assert s["median_prefetched_share"] == pytest.approx(0.6)   # median of 0.75, 0.6, 0


def test_elided_results_count_as_their_stub():
    t = Trace()
    t.say(0, "T" * 10)
    tid = t.step(0.1, "", ("shell", {"command": "ls"}))
    t.result(0.2, tid, "r" * 5000)
    t.add("context", 0.3, action="elide", upto_seq=t.ev[-1]["seq"])
    t.step(0.4)
    from kernelseek.agent.conversation import stub_output
    stub = len(stub_output(t.ev[4]))
    assert A.prompt_sizes(t.ev)["prompt_chars"].tolist() == [10, 10 + 17 + stub]


def test_span_and_idle_time():
    t = Trace()
    t.say(0, "Make it fast.")
    tid = t.step(0.1, "", ("shell", {"command": "kernelseek eval k.cu"}))
    t.result(3, tid, "done")        # 2.9 h inside a running tool call: busy, not idle
    t.step(3.1, "Done for now.")
    t.say(5.1, "Why is decode slow?")   # 2 h waiting for the person: idle
    t.step(5.2, "Looking.")
    t.add("resume", 6.2)            # 1 h until the next session: idle
    t.step(6.25, "Back.")           # 3 min: below the 30 min threshold
    r = A.span_and_idle(t.ev)
    assert r["span_hours"] == pytest.approx(6.25) and r["idle_hours"] == pytest.approx(3.0)
    assert r["idle_gaps"] == 2 and r["longest_idle_hours"] == pytest.approx(2.0)
    assert A.span_and_idle(t.ev, min_gap_s=2.5 * H)["idle_hours"] == 0


def test_branches_and_rollbacks_are_counted_from_events():
    t = Trace(arm="equipped")
    t.evaluation(0.1, 0, 0.3)
    t.evaluation(0.2, 1, 0.48)      # the best
    t.evaluation(0.3, 2, 0.40)
    for n, action, by, disc in [(1, "fork", "agent", 0), (1, "fork", "agent", 0), (0, "fork", "harness", 0),
                                (1, "rollback", "human", 4), (2, "rollback", "agent", 2)]:
        t.add("branch", 0.4, action=action, from_eval=n, by=by, discarded_steps=disc)
    b = A.branches(t.ev)
    assert (b["forks"], b["forks_from_best"], b["rollbacks"], b["human_rollbacks"], b["steps_discarded"]) == (3, 2, 2, 1, 6)
    assert (b["most_forked_eval"], b["most_forked_count"]) == ("1", 2)


def test_mentions_of_attention_and_cuda_constructs():
    t = Trace()
    t.say(0, "Does the softmax rescale cost much on the decode rows?")   # attention
    t.say(0, "Should we use wgmma for the QK product?")                   # attention and a CUDA construct
    t.say(0, "Why is the build slow?")                                    # neither
    t.say(0, "Use TMA for the tiles.")                                    # not a question: not counted
    t.say(0, "Is this really the limit?", attention_concept=True)         # a label wins over the rules
    t.say(0, "What about the sink rows?", author="agent", sidechain=True)  # a sub-agent, not a person
    assert A.question_mentions(t.ev) == {"interrogative": 4, "attention": 3, "cuda_construct": 1}


def test_start_end_and_question_effects():
    t = Trace()
    t.say(0, "Go.")
    t.step(0.5)
    t.evaluation(1, 0, 0.009)
    t.step(1.5)
    t.evaluation(2, 1, 0.44, failed=1)           # failed a row: never counts
    t.evaluation(2.5, 2, 0.44)
    t.say(3, "What configs are bringing down the geomean?")
    t.step(3.5)
    t.evaluation(5, 3, 0.80)
    t.step(5.5)
    t.evaluation(7, 4, 0.96, worst=0.24, parity=0)
    t.step(7.5)
    t.step(8)
    t.say(9, "Is this ceiling a property of the hardware, or of our design?")
    e = A.start_and_end(t.ev)
    assert (e["start_geomean"], e["best_geomean"], e["best_worst_row"], e["best_rows_at_parity"]) == (0.009, 0.96, 0.24, 0)
    assert (e["steps"], e["steps_after_best"]) == (6, 2)
    tp = A.turning_point(t.ev, "what configs are  bringing down the geomean?")
    assert (tp["geomean_before"], tp["best_after"], tp["hours_to_best_after"]) == (0.44, 0.96, 4.0)
    last = A.turning_point(t.ev, "Is this ceiling")
    assert last["geomean_before"] == 0.96 and last["best_after"] is None
    assert A.turning_point(t.ev, "never asked") is None


def test_dollars_priced_from_tokens_when_the_trace_has_none():
    from kernelseek.agent.budget import Prices
    p = Prices({"claude-test": {"input": 1.0, "output": 10.0}})
    t = Trace()
    t.add("usage", 0, input_tokens=1_000_000, output_tokens=100_000)       # $1 + $1
    t.add("usage", 0, input_tokens=5, output_tokens=5, cost_usd=0.25)      # its own cost
    assert A.dollars(t.ev, p) == {"usd": pytest.approx(2.25), "priced_steps": 1, "unpriced_steps": 0}
    assert A.dollars(t.ev) == {"usd": 0.25, "priced_steps": 0, "unpriced_steps": 1}


def test_every_statistic_by_its_paper_name_for_both_arms():
    q = Trace(arm="human")
    q.say(0, "What configs are bringing down the geomean?")
    tid = q.step(0.5, "", ("Bash", {"command": "ncu --set full ./attn"}))
    q.result(0.6, tid, "p" * 100)
    q.evaluation(1, 0, 1.13)
    e = Trace(arm="equipped")
    e.say(0, "T" * 100)
    e.say(0, "B" * 300, author="equipped")
    e.step(0.1, cost=2.0)
    e.evaluation(0.2, 0, 0.48)
    e.add("branch", 0.3, action="fork", from_eval=0, by="harness")
    e.add("branch", 0.4, action="rollback", from_eval=0, by="human", discarded_steps=1)
    v = trace_stats.quantities([q.ev, e.ev])
    assert v["human_messages"] == 1 and v["category_gap_triage"] == 1 and v["profiler_runs_question_driven"] == 1
    assert v["question_driven_geomean_fa3"] == 1.13 and v["equipped_geomean_fa3"] == 0.48
    assert v["median_prompt_chars_equipped"] == 400 and v["prompt_prefetched_share_equipped"] == pytest.approx(75.0)
    assert (v["equipped_branches"], v["equipped_branches_from_best_step"], v["equipped_human_rollbacks"],
            v["equipped_steps_discarded"]) == (1, 1, 1, 1)
    assert v["equipped_api_cost"] == 2.0 and v["profiler_runs_per_step_question_driven"] == 1.0
    assert v["equipped_human_messages"] == 1                 # the equipped arm's own, by its own name
    assert trace_stats.family_of("equipped_branches") == "timeline"
    assert trace_stats.family_of("median_prompt_chars_equipped") == "reading"
    assert {s.family for s in trace_stats.STATS} == set(trace_stats.FAMILIES)


def test_claude_code_rewind_compact_and_summary(tmp_path):
    """A transcript built here: the person's second prompt is sent again from the first reply (a
    rewind that gives up one reply), then a /compact whose summary is the harness's."""
    def rec(uuid, parent, kind, content, mid=None, **f):
        msg = {"role": kind, "content": content}
        if kind == "assistant":
            msg.update(id=mid, model="claude-sonnet-4-5", usage={"input_tokens": 10, "output_tokens": 1})
        return {"type": kind, "uuid": uuid, "parentUuid": parent, "timestamp": "2025-06-01T12:00:00.000Z",
                "sessionId": "s", "cwd": "/w", "message": msg, **f}
    lines = [rec("u0", None, "user", "Make attn.cu fast."),
             rec("a0", "u0", "assistant", [{"type": "text", "text": "ok"}], "m0"),
             rec("u1", "a0", "user", "Why is decode slow?"),
             rec("a1", "u1", "assistant", [{"type": "text", "text": "because"}], "m1"),
             rec("u2", "a0", "user", "Which rows bring the geomean down?"),     # rewound to after a0
             rec("a2", "u2", "assistant", [{"type": "text", "text": "these"}], "m2"),
             {"type": "system", "subtype": "compact_boundary", "uuid": "c0", "parentUuid": None,
              "timestamp": "2025-06-01T12:00:00.000Z"},
             rec("u3", "c0", "user", "This session is being continued from a previous conversation.",
                 isCompactSummary=True)]
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ev = traces.import_session(p)
    assert A.branches(ev) == {"forks": 0, "rollbacks": 1, "human_rollbacks": 1, "steps_discarded": 1,
                              "forks_from_best": 0, "most_forked_eval": None, "most_forked_count": 0}
    assert [e["action"] for e in ev if e["type"] == "context"] == ["summarize"]
    assert len(A.person_messages(ev)) == 3                   # the compaction summary is not a person's
    assert trace_stats.quantities([ev])["question_driven_api_cost"] == 0  # no prices given
    assert trace_stats.quantities([ev], trace_stats.load_prices())["question_driven_api_cost"] == \
        pytest.approx(3 * (10 * 3.0 + 1 * 15.0) / 1e6)


def test_sessions_of_one_project_are_one_campaign_in_time():
    """Two Claude Code sessions of one working directory, 10 h apart: the gap between them is idle
    time of that campaign; a session of another directory is a campaign of its own."""
    def session(t0, cwd):
        t = Trace()
        t.ev[0].update(source_format="claude_code", cwd=cwd, t=t0 * H)
        t.say(t0 + 0.1, "Go.")
        t.step(t0 + 0.2, "Done.")
        t.say(t0 + 0.3, "Thanks.")
        return t.ev
    same = trace_stats.side_values([session(0, "/w"), session(11, "/w")])
    assert same["run_hours"] == pytest.approx(11.3) and same["idle_hours"] == pytest.approx(10.7)   # 0.3 -> 11
    apart = trace_stats.side_values([session(0, "/w"), session(11, "/other")])
    assert apart["run_hours"] == pytest.approx(0.6) and apart["idle_hours"] == 0
    assert same["sessions"] == 2


def test_provenance_of_a_trace():
    assert trace_stats.provenance(Trace(model="claude-sonnet-4-5").ev) == "model-driven"
    assert trace_stats.provenance(Trace(model="scripted-e2e").ev) == "scripted model"
    assert trace_stats.provenance(Trace(model="fake-model").ev) == "fake API (tests)"
    hand = Trace(model="claude-opus-4-1")
    hand.ev[0]["label"] = "hand-built format example, not a recorded session"
    assert trace_stats.provenance(hand.ev) == "hand-built"
    noted = Trace(model="claude-x")
    noted.add("note", 0, text="The model is a script (tools/scripted_model.py)")
    assert trace_stats.provenance(noted.ev) == "scripted model"
    told = Trace(model="scripted-x")
    told.ev[0]["provenance"] = "model-driven"
    assert trace_stats.provenance(told.ev) == "model-driven"
