"""Notebook parameters: paths resolved from the repository, and the run a notebook shows by default.

The notebooks under notebooks/ run from the repository root, from notebooks/, or under papermill
with any working directory. So a relative path given as a parameter is taken from the repository
root (where the defaults point: data/runs, data/traces, campaigns); only when it names nothing
there is it taken from the working directory (a path the user typed from where they stand).
"""
from __future__ import annotations

import glob
from pathlib import Path

from .paths import DATA_RUNS as COMMITTED, REPO     # the checkout and its committed runs (data/runs/)


def repo_path(p) -> Path | None:
    """`p` as an absolute path: as given when absolute; else from the repository root, or from the
    working directory when only that holds it. None stays None."""
    if p is None or p == "":
        return None
    p = Path(str(p)).expanduser()
    if p.is_absolute():
        return p
    in_repo = REPO / p
    if in_repo.exists() or not p.exists():
        return in_repo.resolve() if in_repo.exists() else in_repo
    return p.resolve()


def repo_glob(pattern: str) -> list[str]:
    """Files matching `pattern`, a glob taken from the repository root (or, when it matches nothing
    there and is relative, from the working directory), sorted."""
    if Path(pattern).is_absolute():
        return sorted(glob.glob(pattern))
    return sorted(glob.glob(str(REPO / pattern))) or sorted(str(Path(f).resolve()) for f in glob.glob(pattern))


def _gpu(run: Path) -> str:
    from .mainjob import _meta
    meta = _meta(run)
    return str((meta.get("env") or {}).get("gpu") or meta.get("gpu") or "")


def newest_run(root: Path | str = COMMITTED, gpu: str = "H200", grid: str | None = None) -> Path:
    """The newest committed, timed run of a whole grid on `gpu` (by the finish time in its meta): what
    gap_triage and bounds show when no run is given. Check-only runs (no times, so no speedups) and
    runs of a few rows are passed over. Raises FileNotFoundError naming `root`."""
    from .mainjob import _meta, committed_runs
    runs = [r for r in committed_runs(Path(root), grid=grid)
            if gpu.lower() in _gpu(r).lower() and not _meta(r).get("check_only")]
    if not runs:
        raise FileNotFoundError(f"{root}: no committed, timed {gpu} run" + (f" of grid {grid}" if grid else ""))
    return runs[-1]


def run_param(run) -> Path:
    """A notebook's `run` parameter: a run directory or results.json (see repo_path); None means the
    newest committed H200 run."""
    return repo_path(run) if run else newest_run()
