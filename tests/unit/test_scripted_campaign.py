"""The scripted model (tools/scripted_model.py) driving a bank-arm campaign over real HTTP on 127.0.0.1,
with a stand-in evaluator that answers each kernel version with recorded-style results: all five
question moments fire, every bank question reaches the model and is quoted in its next reply, the
goal is judged and the Stop hook answers for the same campaign. The kernel versions themselves are
built with the real nvcc (the GPU run, tools/gpu_campaign.sh, checks and times them)."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tools"), str(REPO / "tests" / "fixtures" / "fakeapi")]
import scripted_kernels  # noqa: E402
import scripted_model  # noqa: E402
from harness import KEY  # noqa: E402

from kernelseek import results as R  # noqa: E402
from kernelseek import traces  # noqa: E402
from kernelseek.agent import Config, Loop, Replay, create  # noqa: E402
from kernelseek.triggers import claims_limit, explains_away  # noqa: E402

TEMPLATE = REPO / "tests" / "fixtures" / "runs" / "campaign" / "evals" / "1"
# speedup of every row per version (None: the row fails its check)
SPEEDUPS = {"naive": 0.006, "v2-tiled": 0.05, "v3-norescale": None, "v4-fixed": 0.0502, "v5-bn32": 0.049}
MOMENTS = {"start", "suspicious_gain", "correctness_excuse", "plateau", "limit_claim"}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def version_runs(tmp: Path) -> dict:
    """One recorded-style run directory per kernel version, made from the fixture's rows."""
    rows, meta = R.load(TEMPLATE)
    out = {}
    for v, sp in SPEEDUPS.items():
        vr = []
        for r in rows:
            r = R.Row(**{**vars(r)})
            if sp is None:
                r.status, r.reason, r.speedup, r.time_ms = "failed", "max_err 0.41 > allowed 0.012", None, None
            else:
                r.speedup, r.time_ms = sp, r.baseline_ms / sp
            vr.append(r)
        d = tmp / "sources" / v
        d.mkdir(parents=True)
        R.save(d, vr, dict(meta))
        out[v] = d
    return out


class StandIn:
    """An evaluator with kernelseek.evaluate's signature: the version written in the kernel's first
    line picks the recorded run that answers it (kernels/naive_fwd.cu itself: the naive run)."""

    def __init__(self, sources: dict):
        self.sources, self.seen = sources, []

    def __call__(self, kernel, *a, **kw):
        m = re.search(r"scripted version (\S+):", Path(kernel).read_text().splitlines()[0])
        v = m.group(1) if m else "naive"
        self.seen.append(v)
        return Replay([self.sources[v]])(kernel, *a, **kw)


@pytest.fixture
def server(tmp_path):
    """tools/scripted_model.py as its own process, as on the GPU machine; its URL from --url-file."""
    url_file = tmp_path / "url"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, str(REPO / "tools" / "scripted_model.py"), "--key", KEY,
                          "--url-file", str(url_file)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if url_file.is_file() and url_file.read_text().strip():
                break
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.05)
        yield url_file.read_text().strip()
    finally:
        p.terminate()
        p.wait(timeout=10)


def run_campaign(tmp_path, url, steps=11):
    cfg = Config(kernel=str(REPO / "kernels" / "naive_fwd.cu"), grid="e2e", baseline="best", arm="bank",
                 model="scripted-e2e-1", base_url=url, plateau_evals=1, api_max_retries=0,
                 note="the model is tools/scripted_model.py, a script (not a language model)",
                 budget={"steps": steps, "tokens": None, "dollars": 1.0, "wall_s": 600.0})
    root = create(cfg, tmp_path / "c").root
    ev = StandIn(version_runs(tmp_path))
    out = Loop(root, evaluator=ev, log=lambda *a, **k: None).run()
    return root, traces.read(root / "trace.jsonl"), out, ev


def agent_texts(events):
    return [(i, traces.text_of(e["content"])) for i, e in enumerate(events)
            if e["type"] == "message" and e["role"] == "assistant"]


