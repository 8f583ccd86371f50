"""`kernelseek eval`: a grid through build -> constraints -> worker (check, time) -> results.

    kernelseek eval kernels/naive_fwd.cu --grid bench26 --baseline best
    kernelseek eval kernels/naive_fwd.cu --grid hopper --check-only
    kernelseek eval kernels/fa3_hopper --grid bench26 --define KSEEK_FA3_BN=64   (a folder; a build variant)

Each scenario runs in two workers (child processes on the GPU, worker_pair.py): the candidate's, which
loads the library, and a trusted one for the baselines; the parent's clock corroborates the
candidate's times (corroborate.py). The parent turns the merged replies into
rows, derives speedup and rates, fails rows faster than the GPU's datasheet peaks
(peaks.py), flags surprising ones for review, and writes the run directory
(results.json, meta.json, build/). Exit codes are listed in `kernelseek --help` (cli.EXIT_CODES).
"""
from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import peaks
from . import results as R
from . import store
from .paths import REPO
from .scenarios import Scenario, load_grid, select
from .worker_pair import start_pair, violated

SUSPICIOUS_SPEEDUP = 1.6     # above this against the best baseline, a row is flagged for review
SUSPICIOUS_MIN_BASE_KERNEL_MS = 0.02  # below this the baseline's kernels are launch- and tile-bound:
                                      # a gain there says nothing about skipped work
MAX_GRAPH_ROUNDS = 20        # --graph-rounds: alternating replay rounds after the solo graph timing


def git_revision() -> str:
    """HEAD's hash (+ "-dirty"), or $KSEEK_GIT_REV where the checkout has no usable git (the GPU machine)."""
    if os.environ.get("KSEEK_GIT_REV"):
        return os.environ["KSEEK_GIT_REV"]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        if len(rev) != 40 or any(c not in "0123456789abcdef" for c in rev):
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except Exception:
        return "unknown"


def make_row(s: Scenario, grid: str, reply: dict, lines: "peaks.Lines | None" = None) -> R.Row:
    """A results row from a worker reply: winner, speedup, rates, the fail line, the review flag.

    `lines`: the GPU's fail lines (peaks.lines_for(gpu)); a passed row faster than they allow is
    failed with the reason. The flag (`suspicious`) is for the merely surprising: a speedup above
    SUSPICIOUS_SPEEDUP against the best baseline in wall-clock and device time alike. Measured
    ceilings play no part here (they are information: bounds.py)."""
    path = {"path": reply["path"]} if reply.get("path") else {}   # the kernel's word: triage groups by it
    row = R.Row(scenario=s.name, row=s.row, grid=grid, features={**s.features(), **path}, flops=s.flops(),
                min_bytes=s.min_bytes())
    row.status = reply.get("status", "error")
    row.reason = reply.get("reason", "")
    for k in ("max_err", "ref_err", "err_bound", "err_ratio", "lse_err", "time_ms", "time_p10_ms",
              "time_p90_ms", "kernel_ms", "host_ms", "sync_ms", "graph_ms", "graph_p10_ms"):
        setattr(row, k, reply.get(k))
    row.graph_note = reply.get("graph_note") or ""
    row.runcheck = reply.get("runcheck") or ""
    row.corroboration = reply.get("corroboration") or {}
    bl = reply.get("baselines") or {}
    row.baselines = bl
    row.baselines_declined = dict(reply.get("baselines_declined") or {})
    R.pick_baselines(row, bl, reply)
    if row.status == "passed" and row.time_ms:
        why = peaks.impossible(lines, s.dtype, row.flops, row.min_bytes,
                               {"time_ms": row.time_ms, "graph_ms": reply.get("graph_ms")})
        if why:
            row.status, row.reason = "failed", why
    if row.status == "passed" and row.time_ms:
        row.tflops = row.flops / (row.time_ms * 1e-3) / 1e12
        row.gbps = row.min_bytes / (row.time_ms * 1e-3) / 1e9
        if row.baseline_ms:
            row.speedup = row.baseline_ms / row.time_ms
        if row.baseline_graph_ms and row.graph_ms:
            row.graph_speedup = row.baseline_graph_ms / row.graph_ms   # the graph measure
        if row.baseline_kernel_ms and row.kernel_ms:
            row.kernel_speedup = row.baseline_kernel_ms / row.kernel_ms   # cycles, not wall-clock
    # A large gain in wall-clock time that device time also shows; a gain only in wall-clock time
    # against a host-bound baseline (tiny shapes, Python dispatch) is reported by kernel_speedup.
    # Tiny shapes, where the baseline's kernels take under SUSPICIOUS_MIN_BASE_KERNEL_MS, are left
    # to the fail lines (a one-block kernel beats a tiled one there honestly).
    tiny = row.baseline_kernel_ms is not None and row.baseline_kernel_ms < SUSPICIOUS_MIN_BASE_KERNEL_MS
    if row.speedup and row.speedup > SUSPICIOUS_SPEEDUP and not tiny and (
            row.kernel_speedup is None or row.kernel_speedup > SUSPICIOUS_SPEEDUP):
        row.suspicious = True
        row.suspicious_reason = f"speedup {row.speedup:.2f}x above {SUSPICIOUS_SPEEDUP}x"
    return row


