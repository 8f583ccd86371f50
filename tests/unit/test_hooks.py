"""The Stop hook as Claude Code runs it: a subprocess, a JSON payload on stdin, a decision on
stdout. Met, unmet, stale, unreadable, missing, the loop cap, and `kernelseek init claude-code`."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelseek import bank

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures" / "runs"
HOOK = [sys.executable, "-m", "kernelseek", "hook", "stop"]


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSEEK_")}
    return {**e, "PYTHONPATH": str(ROOT), **extra}


def project(tmp_path: Path, run: str | None = "unmet", pointer: str | None = "run") -> Path:
    """A project directory: the kernel file, a run copied from the fixtures, the pointer file."""
    p = tmp_path / "proj"
    p.mkdir()
    shutil.copy(RUNS / "kernel.cu", p / "kernel.cu")
    if run:
        shutil.copytree(RUNS / run, p / "run")
    if pointer:
        (p / ".kernelseek").mkdir()
        (p / ".kernelseek" / "campaign").write_text(pointer + "\n")
    return p


def payload(cwd: Path, active=False, message="All done: the goal is achieved.", session="s-1", **kw):
    d = {"session_id": session, "transcript_path": str(cwd / "transcript.jsonl"), "cwd": str(cwd),
         "hook_event_name": "Stop", "stop_hook_active": active, "last_assistant_message": message}
    d.update(kw)
    return d


def hook(p: dict | str, cwd: Path, **envs):
    data = p if isinstance(p, str) else json.dumps(p)
    r = subprocess.run(HOOK, input=data, cwd=cwd, env=env(**envs), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout) if r.stdout.strip() else None
    return out, r.stderr


def test_met_allows(tmp_path):
    p = project(tmp_path, "met")
    out, err = hook(payload(p), p)
    assert out is None and "goal met" in err


def test_unmet_blocks_with_shortfall_and_question(tmp_path):
    p = project(tmp_path, "unmet")
    out, _ = hook(payload(p), p)
    assert out["decision"] == "block"
    reason = out["reason"]
    assert "paged_decode 0.620x < 1.00" in reason and "fp8_gqa failed" in reason
    assert "geomean 0.826x < target 1.00x" in reason
    st = json.loads((p / ".kernelseek" / "stop_hook.json").read_text())
    q = {e.id: e for e in bank.load()}[st["asked"][0]]
    assert "limit_claim" in q.moments and q.group == "challenge a limit"
    assert q.check in reason and "{" not in reason


def test_stale_blocks(tmp_path):
    p = project(tmp_path, "met")
    (p / "kernel.cu").write_text("// the agent edited the kernel after the last evaluation\n")
    out, _ = hook(payload(p), p)
    assert out["decision"] == "block" and "stale" in out["reason"] and "changed since" in out["reason"]


def test_unreadable_and_missing_results_block(tmp_path):
    p = project(tmp_path, "unreadable")
    out, _ = hook(payload(p), p)
    assert out["decision"] == "block" and "not valid JSON" in out["reason"]
    q = tmp_path / "other"
    q.mkdir()
    (q / ".kernelseek").mkdir()
    (q / ".kernelseek" / "campaign").write_text("campaigns/never-ran\n")
    out, _ = hook(payload(q), q)
    assert out["decision"] == "block" and "no readable results" in out["reason"]


def test_no_campaign_allows_with_a_note(tmp_path):
    p = project(tmp_path, None, pointer=None)
    out, err = hook(payload(p), p)
    assert out is None and "no campaign" in err


def test_loop_cap_allows_then_resets(tmp_path):
    p = project(tmp_path, "unmet")
    seen = []
    for i in range(3):
        out, _ = hook(payload(p, active=i > 0), p, KERNELSEEK_MAX_BLOCKS="3")
        assert out["decision"] == "block" and f"Block {i + 1} of at most 3" in out["reason"]
        seen.append(json.loads((p / ".kernelseek" / "stop_hook.json").read_text())["asked"][-1])
    out, err = hook(payload(p, active=True), p, KERNELSEEK_MAX_BLOCKS="3")
    assert out is None and "cap of 3" in err
    assert len(set(seen)) == 3                              # a different question each time
    out, _ = hook(payload(p, active=False), p, KERNELSEEK_MAX_BLOCKS="3")
    assert out["decision"] == "block" and "Block 1 of" in out["reason"]   # reset after the allow
    st = json.loads((p / ".kernelseek" / "stop_hook.json").read_text())
    assert st["asked"][-1] not in seen                      # never repeated within the campaign


def test_stop_hook_active_counts_toward_the_cap(tmp_path):
    p = project(tmp_path, "unmet")
    out, err = hook(payload(p, active=True), p, KERNELSEEK_MAX_BLOCKS="1")
    assert out is None and "cap of 1" in err                # no saved count, but active: one block
    out, _ = hook(payload(p, active=False, session="s-2"), p, KERNELSEEK_MAX_BLOCKS="1")
    assert out["decision"] == "block"


def test_cap_from_goal_file_and_env_goal(tmp_path):
    p = project(tmp_path, "unmet")
    g = p / "goal.yaml"
    g.write_text("geomean: 0.8\nmin_speedup: 0.6\nmax_blocks: 1\n")
    out, _ = hook(payload(p), p, KERNELSEEK_GOAL=str(g))
    assert out["decision"] == "block" and "fp8_gqa failed" in out["reason"]
    assert "paged_decode" not in out["reason"]              # 0.62 >= 0.6 under this goal
    out, err = hook(payload(p, active=True), p, KERNELSEEK_GOAL=str(g))
    assert out is None and "cap of 1" in err


def test_env_campaign_latest_eval_and_state_in_campaign(tmp_path):
    camp = tmp_path / "camp"
    shutil.copytree(RUNS / "campaign", camp)
    p = project(tmp_path, None, pointer=None)
    out, err = hook(payload(p), p, KERNELSEEK_CAMPAIGN=str(camp))
    assert out is None and "evals/2" in err                 # the latest evaluation meets the goal
    shutil.rmtree(camp / "evals" / "2")
    out, _ = hook(payload(p), p, KERNELSEEK_CAMPAIGN=str(camp))
    assert out["decision"] == "block" and "evals/1" in out["reason"]
    assert json.loads((camp / "stop_hook.json").read_text())["blocks"] == 1


def test_failure_explained_away_gets_a_correctness_question(tmp_path):
    p = project(tmp_path, "unmet")
    t = p / "transcript.jsonl"
    lines = [{"type": "user", "message": {"role": "user", "content": "go"}},
             {"type": "assistant", "message": {"role": "assistant", "content": [
                 {"type": "text", "text": "fp8_gqa fails by a little; that is expected for fp8 rounding."}]}}]
    t.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    pl = payload(p)
    del pl["last_assistant_message"]                        # read from the transcript instead
    out, _ = hook(pl, p)
    st = json.loads((p / ".kernelseek" / "stop_hook.json").read_text())
    q = {e.id: e for e in bank.load()}[st["asked"][0]]
    assert out["decision"] == "block" and "correctness_excuse" in q.moments and q.group == "correctness"


def test_garbage_payload_still_judges_cwd(tmp_path):
    p = project(tmp_path, "unmet")
    out, err = hook("this is not json", p)
    assert out["decision"] == "block" and "not JSON" in err


def test_answers_within_a_second_without_torch(tmp_path):
    p = project(tmp_path, "unmet")
    best = min(_timed(p) for _ in range(3))
    assert best < 1.0, best
    code = ("import json, sys; from kernelseek.hooks import stop; "
            f"out, _ = stop(json.loads({json.dumps(json.dumps(payload(p)))})); "
            "print(out['decision'], 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=p, env=env(), capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["block", "False"], r.stderr


def _timed(p):
    t = time.perf_counter()
    hook(payload(p), p)
    return time.perf_counter() - t


# ---- init claude-code ------------------------------------------------------------------------
def init(d: Path, *args):
    return subprocess.run([sys.executable, "-m", "kernelseek", "init", "claude-code", "--dir", str(d), *args],
                          env=env(), capture_output=True, text=True, timeout=30)


def test_init_keeps_settings_and_is_idempotent(tmp_path):
    s = tmp_path / ".claude" / "settings.json"
    s.parent.mkdir()
    before = {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
              "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo other"}]}],
                        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}
    s.write_text(json.dumps(before))
    r = init(tmp_path, "--campaign", "campaigns/c1")
    assert r.returncode == 0 and "added" in r.stdout
    after = json.loads(s.read_text())
    assert after["model"] == "opus" and after["permissions"] == before["permissions"]
    assert after["hooks"]["PreToolUse"] == before["hooks"]["PreToolUse"]
    assert after["hooks"]["Stop"][0] == before["hooks"]["Stop"][0] and len(after["hooks"]["Stop"]) == 2
    assert "kernelseek hook stop" in after["hooks"]["Stop"][1]["hooks"][0]["command"]
    assert (tmp_path / ".kernelseek" / "campaign").read_text().strip() == "campaigns/c1"
    r = init(tmp_path)
    assert r.returncode == 0 and "already there" in r.stdout
    assert json.loads(s.read_text()) == after


def test_init_refuses_broken_settings(tmp_path):
    s = tmp_path / ".claude" / "settings.json"
    s.parent.mkdir()
    s.write_text("{ not json")
    r = init(tmp_path)
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    assert s.read_text() == "{ not json"


def test_installed_command_runs_as_claude_code_would(tmp_path):
    p = project(tmp_path, "unmet")
    assert init(p).returncode == 0
    cmd = json.loads((p / ".claude" / "settings.json").read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    e = env()
    e.pop("PYTHONPATH")
    r = subprocess.run(["bash", "-c", cmd], input=json.dumps(payload(p)), cwd=p, env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and json.loads(r.stdout)["decision"] == "block", r.stderr


@pytest.mark.parametrize("verb,sub", [("hook", "stop"), ("init", "claude-code")])
def test_verbs_without_subcommand_name_them(verb, sub):
    r = subprocess.run([sys.executable, "-m", "kernelseek", verb], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and r.stderr == f"kernelseek {verb}: give a subcommand: {sub} (see `kernelseek {verb} --help`)\n"