def test_scripted_campaign_fires_all_five_moments_and_the_model_quotes_each_question(tmp_path, server):
    root, events, out, ev = run_campaign(tmp_path, server)
    qs = [(i, e) for i, e in enumerate(events) if e["type"] == "question"]
    assert [e["moment"] for _, e in qs] == ["start", "suspicious_gain", "correctness_excuse", "plateau",
                                            "limit_claim"]
    assert all(e["source"] == "bank" and e["bank_id"] for _, e in qs)
    said = agent_texts(events)
    for i, q in qs:          # the next reply of the model quotes the question it was asked
        nxt = next(t for j, t in said if j > i)
        assert f'You asked: "{q["text"]}"' in nxt
    # the versions: naive, faster, failing, fixed, and the one that came with the limit claim
    assert ev.seen == ["naive", "v2-tiled", "v3-norescale", "v4-fixed", "v5-bn32"]
    evals = [e for e in events if e["type"] == "evaluation"]
    assert [e["summary"]["failed"] > 0 for e in evals] == [False, False, True, False, False]
    assert len({e["kernel_sha256"] for e in evals}) == 5
    # the goal is judged (not met) and the budget closes the campaign
    checks = [e for e in events if e["type"] == "goal_check"]
    assert checks and not any(c["met"] for c in checks)
    assert not out.met and events[-1]["type"] == "stop" and "budget" in events[-1]["reason"]
    # it says it is scripted: the model id of every reply and a note at the start
    assert {e["model"] for e in events if e["type"] == "usage"} == {"scripted-e2e-1"}
    assert any(e["type"] == "note" and "scripted_model.py" in e["text"] for e in events[:3])


def test_stop_hook_answers_for_the_scripted_campaign(tmp_path, server):
    root, events, out, _ = run_campaign(tmp_path, server, steps=9)
    payload = {"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "Stop", "stop_hook_active": False}
    p = subprocess.run([sys.executable, "-m", "kernelseek", "hook", "stop"], input=json.dumps(payload),
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO),
                                                                 KERNELSEEK_CAMPAIGN=str(root)), timeout=60)
    assert p.returncode == 0
    answer = json.loads(p.stdout)
    assert answer["decision"] == "block" and "geomean 0.049x < target 1.00x" in answer["reason"]
    assert (root / "stop_hook.json").is_file()


def test_the_server_refuses_a_model_id_that_does_not_say_scripted(server):
    import anthropic
    c = anthropic.Anthropic(api_key=KEY, base_url=server, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="scripted-"):
        c.messages.create(model="claude-opus-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    r = c.messages.create(model="scripted-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert r.model == "scripted-x" and [b.name for b in r.content if b.type == "tool_use"] == ["evaluate"]


def test_only_the_claim_claims_a_limit_and_only_the_excuse_explains_away(tmp_path, server):
    _, events, _, _ = run_campaign(tmp_path, server)
    for _, t in agent_texts(events):
        step = scripted_model.TAG.findall(t)[-1]
        assert bool(claims_limit(t)) == (step == "claim"), (step, claims_limit(t))
        assert bool(explains_away(t)) == (step == "excuse"), (step, explains_away(t))


def test_every_kernel_version_builds_with_nvcc(tmp_path):
    from kernelseek.build import NvccNotFound, build, find_nvcc
    try:
        find_nvcc()
    except NvccNotFound as e:
        pytest.skip(f"needs nvcc: {e}")
    for k in scripted_kernels.write_all(tmp_path):
        if "v4" in str(k):
            continue                     # v2 with another tag
        br = build(k, arch="sm_90a")
        assert br.ok, br.log[-2000:]


def test_a_scripted_trace_confirms_no_bank_question(tmp_path, server):
    from kernelseek.bank_lint import lint
    root, events, _, _ = run_campaign(tmp_path, server, steps=3)
    q = next(e for e in events if e["type"] == "question")
    bank = tmp_path / "bank.yaml"
    bank.write_text(f"""group: challenge a limit
entries:
- id: sc-1
  text: "Is this ceiling a property of the hardware, or of the way the kernel is built?"
  moments: [limit_claim]
  layer: kernel
  check: "kernelseek bounds"
  provenance: {{kind: confirmed, trace: {root / 'trace.jsonl'}, event: {q['id']}}}
""")
    msgs = " | ".join(i.message for i in lint([REPO / "tests" / "fixtures" / "bank" / "good", bank]))
    assert "scripted-model run" in msgs and "confirms nothing" in msgs
