"""The equipped arm's step briefing, on recorded profiler and SASS outputs and a docs folder."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, last_user_text, text, tool, turn  # noqa: E402
from harness import KEY, events, make  # noqa: E402

from kernelseek.agent import Loop  # noqa: E402
from kernelseek.agent.equipped import MENU, bottleneck, choose, kernel_names  # noqa: E402
from kernelseek.agent.retrieval import Docs  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_bottleneck_and_menu():
    assert bottleneck(None) == "unprofiled"
    assert bottleneck([{"sm_pct": 20, "dram_pct": 85, "top_stalls": []}]) == "memory-bound"
    assert bottleneck([{"sm_pct": 80, "dram_pct": 10, "top_stalls": []}]) == "compute-bound"
    assert bottleneck([{"sm_pct": 20, "dram_pct": 10, "top_stalls": [("barrier", 3.0)]}]) == "synchronization-bound"
    assert choose("memory-bound", []) == MENU["memory-bound"][0]
    assert choose("memory-bound", MENU["memory-bound"][:2]) == MENU["memory-bound"][2]
    assert sum(len(set(v)) for k, v in MENU.items() if k != "unprofiled") >= 16
    assert kernel_names("__global__ void __launch_bounds__(128) fwd(float* o) {}\n__global__ void bwd(int x)") == ["fwd", "bwd"]


def test_docs_bm25(tmp_path):
    (tmp_path / "smem.md").write_text("# Shared memory\nBank conflicts serialize shared memory accesses.\n"
                                      "# Registers\nSpills go to local memory.\n")
    (tmp_path / "tma.txt").write_text("The tensor memory accelerator copies tiles asynchronously.")
    d = Docs(tmp_path)
    assert len(d.passages) == 3
    hits = d.search("shared memory bank conflicts", k=2)
    assert hits[0].text.startswith("# Shared memory") and hits[0].score > 0


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def test_equipped_step_prompt(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Occupancy\nRegisters per thread limit resident warps.\n"
                                   "# Tensor cores\nMatrix products on tensor cores use warpgroup MMA.\n")
    script = [turn(tool("evaluate")), turn(tool("evaluate")), turn(text("stop"), stop="end_turn")]
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, arm="equipped", budget={"steps": 3}, docs=str(docs),
                    profile_csv=str(FIX / "ncu" / "h200_raw.csv"),
                    sass=[str(FIX / "sass" / "tiny.sass"), str(FIX / "sass" / "tiny_fastmath.sass")])
        Loop(root, log=lambda *a: None).run()
    briefs = [e for e in events(root, "message") if e.get("author") == "equipped"]
    assert len(briefs) == 3                      # at the start and after each of the two evaluations
    first = briefs[0]["content"][0]["text"]
    assert "### Profile of the current best (replayed from h200_raw.csv)" in first
    assert f"### Bottleneck: {briefs[0]['label']}" in first and briefs[0]["optimization"] in first
    assert "### Notes" in first and "### Documentation (2 passages" in first
    assert "nothing evaluated yet" in first
    assert briefs[0]["label"] == "compute-bound"          # SM 64% in the recorded profile
    assert "[guide.md, score" in first and "warpgroup MMA." in first
    second = briefs[1]["content"][0]["text"]
    assert "evaluation 0 at 0.416x" in second and "replayed SASS" in second and "FMUL  6  2     -4" in second
    assert briefs[1]["optimization"] != briefs[0]["optimization"]      # a menu item not tried before
    assert "- evaluation 0: 0.416x, tried: " + briefs[0]["optimization"] in briefs[2]["content"][0]["text"]
    assert first in last_user_text(api.requests[0])
