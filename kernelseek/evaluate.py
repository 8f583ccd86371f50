"""`kernelseek eval`: a grid through build -> constraints -> worker (check, time) -> results.

    kernelseek eval kernels/naive_fwd.cu --grid bench26 --baseline best
    kernelseek eval kernels/naive_fwd.cu --grid hopper --check-only
    kernelseek eval kernels/fa3_hopper --grid bench26 --define KSEEK_FA3_BN=64   (a folder; a build variant)

Each scenario runs in the worker (a child process owning the GPU); the parent turns replies into
rows, derives speedup and rates, flags suspicious results, and writes the run directory
(results.json, meta.json, build/). Exit codes are listed in `kernelseek --help` (cli.EXIT_CODES).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import results as R
from .scenarios import Scenario, load_grid, select

REPO = Path(__file__).resolve().parent.parent
SUSPICIOUS_SPEEDUP = 1.6     # above this against the best baseline, a row is flagged for review
SUSPICIOUS_MIN_BASE_KERNEL_MS = 0.02  # below this the baseline's kernels are launch- and tile-bound:
                                      # a gain there says nothing about skipped work


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


def load_ceilings(gpu: str | None) -> dict | None:
    """The committed ceilings for exactly this GPU (data/ceilings/<slug>.json), if measured."""
    from .bounds import gpu_slug, load_ceilings as _load
    if not gpu:
        return None
    try:
        c = _load(gpu)
    except FileNotFoundError:
        return None
    return c if c.get("slug", gpu_slug(c.get("gpu", ""))) == gpu_slug(gpu) else None


def make_row(s: Scenario, grid: str, reply: dict, ceilings: dict | None = None) -> R.Row:
    """A results row from a worker reply: winner, speedup, rates, suspicious flag."""
    row = R.Row(scenario=s.name, row=s.row, grid=grid, features=s.features(), flops=s.flops(),
                min_bytes=s.min_bytes())
    row.status = reply.get("status", "error")
    row.reason = reply.get("reason", "")
    for k in ("max_err", "ref_err", "err_bound", "err_ratio", "lse_err", "time_ms", "time_p10_ms",
              "time_p90_ms", "kernel_ms", "host_ms", "sync_ms"):
        setattr(row, k, reply.get(k))
    bl = reply.get("baselines") or {}
    row.baselines = bl
    timed = {n: b for n, b in bl.items() if b.get("status") == "passed" and b.get("time_ms")}
    stand = {n: b for n, b in timed.items() if "standin" in n}
    real = {n: b for n, b in timed.items() if n not in stand}
    if stand:
        n, b = min(stand.items(), key=lambda kv: kv[1]["time_ms"])
        row.stand_in = {"name": n, "time_ms": b["time_ms"], "note": "dense K/V already gathered: not the same work"}
    if real:
        n, b = min(real.items(), key=lambda kv: kv[1]["time_ms"])
        row.baseline, row.baseline_version, row.baseline_status = n, b.get("version"), "passed"
        row.baseline_ms, row.baseline_kernel_ms, row.baseline_host_ms = b["time_ms"], b.get("kernel_ms"), b.get("host_ms")
        row.baseline_tflops = row.flops / (b["time_ms"] * 1e-3) / 1e12
    else:
        why = "; ".join(f"{n}: {b.get('status')} {b.get('reason', '')[:80]}" for n, b in bl.items() if n not in stand)
        skipped = "; ".join(reply.get("baselines_skipped") or [])
        row.baseline_status = "n/a"
        row.baseline_reason = why or skipped or "no baseline computes this scenario"
    if row.status == "passed" and row.time_ms:
        row.tflops = row.flops / (row.time_ms * 1e-3) / 1e12
        row.gbps = row.min_bytes / (row.time_ms * 1e-3) / 1e9
        if row.baseline_ms:
            row.speedup = row.baseline_ms / row.time_ms
        if row.baseline_kernel_ms and row.kernel_ms:
            row.kernel_speedup = row.baseline_kernel_ms / row.kernel_ms   # cycles, not wall-clock
    flags = []
    # A large gain in wall-clock time that device time also shows; a gain only in wall-clock time
    # against a host-bound baseline (tiny shapes, Python dispatch) is reported by kernel_speedup.
    # Tiny shapes, where the baseline's kernels take under SUSPICIOUS_MIN_BASE_KERNEL_MS, are left
    # to the ceiling checks below (a one-block kernel beats a tiled one there honestly).
    tiny = row.baseline_kernel_ms is not None and row.baseline_kernel_ms < SUSPICIOUS_MIN_BASE_KERNEL_MS
    if row.speedup and row.speedup > SUSPICIOUS_SPEEDUP and not tiny and (
            row.kernel_speedup is None or row.kernel_speedup > SUSPICIOUS_SPEEDUP):
        flags.append(f"speedup {row.speedup:.2f}x above {SUSPICIOUS_SPEEDUP}x")
    if ceilings and row.tflops:
        key = "fp8_tflops" if s.dtype == "fp8" else f"{s.dtype}_tflops"
        peak = ceilings.get(key)
        if peak and row.tflops > peak:
            flags.append(f"{row.tflops:.0f} TFLOP/s above the measured {key} ceiling {peak:.0f}")
        bw = ceilings.get("read_gbps") or ceilings.get("copy_gbps")
        if bw and row.gbps and row.gbps > bw * 1.02:
            flags.append(f"{row.gbps:.0f} GB/s above the measured bandwidth ceiling {bw:.0f}")
    row.suspicious = bool(flags)
    row.suspicious_reason = "; ".join(flags)
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


def _start_meta(seed: int) -> dict:
    """The run's seeds, revision, host, start time and KSEEK_* environment (meta fields)."""
    return {"seed": seed, "seeds": {"check": seed, "timing_sets": f"{seed}+1.."}, "git_rev": git_revision(),
            "host": socket.gethostname(), "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # KSEEK_* settings the worker (or, in runs before build variants, the kernel) read
            "kseek_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("KSEEK_")}}


def evaluate(kernel: str, grid: str, baseline: str = "best", scenarios: str | None = None,
             check_only: bool = False, seed: int | None = None, timeout_s: float = 300.0, budget_s: float = 0.4,
             runs_dir: str = "runs", arch: str = "sm_90a", progress: bool = True, worker_cmd=None,
             command: str = "", defines: dict | None = None, confine: bool = False) -> tuple[Path, list[R.Row], dict]:
    """Run one evaluation of the kernel (a .cu file or a kernel folder) built with `defines`
    (NAME -> VALUE: a build variant); returns (run directory, rows, meta). Never raises for kernel
    faults; a missing kernel, a folder without its entry file or a bad define raise before any run.
    confine: the candidate's build and the worker that loads it run under bubblewrap (see
    kernelseek.confine); results come back over the worker's pipe and this process writes them."""
    from . import build as B
    from . import constraints as C
    t_start = time.perf_counter()
    nvcc_jail = None
    if confine:                            # before anything runs: a clear error, not a silent fallback
        from .confine import confined_nvcc, require
        require("a confined evaluation")
        nvcc_jail = confined_nvcc
    if seed is None:                       # a fresh seed per run: inputs cannot be known in advance
        seed = int.from_bytes(os.urandom(3), "little")
    kpath = Path(kernel)
    B.entry_file(kpath)                    # FileNotFoundError / KernelError (a ValueError) name it
    defines = B.check_defines(defines)
    scen = select(load_grid(grid), scenarios)
    run = R.new_run_dir(runs_dir, kpath.stem)
    (run / "build").mkdir()
    meta = {"command": command or " ".join(map(shlex.quote, sys.argv)), "kernel": kpath.as_posix(),
            "kernel_sha256": B.source_hash(kpath), "build_defines": defines, "grid": grid,
            "baseline": baseline, "scenarios_filter": scenarios, "check_only": check_only, **_start_meta(seed)}
    phases = {"build_s": 0.0, "worker_start_s": 0.0}
    rows: list[R.Row] = []
    so = None
    t = time.perf_counter()
    meta["confined"] = bool(confine)
    br = B.build(kpath, arch=arch, defines=defines, confine=nvcc_jail)
    phases["build_s"] = time.perf_counter() - t
    (run / "build" / "log.txt").write_text(br.log or "")
    (run / "build" / "ptxas.json").write_text(json.dumps(br.ptxas, indent=1))
    meta["build"] = {"ok": br.ok, "cached": br.cached, "flags": br.flags, "seconds": br.seconds}
    refuse = None
    if not br.ok:
        refuse = "build failed: " + (br.log or "").strip()[-400:]
    else:
        cr = C.check_binary(br.so_path)
        cs = C.check_source(kpath)
        reasons = list(cr.reasons) + list(cs.reasons)
        meta["constraints"] = reasons
        if reasons:
            refuse = "constraint check refused the kernel: " + "; ".join(reasons)
        so = str(br.so_path)
    if refuse:
        rows = [R.Row(scenario=s.name, row=s.row, grid=grid, status="refused", reason=refuse,
                      features=s.features(), flops=s.flops(), min_bytes=s.min_bytes()) for s in scen]
        meta["wall_s"] = time.perf_counter() - t_start
        R.save(run, rows, meta)
        (run / "meta.json").write_text(json.dumps(meta, indent=1))
        return run, rows, meta
    w, scratch = _worker(worker_cmd, so, baseline, arch, run / "worker.log", confine)
    t = time.perf_counter()
    info = w.request({"op": "meta"}, timeout=180)
    phases["worker_start_s"] = time.perf_counter() - t
    meta["env"] = info
    ceilings = load_ceilings(info.get("gpu"))
    agg: dict[str, float] = {}
    cpu0 = cpu_times()
    bar = _progress(scen, progress)
    try:
        for s in bar:
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(s.name[:30])
            req = {"op": "scenario", "scenario": s.to_dict(), "kernel_so": so, "baseline": baseline,
                   "seed": seed, "check_only": check_only, "budget_s": budget_s}
            reply = w.request(req, timeout=timeout_s)
            for k, v in (reply.pop("phases_s", None) or {}).items():
                agg[k] = agg.get(k, 0.0) + v
            rows.append(make_row(s, grid, reply, ceilings))
            R.save(run, rows, meta)                      # partial results survive a dead harness
    finally:
        w.close()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    meta["worker_restarts"] = w.restarts
    meta["host_cpu_pct"] = cpu_shares(cpu0, cpu_times())   # while the scenarios ran (steal: VM)
    wall = time.perf_counter() - t_start
    meta["wall_s"] = wall
    meta["phases_s"] = {**phases, **agg}
    meta["harness_overhead_s"] = wall - agg.get("timing", 0.0)
    meta["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    R.save(run, rows, meta)
    (run / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return run, rows, meta


def _worker(worker_cmd, so, baseline: str, arch: str, log_path: Path, confine: bool):
    """The worker (and its scratch folder, confined): plain, or under bubblewrap seeing only the package,
    the candidate library, the prebuilt original:FILE.cu baselines, its scratch and the GPU."""
    from .worker import Worker
    if not confine:
        return Worker(cmd=worker_cmd, log_path=log_path), None
    from . import build as B
    from .baselines import PREBUILT_ENV, original_paths
    from .confine import confined_nvcc, require, worker_jail
    libs, prebuilt, sources = [so], {}, []
    for f in original_paths(baseline):
        r = B.build(f, arch=arch, confine=confined_nvcc)
        if r.ok:
            prebuilt[f] = str(r.so_path)
            libs.append(r.so_path)
            sources.append(Path(f).resolve())
    scratch = tempfile.mkdtemp(prefix="kseek-worker-")
    env = dict(os.environ, **({PREBUILT_ENV: json.dumps(prebuilt)} if prebuilt else {}))
    jail = worker_jail(libs, scratch, env)
    jail.ro += sources
    cmd = jail.argv(worker_cmd or [sys.executable, "-m", "kernelseek.worker"], require("the worker"))
    return Worker(cmd=cmd, env=jail.env, log_path=log_path), scratch


def _progress(items, on: bool):
    if not on:
        return items
    try:
        from tqdm import tqdm
        return tqdm(items, unit="scenario", file=sys.stderr, dynamic_ncols=True)
    except ImportError:
        return items
