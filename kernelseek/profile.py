"""Nsight Compute on one command: run it, read its report, summarize each kernel.

ncu: `run_ncu(cmd, out_dir)` profiles with `--clock-control none` (the clocks the harness times
under), keeps ncu's stdout verbatim, exports `profile.ncu-rep`, and reads it back through
`ncu_report` (ncu's extras/python) or, failing that, `ncu --import --csv --page raw`. Files in
out_dir: ncu_stdout.txt, profile.ncu-rep, raw.csv, details.txt, metrics.csv.
SASS and PTX instruction mixes are in sass.py; their names (and cudatools.find_tool) stay
importable from here, as notebooks and tests use them.

    kernelseek profile [--out DIR] [--section S]... [--kernel REGEX] -- python -m ... --one ...
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from kernelseek.cudatools import find_tool, need_tool  # noqa: F401 (find_tool: importable from here)
from kernelseek.sass import (FAMILIES, instruction_mix, mix_diff, ptx, ptx_mix, ptxas_table,  # noqa: F401
                             sass, split_kernels)

DEFAULT_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats",
                    "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis")


def ncu_report_dir(ncu: str | None = None) -> Path | None:
    """The directory holding ncu's `ncu_report.py` (extras/python), or None."""
    ncu = ncu or find_tool("ncu")
    if not ncu:
        return None
    real = Path(os.path.realpath(ncu)).parent    # /usr/local/cuda/bin/ncu may be a wrapper script
    cands = [real / "extras" / "python", *sorted(real.parent.glob("nsight-compute*/extras/python"), reverse=True),
             *sorted(Path("/opt/nvidia/nsight-compute").glob("*/extras/python"), reverse=True)]
    return next((d for d in cands if (d / "ncu_report.py").exists()), None)


# ---- ncu ---------------------------------------------------------------------------------------
@dataclass
class ProfileResult:
    returncode: int
    command: list[str]                  # the ncu argv
    out_dir: Path
    rep: Path | None                    # profile.ncu-rep, if written
    stdout: str                         # ncu's stdout and stderr, verbatim
    table: pd.DataFrame = field(default_factory=pd.DataFrame)   # one row per profiled launch
    source: str = ""                    # "ncu_report" or "csv"
    summary: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and len(self.table) > 0


def run_ncu(cmd: list[str], out_dir: str | Path, sections=DEFAULT_SECTIONS, kernel_regex: str | None = None,
            launch_count: int = 1, launch_skip: int = 0, timeout_s: float = 600) -> ProfileResult:
    """Profile `cmd` under ncu; write the report, verbatim outputs and the parsed table."""
    ncu = need_tool("ncu")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = out / "profile.ncu-rep"
    rep.unlink(missing_ok=True)              # never read a stale report from an earlier run
    argv = [ncu, "--clock-control", "none", "--target-processes", "all", "-f", "-o", str(out / "profile"),
            "--launch-count", str(launch_count), "--launch-skip", str(launch_skip)]
    for s in sections:
        argv += ["--section", s]
    if kernel_regex:
        argv += ["--kernel-name", f"regex:{kernel_regex}"]
    argv += list(cmd)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        rc, text = p.returncode, p.stdout + (("\n--- stderr ---\n" + p.stderr) if p.stderr else "")
    except subprocess.TimeoutExpired as e:
        partial = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, text = 124, f"{partial}\n--- timed out after {timeout_s} s ---"
    (out / "ncu_stdout.txt").write_text(text)
    res = ProfileResult(rc, argv, out, rep if rep.exists() else None, text)
    if res.rep:
        res.table, res.source = read_report(res.rep, out)
        res.table.to_csv(out / "metrics.csv", index=False)
        res.summary = summarize_ncu(res.table)
    return res


