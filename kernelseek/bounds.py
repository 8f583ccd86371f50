"""Roofline bounds: the GPU's measured ceilings, each scenario's bound and the speed-of-light score.

Ceilings (`kernelseek ceilings`) are measured with torch on the GPU and written to
data/ceilings/<gpu name slug>.json (format: data/ceilings/README.md). Per scenario:
    t_compute_ms = flops / (matrix rate of the scenario's dtype)     fp8 -> the fp8 rate
    t_memory_ms  = min_bytes / read bandwidth                          (read, not copy: attention
                   reads far more than it writes, and the read rate is the higher of the two)
    bound_ms     = max(t_compute_ms, t_memory_ms); `binds` names the larger
    sol_*        = bound_ms / measured ms (1.0 = at the ceiling; the speed-of-light score)
    outside_*_ms = per-call ms - kernel ms (the harness's time_ms and kernel_ms, and the baseline's)

    kernelseek ceilings [--quick] [--device 0]
    kernelseek bounds RUN_DIR [--ceilings FILE]
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pandas as pd

from kernelseek.paths import CEILINGS
from kernelseek.rows import as_rows

CEILINGS_DIR = Path(os.environ.get("KSEEK_CEILINGS_DIR", CEILINGS))
FALLBACK_GPU = "NVIDIA_H200"
RATE_KEY = {"bf16": "bf16_tflops", "fp16": "fp16_tflops", "fp8": "fp8_tflops"}


def gpu_slug(name: str) -> str:
    """'NVIDIA H200' -> 'NVIDIA_H200': each character not a letter or digit becomes '_' (as evaluate.py)."""
    return "".join(c if c.isalnum() else "_" for c in name)


# ---- measurement (GPU) -------------------------------------------------------------------------
def _events_ms(fn, reps: int, inner: int = 1) -> float:
    """Median over `reps` of the event-timed ms of `inner` back-to-back calls, divided by inner."""
    import torch
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    return statistics.median(ts)


def _matmul_tflops(dtype, n: int, reps: int, dev) -> float:
    import torch
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(3):
        a @ b
    ms = _events_ms(lambda: a @ b, reps)
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def _fp8_tflops(n: int, reps: int, dev) -> tuple[float | None, str]:
    import torch
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return None, f"torch {torch.__version__} has no float8_e4m3fn or _scaled_mm"
    try:
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()   # column-major, as cuBLASLt wants
        one = torch.ones((), device=dev, dtype=torch.float32)
        f = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        for _ in range(3):
            f()
        ms = _events_ms(f, reps)
        return 2.0 * n ** 3 / (ms * 1e-3) / 1e12, "torch._scaled_mm e4m3 x e4m3 -> bf16"
    except Exception as e:  # no fp8 GEMM on this GPU or build
        return None, f"torch._scaled_mm failed: {type(e).__name__}: {str(e)[:200]}"


def _bandwidth_gbps(gib: int, reps: int, dev) -> tuple[float, float]:
    """Read: a sum over `gib` GiB of fp32 (one scalar written). Copy: device to device of gib/2
    GiB, counting bytes read + bytes written. Both in GB/s (1e9 B/s)."""
    import torch
    x = torch.rand(gib * 2 ** 28, device=dev, dtype=torch.float32)
    x.sum()
    read = x.numel() * 4 / (_events_ms(lambda: x.sum(), reps) * 1e-3) / 1e9
    x = None                                   # free the 4 GiB before the copy's 4 GiB
    src = torch.rand(gib * 2 ** 27, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)
    copy = 2 * src.numel() * 4 / (_events_ms(lambda: dst.copy_(src), reps) * 1e-3) / 1e9
    return read, copy


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def measure_ceilings(device: int = 0, quick: bool = False) -> dict[str, Any]:
    """Matrix rates (TFLOP/s), read and copy bandwidth (GB/s = 1e9 B/s), launch overhead (us).
    The read ceiling is streamread.best_read_gbps: a streaming-read kernel swept to its best, and
    torch's reductions; these are information (SOL), the fail lines are the datasheet's (peaks.py).

    Full: 8192^3 matmuls, a 4 GiB fp32 sum, a 2 GiB + 2 GiB copy. Quick: 4096^3 and 1 GiB (a
    smoke test, not a ceiling to commit). Random data throughout (zeros would flatter power).
    """
    import torch
    dev = torch.device("cuda", device)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    n, reps = (4096, 10) if quick else (8192, 30)
    gib = 1 if quick else 4
    out: dict[str, Any] = {
        "gpu": props.name, "slug": gpu_slug(props.name), "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2 ** 30, 1), "driver": _driver(),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quick": quick,
    }
    out["bf16_tflops"] = _matmul_tflops(torch.bfloat16, n, reps, dev)
    out["fp16_tflops"] = _matmul_tflops(torch.float16, n, reps, dev)
    out["fp8_tflops"], out["fp8_note"] = _fp8_tflops(n, reps, dev)
    _, out["copy_gbps"] = _bandwidth_gbps(gib, reps, dev)
    from .streamread import best_read_gbps     # the read ceiling: a streaming kernel at its best
    out["read_gbps"], read_how, out["read_sweep"] = best_read_gbps(gib, reps, device)
    # launch: a one-element add, many back to back, per launch in microseconds: events see the rate
    # eager launches reach, the host clock the host's cost, a graph replay the device's floor
    t = torch.zeros(1, device=dev)
    inner = 200 if quick else 1000
    out["launch_us_events"] = _events_ms(lambda: t.add_(1.0), 10, inner) * 1e3
    host = []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(inner):
            t.add_(1.0)
        torch.cuda.synchronize()
        host.append((time.perf_counter() - t0) / inner * 1e6)
    out["launch_us_host"] = statistics.median(host)
    # the same launches replayed from a CUDA graph: the device-side cost per kernel, no host
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        t.add_(1.0)
        with torch.cuda.graph(g, stream=s):
            for _ in range(inner):
                t.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    out["launch_us_graph"] = _events_ms(g.replay, 10) / inner * 1e3
    out["method"] = {
        "matmul": f"{n}^3 randn, median of {reps} event-timed calls, 2*n^3 FLOPs",
        "read": read_how,
        "copy": f"Tensor.copy_ of {gib / 2:g} GiB, read + write bytes, median of {reps}",
        "launch": f"{inner} back-to-back 1-element add_; median of 10 (events, host perf_counter, graph replay)",
    }
    return out


def save_ceilings(c: dict, root: str | Path = CEILINGS_DIR) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    p = root / f"{c.get('slug') or gpu_slug(c['gpu'])}.json"
    p.write_text(json.dumps(c, indent=1) + "\n")
    return p


def load_ceilings(gpu: str | None = None, path: str | Path | None = None, root: str | Path = CEILINGS_DIR) -> dict:
    """A ceilings file: `path`, else <root>/<slug of gpu>.json, else <root>/NVIDIA_H200.json."""
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such ceilings file")
        return _read_ceilings(p)
    root = Path(root)
    tried = []
    for slug in ([gpu_slug(gpu)] if gpu else []) + [FALLBACK_GPU]:
        p = root / f"{slug}.json"
        tried.append(str(p))
        if p.exists():
            return _read_ceilings(p)
    raise FileNotFoundError(f"no ceilings file: tried {', '.join(tried)}; run `kernelseek ceilings` on "
                            f"that GPU (see data/ceilings/README.md) or pass --ceilings FILE")


def _read_ceilings(p: Path) -> dict:
    """A ceilings file's object; ValueError naming the file when it is not JSON or not an object
    whose rates are numbers."""
    try:
        c = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a ceilings JSON file ({e})") from None
    if not isinstance(c, dict):
        raise ValueError(f"{p}: not a ceilings file (expected an object of rates)")
    bad = [k for k, v in c.items() if (k.endswith(("_tflops", "_gbps")) or k.startswith("launch_us"))
           and not isinstance(v, (int, float))]
    if bad:
        raise ValueError(f"{p}: field '{bad[0]}' is {c[bad[0]]!r}, expected a number")
    return c


# ---- per scenario ------------------------------------------------------------------------------
def _gpu_name(meta: dict) -> str | None:
    """The GPU of a run: meta['env']['gpu'] (what evaluate writes), else meta['gpu']."""
    for g in ((meta.get("env") or {}).get("gpu"), meta.get("gpu")):
        if isinstance(g, dict):
            g = g.get("name")
        if isinstance(g, str) and g:
            return g
    return None


def _grid_counts(meta: dict) -> dict[str, tuple[float, float, dict]]:
    """name -> (flops, min_bytes, features) from the grid named in meta['grid'] (fallback only)."""
    if not meta.get("grid"):
        return {}
    try:
        from kernelseek.scenarios import load_grid
        return {s.name: (s.flops(), s.min_bytes(), s.features()) for s in load_grid(meta["grid"])}
    except Exception:
        return {}


def _num(x) -> float:
    return float(x) if x is not None and not (isinstance(x, float) and math.isnan(x)) else float("nan")


def bounds_table(table: Any, ceilings: dict, meta: dict | None = None) -> pd.DataFrame:
    """One line per row: flops, bytes, t_compute_ms, t_memory_ms, binds, sol and outside-kernel ms."""
    rows = as_rows(table)
    grid = None
    recs = []
    for r in rows:
        flops, nbytes, feats = r.flops, r.min_bytes, r.features or {}
        if flops is None or nbytes is None or not feats.get("dtype"):
            grid = _grid_counts(meta or {}) if grid is None else grid
            g = grid.get(r.scenario)
            if g:
                flops = flops if flops is not None else g[0]
                nbytes = nbytes if nbytes is not None else g[1]
                feats = feats if feats.get("dtype") else g[2]
        dtype = feats.get("dtype", "bf16")
        rate = ceilings.get(RATE_KEY.get(dtype, "bf16_tflops"))
        t_c = _num(flops) / (rate * 1e12) * 1e3 if rate else float("nan")
        t_m = _num(nbytes) / (ceilings["read_gbps"] * 1e9) * 1e3
        if math.isnan(t_c) or math.isnan(t_m):   # a count or a ceiling missing: no bound
            bound, binds = float("nan"), "?"
        else:
            bound, binds = (t_c, "compute") if t_c >= t_m else (t_m, "memory")
        cand = _num(r.time_ms) if r.status == "passed" else float("nan")
        base = _num(r.baseline_ms) if r.baseline_status == "passed" else float("nan")
        recs.append({
            "scenario": r.scenario, "row": r.row, "dtype": dtype, "status": r.status,
            "flops": _num(flops), "bytes": _num(nbytes),
            "t_compute_ms": t_c, "t_memory_ms": t_m, "bound_ms": bound, "binds": binds,
            "time_ms": cand, "baseline_ms": base,
            "sol_candidate": bound / cand if cand > 0 else float("nan"),
            "sol_baseline": bound / base if base > 0 else float("nan"),
            "outside_candidate_ms": cand - _num(r.kernel_ms),
            "outside_baseline_ms": base - _num(r.baseline_kernel_ms),
            "host_ms": _num(r.host_ms), "baseline_host_ms": _num(r.baseline_host_ms),
        })
    return pd.DataFrame(recs)


def format_bounds(df: pd.DataFrame, ceilings: dict | None = None) -> str:
    hdr = (f"{'#':>3} {'scenario':34} {'GFLOP':>8} {'MB':>8} {'t_comp':>8} {'t_mem':>8} {'binds':7} "
           f"{'ms':>8} {'SOL':>6} {'base ms':>8} {'SOLb':>6} {'out ms':>7} {'out b':>7}")
    lines = []
    if ceilings:
        fp8 = ceilings.get("fp8_tflops")
        lines.append(f"ceilings {ceilings.get('gpu')}: bf16 {ceilings['bf16_tflops']:.0f}  fp16 "
                     f"{ceilings['fp16_tflops']:.0f}  fp8 {f'{fp8:.0f}' if fp8 else 'n/a'} TFLOP/s  read "
                     f"{ceilings['read_gbps']:.0f} GB/s  ({ceilings.get('date', '?')})")
    lines += [hdr, "-" * len(hdr)]

    def f(x, fmt):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)
    for _, r in df.iterrows():
        lines.append(f"{(r.row if r.row is not None and not pd.isna(r.row) else ''):>3} {r.scenario[:34]:34} "
                     f"{f(r.flops / 1e9, '8.1f')} {f(r.bytes / 1e6, '8.1f')} {f(r.t_compute_ms, '8.4f')} "
                     f"{f(r.t_memory_ms, '8.4f')} {r.binds:7} {f(r.time_ms, '8.4f')} {f(r.sol_candidate, '6.3f')} "
                     f"{f(r.baseline_ms, '8.4f')} {f(r.sol_baseline, '6.3f')} {f(r.outside_candidate_ms, '7.4f')} "
                     f"{f(r.outside_baseline_ms, '7.4f')}")
    return "\n".join(lines + bounds_notes(df))


def bounds_notes(df: pd.DataFrame) -> list[str]:
    """The footnote printed under format_bounds: the columns, and what a negative `out` means."""
    notes = ["columns: GFLOP, MB = the row's FLOPs and minimum bytes; t_comp, t_mem = ms those take at the "
             "measured matrix rate and read bandwidth; binds = the larger of the two (compute or memory), the "
             "bound; ms, base ms = ours and the baseline's time per call; SOL, SOLb = bound / ms for ours and "
             "the baseline (speed of light: 1.0 is at the measured ceiling); out ms, out b = time per call minus "
             "the profiler's kernel time, ours and the baseline's (launch and host work outside the kernel)."]
    neg = [str(int(r.row)) if r.row is not None and not pd.isna(r.row) else r.scenario
           for r in df.itertuples() if (r.outside_candidate_ms or 0) < 0 or (r.outside_baseline_ms or 0) < 0]
    if neg:
        notes.append(f"negative out ms / out b (rows {', '.join(neg)}): the profiler's kernel time, taken in a "
                     "separate pass, came out longer than the per-call median; read them as ~0 (within the "
                     "spread between the two passes), not as time saved.")
    return [textwrap.fill(n, 115, subsequent_indent="  ") for n in notes]
