"""Notebook parameters: a relative path is taken from the repository root, else from the working
directory; the default run is the newest committed whole-grid H200 run."""
from pathlib import Path

import pytest

from kernelseek import nbparams
from kernelseek.mainjob import _meta, committed_runs

ROOT = Path(__file__).resolve().parents[2]


def test_repo_path_from_the_repository_then_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert nbparams.repo_path("data/traces") == ROOT / "data" / "traces"           # not under tmp_path
    (tmp_path / "mine").mkdir()
    assert nbparams.repo_path("mine") == tmp_path / "mine"                          # only the cwd has it
    assert nbparams.repo_path(str(tmp_path / "x")) == tmp_path / "x"                # absolute: as given
    assert nbparams.repo_path("nothing/here") == ROOT / "nothing" / "here"          # named from the repository
    assert nbparams.repo_path(None) is None and nbparams.run_param(None) == nbparams.newest_run()
    assert nbparams.repo_glob("data/traces/*.jsonl") == sorted(str(p) for p in (ROOT / "data" / "traces").glob("*.jsonl"))


def test_newest_run_is_the_last_timed_whole_grid_h200_run(tmp_path):
    runs = committed_runs()
    newest = nbparams.newest_run()
    assert newest in runs and "H200" in _meta(newest)["env"]["gpu"]
    later = runs[runs.index(newest) + 1:]
    assert all("H200" not in str((_meta(r).get("env") or {}).get("gpu")) or _meta(r).get("check_only") for r in later)
    assert not _meta(newest).get("scenarios_filter") and not _meta(newest).get("check_only")   # timed, whole grid
    with pytest.raises(FileNotFoundError, match="no committed, timed H200 run"):
        nbparams.newest_run(tmp_path)