_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times(path: str = "/proc/stat") -> dict[str, int] | None:
    """This machine's CPU time counters (jiffies, all CPUs) from /proc/stat; None off Linux."""
    try:
        with open(path) as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    return {k: int(v) for k, v in zip(_CPU_FIELDS, first[1:])}


def cpu_shares(a: dict | None, b: dict | None) -> dict[str, float] | None:
    """Percent of all CPU time between two cpu_times() readings, per counter. On a VM, `steal` is the
    time the hypervisor gave our virtual CPUs to someone else: host-bound baselines (FA4's Python
    dispatch) slow down with it, so the run's share is kept beside its timings (issue 3)."""
    if not a or not b:
        return None
    d = {k: b.get(k, 0) - a.get(k, 0) for k in _CPU_FIELDS}
    total = sum(d.values())
    if total <= 0:
        return None
    return {k: round(100.0 * v / total, 2) for k, v in d.items()}


def exit_code(rows: list[R.Row]) -> int:
    st = {r.status for r in rows}
    if "refused" in st:
        return 3
    if "failed" in st:
        return 1
    if st & {"error", "timeout"}:
        return 4
    if any(r.status == "passed" and r.speedup is None for r in rows) and any(r.time_ms for r in rows):
        return 5
    return 0


def check_baseline(spec: str) -> None:
    """ValueError unless `spec` names baselines: best, all, names from baselines.REGISTRY (comma-separated),
    or a kernel file (FILE.cu or original:FILE) that exists."""
    from .baselines import REGISTRY
    for name in str(spec).split(","):
        if name in ("best", "all") and spec == name or name in REGISTRY:
            continue
        path = name.split(":", 1)[1] if name.startswith("original:") else name if name.endswith(".cu") else None
        if path is None:
            raise ValueError(f"--baseline {spec}: unknown baseline '{name}' "
                             f"(known: best, all, {', '.join(REGISTRY)}, FILE.cu)")
        if not Path(path).is_file():
            raise FileNotFoundError(f"--baseline {spec}: kernel file {path}: not found")


def check_graph_rounds(n) -> None:
    """--graph-rounds: a whole number from 0 (off) to MAX_GRAPH_ROUNDS; ValueError naming it otherwise."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_GRAPH_ROUNDS:
        raise ValueError(f"--graph-rounds {n!r}: expected a whole number from 0 to {MAX_GRAPH_ROUNDS}")


def check_inputs(kernel: str, grid: str, baseline: str = "best", scenarios: str | None = None,
                 timeout_s: float = 300.0, budget_s: float = 0.4, arch: str = "sm_90a",
                 defines: dict | None = None, graph_rounds: int = 0) -> list[Scenario]:
    """The scenarios an evaluation would run, after checking each input it takes, before anything is
    built or written. Raises FileNotFoundError or ValueError (GridError, KernelError) naming the
    input at fault."""
    from .build import arch_flags, check_defines, entry_file
    entry_file(kernel)                    # a .cu file, or a folder holding <name>/<name>.cu
    check_defines(defines)
    for name, v in (("--timeout", timeout_s), ("--budget", budget_s)):
        if not (isinstance(v, (int, float)) and 0 < v < float("inf")):
            raise ValueError(f"{name} {v}: expected a positive number of seconds")
    check_baseline(baseline)
    check_graph_rounds(graph_rounds)
    arch_flags(arch)
    return select(load_grid(grid), scenarios)


def machine_problem(worker_cmd=None) -> str | None:
    """Why this machine cannot evaluate (no nvcc; no CUDA GPU for torch), or None. Checked before
    anything is built, so a machine without a GPU stops at once instead of failing every row."""
    from .build import NvccNotFound, find_nvcc
    try:
        find_nvcc()
    except NvccNotFound as e:
        return str(e)
    if worker_cmd is not None:     # a worker of the caller's own (tests): it answers for the GPU
        return None
    try:
        import torch
        ok = torch.cuda.is_available()
    except Exception as e:         # a broken torch install is this machine's problem too
        return f"torch cannot be imported here ({type(e).__name__}: {e}); eval needs torch with CUDA"
    if not ok:
        return (f"no CUDA GPU here (torch {torch.__version__}: torch.cuda.is_available() is False); "
                "eval checks and times on a GPU: run it where one is, or `kernelseek main` to replay "
                "the committed H200 results")
    return None


def compiler_errors(log: str, limit: int = 600) -> str:
    """The compiler's error lines from a build log, joined (not the nvcc command line heading the log);
    the log's last lines when none says "error"."""
    lines = [ln.strip() for ln in (log or "").splitlines()]
    if lines and "nvcc" in lines[0]:
        lines = lines[1:]               # build.build puts the command line first
    lines = [ln for ln in lines if ln]
    errs = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
    text = " | ".join(errs or lines[-5:])
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _build_step(kpath: Path, arch: str, defines: dict, run: Path, meta: dict,
                confine=None) -> tuple[str | None, str | None]:
    """Build the kernel (with its defines; under `confine`, build.build's hook) and check its
    constraints, recording both in the run folder and meta. Returns (the .so path, None) or (None,
    why every row is refused)."""
    from . import build as B
    from . import constraints as C
    br = B.build(kpath, arch=arch, defines=defines, confine=confine)
    store.write_build(run, br.log or "", br.ptxas)
    meta["build"] = {"ok": br.ok, "cached": br.cached, "flags": br.flags, "seconds": br.seconds}
    if not br.ok:
        return None, "build failed: " + compiler_errors(br.log)
    reasons = list(C.check_binary(br.so_path).reasons) + list(C.check_source(kpath).reasons)
    meta["constraints"] = reasons
    if reasons:
        return None, "constraint check refused the kernel: " + "; ".join(reasons)
    return str(br.so_path), None