def read_report(rep: str | Path, out_dir: str | Path | None = None) -> tuple[pd.DataFrame, str]:
    """The raw page of a .ncu-rep as a table: through ncu_report, else `ncu --import --csv`.

    With out_dir, the raw CSV and the details page are written there verbatim.
    """
    ncu = find_tool("ncu")
    if ncu and out_dir is not None:
        for page, name, extra in (("raw", "raw.csv", ["--csv"]), ("details", "details.txt", [])):
            p = subprocess.run([ncu, "--import", str(rep), "--page", page, *extra], capture_output=True, text=True)
            Path(out_dir, name).write_text(p.stdout + p.stderr)
    pydir = ncu_report_dir(ncu)
    if pydir is not None:
        try:
            return _table_from_ncu_report(pydir, rep), "ncu_report"
        except (RuntimeError, ValueError):   # the reader crashed or does not match: use the CSV
            pass
    raw = Path(out_dir, "raw.csv") if out_dir is not None else None
    if raw is None or not raw.exists():
        p = subprocess.run([need_tool("ncu"), "--import", str(rep), "--page", "raw", "--csv"], capture_output=True, text=True)
        text = p.stdout
    else:
        text = raw.read_text()
    return parse_ncu_csv(text), "csv"


# Run in a child process: ncu_report's extension crashes (SIGSEGV) in a process that has torch loaded.
_READER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import ncu_report
ctx = ncu_report.load_report(sys.argv[2])
recs, units = [], {}
for ri in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(ri)
    for ai in range(rng.num_actions()):
        act = rng.action_by_idx(ai)
        rec = {"ID": str(len(recs)), "Kernel Name": act.name()}
        for name in act.metric_names():
            m = act.metric_by_name(name)
            units[name] = m.unit()
            try:
                v = m.value()
            except Exception:
                v = m.as_string()
            rec[name] = v if isinstance(v, (int, float, str)) or v is None else str(v)
        recs.append(rec)
json.dump({"rows": recs, "units": units}, sys.stdout)
"""


def _table_from_ncu_report(pydir: Path, rep) -> pd.DataFrame:
    """The report's metrics through ncu_report (ncu's Python reader), one row per profiled launch."""
    p = subprocess.run([sys.executable, "-c", _READER, str(pydir), str(rep)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"ncu_report reader exited {p.returncode}: {p.stderr.strip()[-400:]}")
    doc = json.loads(p.stdout)
    df = pd.DataFrame(doc["rows"])
    df.attrs["units"] = doc["units"]
    return df


def _number(s: str):
    t = s.strip()
    if not t:
        return None
    try:
        return float(t.replace(",", "")) if re.fullmatch(r"[-+]?[\d,]*\.?\d+(e[-+]?\d+)?", t, re.I) else t
    except ValueError:
        return t


def parse_ncu_csv(text: str) -> pd.DataFrame:
    """`ncu --csv --page raw` (wide: metric columns, a units row) or the details page (long:
    Metric Name / Metric Unit / Metric Value) -> one row per launch, metric columns.

    Lines before the header (==PROF== lines, program output) are skipped; numbers lose their
    thousands separators; units are in df.attrs['units'].
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("not ncu CSV output: no header line starting with \"ID\"")
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(body))))
    hdr, data = rows[0], rows[1:]
    units: dict[str, str] = {}
    if "Metric Name" in hdr and "Metric Value" in hdr:    # long form
        ki, ni, ui, vi = (hdr.index(c) for c in ("ID", "Metric Name", "Metric Unit", "Metric Value"))
        keep = [c for c in ("Kernel Name", "Block Size", "Grid Size", "Device", "CC") if c in hdr]
        recs: dict[str, dict] = {}
        for r in data:
            if len(r) <= vi or not r[ni]:
                continue
            rec = recs.setdefault(r[ki], {"ID": r[ki], **{c: r[hdr.index(c)] for c in keep}})
            rec[r[ni]] = _number(r[vi])
            units[r[ni]] = r[ui] if ui < len(r) else ""
        df = pd.DataFrame(list(recs.values()))
    else:                                                 # raw page, wide
        if data and data[0] and data[0][0] == "":         # the units row
            units = {h: u for h, u in zip(hdr, data[0]) if u}
            data = data[1:]
        text_cols = {"ID", "Process Name", "Host Name", "Kernel Name", "Block Size", "Grid Size", "Device", "CC"}
        df = pd.DataFrame([{h: (v if h in text_cols else _number(v)) for h, v in zip(hdr, r)} for r in data])
    df.attrs["units"] = units
    return df


