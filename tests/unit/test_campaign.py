"""Campaigns: the arm-by-replicate matrix on a local Dask cluster, resume and restore from the CLI."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "fakeapi"))
from fakeapi import FakeAPI, load_script, tool, turn  # noqa: E402
from harness import KEY, config, events, make  # noqa: E402

pytest.importorskip("papermill")
pytest.importorskip("distributed")
from kernelseek import campaign  # noqa: E402
from kernelseek.cli import main as cli_main  # noqa: E402


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def cli(*argv):
    """`kernelseek campaign ...` through the command's own entry point (exit code, messages on stderr)."""
    return cli_main(["campaign", *argv])


def test_matrix_runs_arms_by_replicates_on_dask(tmp_path):
    with FakeAPI(load_script("reach_goal"), key=KEY, by_turn=True) as api:
        df = campaign.matrix(config(api.base_url), arms=["bare", "bank"], replicates=1,
                             campaigns_dir=tmp_path, workers=2, gpus=["0", "1"], processes=True)
    assert sorted(df["arm"]) == ["bank", "bare"] and df["error"].isna().all()
    assert df["met"].all() and (df["evaluations"] == 3).all() and (df["steps"] == 7).all()
    assert sorted(df["gpu"]) == ["0", "1"] or set(df["gpu"]) <= {"0", "1"}
    assert (df.set_index("arm").loc["bare", "questions"], df.set_index("arm").loc["bank", "questions"] > 0) == (0, True)
    for cid in df["campaign"]:
        assert (tmp_path / cid / "notebooks" / "campaign.ipynb").is_file()
    assert len(api.requests) == 14                     # two conversations of seven steps shared the server


def test_resume_and_restore_verbs(tmp_path, capsys):
    script = [turn(tool("evaluate"))] * 6
    with FakeAPI(script, key=KEY, by_turn=True) as api:
        root = make(tmp_path, api.base_url, budget={"steps": 1})
        from kernelseek.agent import Loop
        Loop(root, log=lambda *a: None).run()
        assert cli("resume", str(root), "--steps", "3") == 1          # goal not met within 3 steps
    assert "stopped (budget: 3 steps of 3)" in capsys.readouterr().out
    assert len(events(root, "evaluation")) == 3 and len(events(root, "resume")) == 1
    (root / "workspace" / "kernel.cu").write_text("// changed\n")
    assert cli("restore", str(root), "0") == 0
    assert "kseek_fixture_kernel" in (root / "workspace" / "kernel.cu").read_text()
    assert cli("restore", str(root), "ffffffffffff") == 2
