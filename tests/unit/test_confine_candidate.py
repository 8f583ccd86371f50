"""The candidate is confined too: its build (real nvcc under real bubblewrap) sees only its folder and
kseek.h, and the worker that loads it (real bubblewrap; a stand-in worker that really dlopens the
library, since there is no GPU here) writes nothing but its scratch. Driven by a scripted model on a
fake Messages API through the real loop; afterwards an honest kernel meets the goal.
Without bubblewrap these tests FAIL; they never skip."""
import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIX / "fakeapi"))
sys.path.insert(0, str(FIX / "confine"))
from attack import REPO, fill, make_area, remove_area, standin_evaluator  # noqa: E402
from fakeapi import FakeAPI, text, tool, turn  # noqa: E402
from harness import KEY, config, events, trace_text  # noqa: E402

from kernelseek import store  # noqa: E402
from kernelseek.agent import Loop, create  # noqa: E402
from kernelseek.evaluate import evaluate  # noqa: E402

GRID = FIX / "confine" / "grid.yaml"


@pytest.fixture
def area(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "build-cache"))
    a = make_area(monkeypatch)
    yield a
    remove_area(a)
    (REPO / "escaped-from-worker.txt").unlink(missing_ok=True)


def campaign(a, api_url: str, name: str = "c") -> Path:
    cfg = dataclasses.replace(config(api_url), grid=str(GRID), baseline="fa3", budget={"steps": 10})
    return create(cfg, a.campaigns / name).root


def test_the_host_gate_refuses_the_host_attack_before_any_worker_loads_it(tmp_path):
    """The attack below never reaches a worker in a real evaluation: its file, socket and process
    imports are off the host allowlist (kernelseek/host_gate.py)."""
    from kernelseek import build as kb
    from kernelseek.constraints import check_binary
    src = tmp_path / "kernel.cu"
    src.write_text(fill("host_attack.cu", CAMPAIGN=tmp_path, REPO=REPO, HOME=tmp_path, PORT=0))
    (tmp_path / "kseek.h").write_text((REPO / "kernels" / "kseek.h").read_text())
    r = kb.build(src, cache_dir=tmp_path / "cache")
    assert r.ok, r.log[-1500:]
    reasons = " ".join(check_binary(r.so_path).reasons)
    assert "host-code gate" in reasons and "imports connect" in reasons and "imports fopen" in reasons, reasons