# metric -> candidate columns, first found wins (raw names, then the details page's display names)
_KEYS = {
    "duration": ["gpu__time_duration.sum", "Duration"],
    "cycles": ["sm__cycles_elapsed.avg", "gpc__cycles_elapsed.max", "Elapsed Cycles"],
    "sm_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput"],
    "dram_pct": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"],
    "memory_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput"],
    "occupancy_achieved_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"],
    "occupancy_theoretical_pct": ["sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy"],
    "registers": ["launch__registers_per_thread", "Registers Per Thread"],
}
_TIME_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}
_TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"   # all tensor pipes, Hopper
_STALL = re.compile(r"issue_stalled_([a-z0-9_]+?)(?:_per_(?:issue_active|warp_active|inst_executed))?\.(ratio|pct)$")


def summarize_ncu(table: pd.DataFrame) -> list[dict]:
    """Per launch: duration_ms, cycles, sm_clock_ghz (cycles over wall time: with clock control off
    a slower run may be a slower clock), SM/DRAM/memory throughput %, occupancy, registers, the
    top warp stall reasons and tensor pipe utilization %. Missing metrics are None."""
    units = table.attrs.get("units", {})
    out = []
    for _, r in table.iterrows():
        s: dict[str, Any] = {"kernel": r.get("Kernel Name")}
        cols = {}
        for key, names in _KEYS.items():
            cols[key] = next((n for n in names if n in r.index and isinstance(r[n], (int, float)) and not pd.isna(r[n])), None)
            s[key] = float(r[cols[key]]) if cols[key] else None
        dur = s.pop("duration")
        s["duration_ms"] = dur * _TIME_MS.get(units.get(cols["duration"], "nsecond").lower(), 1e-6) if dur is not None else None
        s["sm_clock_ghz"] = s["cycles"] / (s["duration_ms"] * 1e6) if s["cycles"] and s["duration_ms"] else None
        stalls: dict[str, float] = {}
        for c in r.index:
            m = _STALL.search(str(c))
            if m and isinstance(r[c], (int, float)) and not pd.isna(r[c]) and m.group(1) != "not_issued":
                stalls.setdefault(m.group(1), float(r[c]))
        s["top_stalls"] = sorted(stalls.items(), key=lambda kv: -kv[1])[:5]
        tensor = {c: float(r[c]) for c in r.index if "pipe_tensor" in str(c) and ".avg.pct" in str(c)
                  and isinstance(r[c], (int, float)) and not pd.isna(r[c])}
        s["tensor_pipe_pct"] = tensor.get(_TENSOR, max(tensor.values()) if tensor else None)
        s["tensor_metrics"] = tensor
        out.append(s)
    return out


def format_summary(summary: list[dict]) -> str:
    def f(x, fmt):
        return "-" if x is None else format(x, fmt)
    lines = []
    for s in summary:
        lines.append(f"{str(s['kernel'])[:90]}\n  {f(s['duration_ms'], '.4f')} ms  {f(s['cycles'], '.0f')} cycles  "
                     f"clock {f(s['sm_clock_ghz'], '.3f')} GHz  SM {f(s['sm_pct'], '.1f')}%  DRAM {f(s['dram_pct'], '.1f')}%  "
                     f"mem {f(s['memory_pct'], '.1f')}%  occupancy {f(s['occupancy_achieved_pct'], '.1f')}% of "
                     f"{f(s['occupancy_theoretical_pct'], '.1f')}%  regs {f(s['registers'], '.0f')}  tensor pipe "
                     f"{f(s['tensor_pipe_pct'], '.1f')}%\n  stalls: " + ", ".join(f"{k} {v:.2f}" for k, v in s["top_stalls"]))
    return "\n".join(lines)
