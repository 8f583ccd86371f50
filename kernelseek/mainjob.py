"""`kernelseek main`: the README's main job; `kernelseek show RUN`: print a run's table.

With a CUDA GPU, main evaluates the project's kernel on bench26 against the best baseline.
Without one it does the part that needs no GPU: it replays the committed H200 results of the last
run (data/runs/) through the results table, gap triage and bound differencing, writes figures,
and says that checking and timing need a GPU.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import results as R
from . import store
from .kernel_source import format_defines, kernel_id
from .paths import DATA_RUNS, REPO

COMMITTED = DATA_RUNS


def committed_runs(root: Path = COMMITTED, grid: str | None = None, partial: bool = False) -> list[Path]:
    """Committed run directories, oldest first (by the finish time recorded in their meta).

    Runs of a subset of the grid (`--scenarios`, recorded as meta["scenarios_filter"]: A/B runs of a
    few rows) are left out unless `partial`: the replay and the repeatability pairs use whole grids."""
    runs = []
    for p in store.list_runs(root):
        try:
            meta = store.read_meta(p)
        except ValueError:
            continue
        if grid and meta.get("grid") != grid:
            continue
        if meta.get("scenarios_filter") and not partial:
            continue
        runs.append((meta.get("finished_utc") or meta.get("started_utc") or "", p))
    return [d for _, d in sorted(runs)]


def _meta(run: Path) -> dict:
    """A run directory's meta ({} when unreadable)."""
    try:
        return store.read_meta(run)
    except (OSError, ValueError):
        return {}


def _checked_out(repo: Path, kernel: str) -> Path | None:
    """The kernel a run names, as checked out: its path, else the folder a file became (the split)."""
    for f in (repo / kernel, repo / kernel_id(kernel)):
        if f.exists():
            return f
    return None


def replay_choice(runs: list[Path], repo: Path = REPO) -> Path | None:
    """The run to replay, among runs of the newest run's kernel: the last one made of that kernel
    as it is now (meta kernel_sha256 equal to its hash), so the replay shows what the checkout's kernel
    measured (not a version measured and then reverted); else that kernel's newest run. Never another
    kernel's run: an older kernel that happens to be unchanged is not the one being worked on. Runs
    of a build variant (history.is_variant) are taken only when there is nothing else."""
    from .build import source_hash
    from .history import is_variant
    if not runs:
        return None
    kernel = _meta(runs[-1]).get("kernel")
    f = _checked_out(repo, kernel) if kernel else None
    try:
        sha = source_hash(f) if f else None  # as evaluate records it
    except (OSError, ValueError):         # a folder without its entry file
        sha = None
    mine = [r for r in runs if kernel_id(_meta(r).get("kernel")) == kernel_id(kernel)]
    plain = [r for r in mine if not is_variant(_meta(r))] or runs
    return next((r for r in reversed(plain) if sha and _meta(r).get("kernel_sha256") == sha), plain[-1])


def repeat_group(runs: list[Path], run: Path) -> list[Path]:
    """The runs among `runs` (oldest first) made of the same kernel source, grid and git revision as
    `run`, built with the same defines: the consecutive runs of one round on one machine, whose pairs
    issue 3's repeatability criterion judges."""
    def key(p: Path):
        m = _meta(p)
        return (kernel_id(m.get("kernel")), m.get("kernel_sha256"), m.get("grid"), m.get("git_rev"),
                format_defines(m.get("build_defines"))) if m else None
    k = key(run)
    return [p for p in runs if k and key(p) == k]


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def describe(run: Path) -> str:
    rows, meta = R.load(run)
    env = meta.get("env", {})
    variant = format_defines(meta.get("build_defines"))
    head = (f"run {run.name}: kernel {meta.get('kernel')} (sha256 {str(meta.get('kernel_sha256'))[:12]}), "
            f"grid {meta.get('grid')}, baseline {meta.get('baseline')}\n"
            + (f"build variant: {variant}\n" if variant else "") +
            f"GPU {env.get('gpu', '?')}, driver {env.get('driver', '?')}, torch {env.get('torch', '?')}, "
            f"git {meta.get('git_rev', '?')}, {meta.get('finished_utc', '')}")
    return head + "\n" + R.format_table(rows)


def replay(out_dir: Path, run: Path | None = None, root: Path = COMMITTED) -> int:
    runs = [run] if run else committed_runs(root, grid="bench26") or committed_runs(root)
    if not runs:
        print(f"no committed results under {root}", file=sys.stderr)
        return 2
    last = replay_choice(runs)
    print("No CUDA GPU here: checking and timing need a GPU (see README). Replaying the committed "
          "H200 results of the last run of the kernel as checked out.\n")
    print(describe(last))
    rows, meta = R.load(last)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        from . import triage
        print("\ngap triage\n" + triage.format_report(triage.triage(rows)))
    except (ImportError, AttributeError) as e:
        print(f"\n(gap triage unavailable: {e})")
    try:
        from . import bounds
        ceil = bounds.load_ceilings((meta.get("env") or {}).get("gpu"))
        print("\nbound differencing\n" + bounds.format_bounds(bounds.bounds_table(rows, ceil, meta), ceil))
    except (ImportError, AttributeError, FileNotFoundError) as e:
        print(f"\n(bound differencing unavailable: {e})")
    try:
        import matplotlib
        matplotlib.use("Agg")
        from . import plots
        fig = plots.speedup_bars(rows, meta=meta, run=last.name)
        fig.savefig(out_dir / "speedup.png", dpi=110, bbox_inches="tight")
        print(f"\nfigure: {out_dir / 'speedup.png'}")
    except (ImportError, AttributeError) as e:
        print(f"(plots unavailable: {e})")
    group = repeat_group(runs, last)
    if len(group) >= 2:
        from . import triage
        tables = [(p.name, R.load(p)[0]) for p in group]
        print(f"\nrepeatability: {len(group)} consecutive runs of this kernel (same source, git revision)")
        print(triage.format_repeatability(triage.repeatability(tables)))
        try:
            from .repeat_figure import repeat_plot
            repeat_plot(tables, meta=meta).savefig(out_dir / "repeat.png", dpi=110, bbox_inches="tight")
            print(f"figure: {out_dir / 'repeat.png'}")
        except (ImportError, AttributeError) as e:
            print(f"(plots unavailable: {e})")
    from . import triage
    hist = triage.history(runs, kernel=meta.get("kernel"))
    if len(hist) >= 2:
        print(f"\nversions of {meta.get('kernel')} (median over each version's runs; groups: geomean)")
        print(triage.format_history(hist))
        try:
            from . import plots
            plots.history_plot(hist, meta=meta).savefig(out_dir / "history.png", dpi=110, bbox_inches="tight")
            print(f"figure: {out_dir / 'history.png'}")
        except (ImportError, AttributeError) as e:
            print(f"(plots unavailable: {e})")
    return 0