def _start_meta(seed: int) -> dict:
    """The run's seeds, revision, host, start time and KSEEK_* environment (meta fields)."""
    return {"seed": seed, "seeds": {"check": seed, "timing_sets": f"{seed}+1.."}, "git_rev": git_revision(),
            "host": socket.gethostname(), "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # KSEEK_* settings the worker (or, in runs before build variants, the kernel) read
            "kseek_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("KSEEK_")}}


def evaluate(kernel: str, grid: str, baseline: str = "best", scenarios: str | None = None,
             check_only: bool = False, seed: int | None = None, timeout_s: float = 300.0, budget_s: float = 0.4,
             runs_dir: str = "runs", arch: str = "sm_90a", progress: bool = True, worker_cmd=None,
             command: str = "", defines: dict | None = None, defence: bool = True,
             graph: bool = False, confine: bool = False, graph_rounds: int = 0) -> tuple[Path, list[R.Row], dict]:
    """Run one evaluation of the kernel (a .cu file or a kernel folder) built with `defines`
    (NAME -> VALUE: a build variant); returns (run directory, rows, meta). Never raises for kernel
    faults; bad inputs (check_inputs, a bad define) raise before the run directory exists.

    defence: fresh inputs per timed batch, verified timed calls, near-repeat traps and the run-time
    code check (defence.py, timing.py, runcheck.py); False times the old way, to measure the cost.
    graph: also time CUDA-graph replay (graph_ms) of the candidate (refreshed and verified likewise) and of
    every baseline that can be captured (graph_speedup), then `graph_rounds` alternating rounds (graph_timing.py).
    confine: the candidate's build and the worker that loads it run under bubblewrap (see
    kernelseek.confine); results come back over the worker's pipe and this process writes them."""
    from . import build as B
    t_start = time.perf_counter()
    nvcc_jail = _build_hook(confine)       # bubblewrap checked before anything runs: no silent fallback
    if seed is None:                       # a fresh seed per run: inputs cannot be known in advance
        seed = int.from_bytes(os.urandom(3), "little")
    kpath = Path(kernel)
    scen = check_inputs(kernel, grid, baseline, scenarios, timeout_s, budget_s, arch, defines, graph_rounds)
    defines = B.check_defines(defines)
    run = R.new_run_dir(runs_dir, kpath.stem)
    meta = {"command": command or " ".join(map(shlex.quote, sys.argv)), "kernel": kpath.as_posix(),
            "kernel_sha256": B.source_hash(kpath), "build_defines": defines, "grid": grid,
            "baseline": baseline, "scenarios_filter": scenarios, "check_only": check_only,
            "confined": bool(confine), "graph_rounds": int(graph_rounds) if graph else 0, **_start_meta(seed)}
    phases = {"build_s": 0.0, "worker_start_s": 0.0}
    rows: list[R.Row] = []
    t = time.perf_counter()
    so, refuse = _build_step(kpath, arch, defines, run, meta, nvcc_jail)
    phases["build_s"] = time.perf_counter() - t
    if refuse:
        rows = [R.Row(scenario=s.name, row=s.row, grid=grid, status="refused", reason=refuse,
                      features=s.features(), flops=s.flops(), min_bytes=s.min_bytes()) for s in scen]
        meta["wall_s"] = time.perf_counter() - t_start
        R.save(run, rows, meta)
        store.write_meta(run, meta)
        return run, rows, meta
    w = start_pair(worker_cmd, so, baseline, arch, store.Run(run), confine, _defence_env(so, defence, meta),
                   check_only)
    t = time.perf_counter()
    info = w.request({"op": "meta"}, timeout=180)     # the trusted worker's GPU and libraries
    phases["worker_start_s"] = time.perf_counter() - t
    meta["env"] = info
    lines = peaks.lines_for(info.get("gpu"))
    meta["fail_lines"] = lines.describe() if lines else {
        "none": f"no datasheet peaks for GPU {info.get('gpu')!r} (kernelseek/peaks.py): impossible speed is not judged"}
    agg: dict[str, float] = {}
    cpu0 = cpu_times()
    bar = _progress(scen, progress)
    try:
        for s in bar:
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(s.name[:30])
            req = {"op": "scenario", "scenario": s.to_dict(), "kernel_so": so, "baseline": baseline,
                   "seed": seed, "check_only": check_only, "budget_s": budget_s, "defence": defence,
                   "graph": graph, "graph_rounds": meta["graph_rounds"]}
            reply = w.scenario(req, timeout=timeout_s)
            for k, v in (reply.pop("phases_s", None) or {}).items():
                agg[k] = agg.get(k, 0.0) + v
            note_baselines(meta.setdefault("baselines_ran", {}), reply)
            rows.append(make_row(s, grid, reply, lines))
            R.note_declines(meta.setdefault("baselines_declined", {}), rows[-1])
            if w.violation:                              # protocol.py: no reply of it can be believed
                violated(rows, w.violation)
            R.save(run, rows, meta)                      # partial results survive a dead harness
    finally:
        meta.update(w.close(rows))                       # a last look for bytes nobody asked for
    meta["defence"] = _defence_meta(defence, info, rows, agg)
    meta["host_cpu_pct"] = cpu_shares(cpu0, cpu_times())   # while the scenarios ran (steal: VM)
    wall = time.perf_counter() - t_start
    meta["wall_s"] = wall
    meta["phases_s"] = {**phases, **agg}
    meta["harness_overhead_s"] = wall - agg.get("timing", 0.0)
    meta["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    R.save(run, rows, meta)
    store.write_meta(run, meta)
    return run, rows, meta


def _defence_env(so: str | None, on: bool, meta: dict) -> dict:
    """The worker's environment for the run-time check: its shim, built here once (or off)."""
    if not on:
        return {"KSEEK_RUNCHECK": "0"}
    env = {"KSEEK_RUNCHECK": "1"}
    try:
        from .runcheck import build_shim
        env["KSEEK_TRUST_SHIM"] = str(build_shim())
        if so:
            from .cubins import own_code
            own = own_code(so)                          # cached beside the .so for the worker
            meta["own_code"] = {"cubins": len(own.cubins), "kernels": sum(len(c.kernels) for c in own.cubins.values())}
    except Exception as e:                              # the worker then reports it unavailable
        meta["runcheck_build"] = f"{type(e).__name__}: {str(e)[:300]}"
    return env


DEFENCE_PHASES = ("defence_refresh", "defence_verify", "defence_traps", "runcheck")


def _defence_meta(on: bool, info: dict, rows: list, agg: dict) -> dict:
    """The defence's state and cost: seconds in total and per row, by phase."""
    n = max(1, sum(r.time_ms is not None for r in rows))
    cost = {k: round(agg.get(k, 0.0), 3) for k in DEFENCE_PHASES}
    return {"on": on, "runcheck": info.get("runcheck", "unknown"), "cost_s": cost,
            "cost_per_timed_row_s": round(sum(cost.values()) / n, 3)}


def note_baselines(seen: dict, reply: dict) -> None:
    """Fold one scenario's baselines into the run's meta "baselines_ran": per baseline name, its
    version string, where it was loaded from ("from": file paths), and how many rows it passed or
    was skipped/failed on, so a run records exactly which baselines took part."""
    for name, b in (reply.get("baselines") or {}).items():
        rec = seen.setdefault(name, {"version": "", "passed": 0, "other": 0})
        rec["version"] = rec["version"] or str(b.get("version") or "")
        if b.get("from") and not rec.get("from"):
            rec["from"] = str(b["from"])               # the file(s) it was loaded from
        rec["passed" if b.get("status") == "passed" else "other"] += 1


def _build_hook(confine: bool):
    """build.build's `confine` hook for a confined evaluation (None otherwise); requires bubblewrap."""
    if not confine:
        return None
    from .confine import confined_nvcc, require
    require("a confined evaluation")
    return confined_nvcc


def _progress(items, on: bool):
    if not on:
        return items
    try:
        from tqdm import tqdm
        return tqdm(items, unit="scenario", file=sys.stderr, dynamic_ncols=True)
    except ImportError:
        return items
