"""Evaluators for the loop: the real harness, or a stand-in that replays recorded results.

`Replay(sources)` has the signature of kernelseek.evaluate.evaluate. Its k-th call (k = the number
of evaluations already under `runs_dir`, so a resumed campaign goes on where it stopped) copies the
k-th recorded run (the last one once they run out) into a new run directory, with meta
`kernel_sha256` set to the current kernel's hash, so goal.judge_run judges it as fresh. Sources are
run directories, or folders of numbered run directories (a campaign's evals/, in order).

    make_evaluator("harness")                       kernelseek.evaluate.evaluate
    make_evaluator("replay:DIR[,DIR...]")           Replay([...])
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from .. import results as R
from .. import store
from ..goal import sha256_file


def expand(sources) -> list[Path]:
    """Run directories from a list of run directories or folders of numbered ones."""
    out: list[Path] = []
    for s in sources:
        p = Path(s)
        if store.is_run(p):
            out.append(p)
            continue
        evals = store.Campaign(p).evals
        runs = store.numbered_runs(evals if evals.is_dir() else p)    # a campaign, or its evals/
        if not runs:
            raise FileNotFoundError(f"replay source {p}: no results.json and no numbered run directories")
        out.extend(runs)
    return out


class Replay:
    """A stand-in evaluator replaying recorded results in order."""

    def __init__(self, sources):
        self.sources = expand([sources] if isinstance(sources, (str, Path)) else sources)
        self.label = "replay:" + ",".join(str(s) for s in self.sources)

    def __call__(self, kernel: str, grid: str, baseline: str = "best", scenarios: str | None = None,
                 check_only: bool = False, seed: int = 0, timeout_s: float = 300.0, budget_s: float = 0.4,
                 runs_dir: str = "runs", arch: str = "sm_90a", progress: bool = True, worker_cmd=None,
                 command: str = "", confine: bool = False):          # confine: nothing runs, nothing to confine
        root = Path(runs_dir)
        k = store.next_number(root)
        src = self.sources[min(k, len(self.sources) - 1)]
        rows, meta = R.load(src)
        kpath = Path(kernel)
        if not kpath.exists():
            raise FileNotFoundError(f"kernel {kernel}: not found")
        now = time.time()
        meta = dict(meta, kernel=str(kpath.resolve()), kernel_sha256=sha256_file(kpath), grid=grid,
                    baseline=baseline, scenarios_filter=scenarios, check_only=check_only, seed=seed,
                    replayed_from=str(src), time=now,
                    started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                    command=command or f"replay {src}",
                    # the GPU this evaluation would have used (a matrix pins one per campaign)
                    env=dict(meta.get("env") or {}, cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES")))
        run = R.new_run_dir(root, kpath.stem)
        R.save(run, rows, meta)
        store.Run(run).parquet_file.unlink(missing_ok=True)
        store.write_meta(run, meta)
        return run, rows, meta


def make_evaluator(spec: str = "harness"):
    """The evaluator a campaign config names."""
    if spec in ("harness", "", None):
        from ..evaluate import evaluate
        return evaluate
    if spec.startswith("replay:"):
        return Replay([s for s in spec[len("replay:"):].split(",") if s])
    raise ValueError(f"evaluator {spec!r}: 'harness' or 'replay:DIR[,DIR...]'")