def test_candidate_build_and_worker_attacks_fail_then_an_honest_kernel_meets_the_goal(area, monkeypatch):
    """The confinement behind the host-code gate: the gate is switched off here (it would refuse the
    attack before any worker starts: the test above), so the attack runs in the confined worker."""
    import kernelseek.host_gate
    monkeypatch.setattr(kernelseek.host_gate, "check", lambda so: [])
    root = area.campaigns / "c"
    ws = root / "workspace"
    host = fill("host_attack.cu", CAMPAIGN=root, REPO=REPO, HOME=area.home, PORT=0)
    include = fill("include_attack.cu", WHICH="fa3_hopper.cu")
    rel = os.path.relpath(REPO / "kernels" / "fa3_hopper.cu", ws)
    guards = "".join(f'#if __has_include("{p}")\n#error "reachable from the build: {p}"\n#endif\n'
                     for p in (rel, REPO / "kernels" / "fa3_hopper.cu", REPO / "kernels" / "NOTES.md",
                               area.other / "kernel.cu", "/etc/shadow", area.key_file, root / "goal.yaml"))
    honest = guards + (FIX / "confine" / "honest.cu").read_text()
    script = [turn(tool("write", path="kernel.cu", content=host)), turn(tool("evaluate")),
              turn(tool("write", path="kernel.cu", content=include)), turn(tool("evaluate")),
              turn(tool("write", path="kernel.cu", content=honest)), turn(tool("evaluate")),
              turn(text("Done."), stop="end_turn")]
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        campaign(area, api.base_url)
        port = api.server.server_address[1]
        host = host.replace("htons(0)", f"htons({port})")          # aim at the live API server
        script[0]["content"][0]["input"]["content"] = host
        goal_before = (root / "goal.yaml").read_text()
        out = Loop(root, evaluator=standin_evaluator(), log=lambda *a: None).run()
    evs = events(root, "evaluation")
    assert len(evs) == 3
    # 1. host code in the worker: every attempt failed, nothing was written anywhere
    log = (root / evs[0]["dir"] / "worker.log").read_text()
    lines = [ln for ln in log.splitlines() if ln.startswith("ATTACK ")]
    # A repository under /tmp sits inside the jail's private tmpfs (the package's read-only bind creates
    # its parent folders there), so that write "succeeds" into memory the jail discards; the host file
    # is checked below either way.
    in_jail_tmp = str(REPO.resolve()).startswith("/tmp/")
    lines_but_repo = [ln for ln in lines if not (in_jail_tmp and ln.startswith("ATTACK write the repository"))]
    assert len(lines) == 9 and not any("SUCCEEDED" in ln for ln in lines_but_repo), log
    for what in ("forge evals/99/results.json", "append to trace.jsonl", "edit goal.yaml", "read fa3_hopper.cu",
                 "read /etc/shadow", "read ssh key", "write the workspace"):
        assert f"ATTACK {what}: No such file or directory" in lines, what
    assert ("ATTACK write the repository: Read-only file system" in lines
            or (in_jail_tmp and "ATTACK write the repository: SUCCEEDED" in lines))
    assert lines[-1] in ("ATTACK connect to the API: Connection refused", "ATTACK connect to the API: Network is unreachable")
    assert not (root / "evals" / "99").exists() and not (REPO / "escaped-from-worker.txt").exists()
    assert not (ws / "from-worker.txt").exists() and (root / "goal.yaml").read_text() == goal_before
    assert not any(e["type"] == "stop" and e.get("met") and e["seq"] < evs[-1]["seq"] for e in events(root))
    assert evs[0]["geomean"] == pytest.approx(0.5) and json.loads(
        (root / evs[0]["dir"] / "results.json").read_text())["meta"]["confined"] is True
    # 2. the build: the repository's kernel cannot be included (nvcc does not see kernels/)
    rows = json.loads((root / evs[1]["dir"] / "results.json").read_text())["rows"]
    assert rows[0]["status"] == "refused" and "fa3_hopper.cu: No such file or directory" in rows[0]["reason"]
    # 3. an honest kernel whose #if __has_include guards prove nothing else is reachable: built, goal met
    assert evs[2]["geomean"] == pytest.approx(1.25) and out.met
    assert [e["n"] for e in evs] == [0, 1, 2] and len(store.Campaign(root).eval_dirs()) == 3
    assert KEY not in trace_text(root)


def test_plain_eval_can_run_the_real_worker_confined(area, tmp_path):
    """`kernelseek eval --confine`: the real worker starts under bubblewrap and imports the harness; its
    meta comes back over the pipe. Without a GPU the scenario errors; with one, this stand-in kernel
    (it writes no output) fails its check."""
    import torch
    src = tmp_path / "honest.cu"
    src.write_text((FIX / "confine" / "honest.cu").read_text())
    run, rows, meta = evaluate(str(src), str(GRID), "fa3", runs_dir=str(tmp_path / "runs"), progress=False,
                               confine=True, timeout_s=120)
    assert meta["confined"] is True and meta["env"].get("torch"), meta.get("env")
    gpu = torch.cuda.is_available()
    assert meta["env"]["cuda_available"] is gpu and rows[0].status == ("failed" if gpu else "error"), rows[0].reason
    assert KEY not in json.dumps(meta) and KEY not in (run / "worker.log").read_text()


def test_confined_build_sees_the_workspace_and_nothing_above_it(tmp_path, monkeypatch):
    """A folder kernel in a workspace includes "../shared.cuh" from the workspace (allowed); the same
    include one level further up, out of the workspace, is not there for nvcc."""
    from kernelseek.build import build
    from kernelseek.confine import confined_nvcc
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "cache"))
    ws = tmp_path / "campaign" / "workspace"
    (ws / "k").mkdir(parents=True)
    (ws / "shared.cuh").write_text("#define KSEEK_TEST_SHARED 1\n")
    (tmp_path / "campaign" / "outside.cuh").write_text("#define KSEEK_TEST_OUTSIDE 1\n")
    body = (FIX / "confine" / "honest.cu").read_text()
    (ws / "k" / "k.cu").write_text('#include "../shared.cuh"\n' + body)
    assert build(ws / "k", confine=confined_nvcc).ok
    (ws / "k" / "k.cu").write_text('#include "../../outside.cuh"\n' + body)
    r = build(ws / "k", confine=confined_nvcc)
    assert not r.ok and "outside.cuh: No such file or directory" in r.log
    assert build(ws / "k").ok                                 # unconfined, the same include is found
