"""The header of each adversarial kernel, parsed, and the rule that says whether a run met it.

Every tests/adversarial/*.cu starts with comment lines
    // TRICK: what the kernel does to cheat (free text, may continue on following // lines);
    //        "none: ..." marks an honest kernel, whose rows must pass unflagged
    // EXPECT: status=<passed|failed|error|timeout|refused>[, reason contains "<text>[|<alt>...]"]
    //         [, where="<substring>"] [, scenarios="<filter>"] [, timeout=<seconds>]
    // HOLE: (optional) a hole in the guards this kernel slips through today, and the fix
`where`: only rows whose scenario name contains it must have the status; every other row must
pass (a kernel that is right on common shapes). `scenarios`: the run is limited to these
(evaluate's filter), for kernels whose every scenario costs a worker (a fault, a hang).
`timeout`: seconds per scenario for this kernel's run (default: the test's).
A HOLE kernel that passes today is reported as an expected failure, never as a success.

Used by tests/unit/test_adversarial_cpu.py (headers, the matching rule on synthetic rows, the
recorded results) and tests/gpu/test_adversarial_gpu.py (the real run). Loaded by path.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

ADV_DIR = Path(__file__).resolve().parent
REPO = ADV_DIR.parent.parent
GRID = ADV_DIR / "grid.yaml"
STATUSES = ("passed", "failed", "error", "timeout", "refused")
# Reasons only the checks after the timing loop give: such kernels must be timed alone.
TIMING_GUARDS = ("stale or skipped work", "work escapes the timed stream", "CUDA-graph replay")

_TAG = re.compile(r"^//\s*(TRICK|EXPECT|HOLE|CLOSED):\s*(.*)$")
_STATUS = re.compile(r"\bstatus=(\w+)")
_REASON = re.compile(r'\breason contains "([^"]*)"')
_WHERE = re.compile(r'\bwhere="([^"]*)"')
_SCEN = re.compile(r'\bscenarios="([^"]*)"')
_TIMEOUT = re.compile(r"\btimeout=(\d+(?:\.\d+)?)")


@dataclass
class Expect:
    name: str                      # the file's stem
    path: Path
    trick: str
    status: str
    reasons: list[str]             # any one of these substrings must be in the reason
    where: str | None = None
    scenarios: str | None = None
    timeout_s: float | None = None
    hole: str = ""
    honest: bool = False           # an honest kernel (TRICK: none ...): passes, never flagged

    @property
    def runtime_refusal(self) -> bool:
        """Refused by the run-time code check (runcheck.py), which no static check can replace."""
        return self.status == "refused" and any("run-time check" in r for r in self.reasons)

    @property
    def decided_before_timing(self) -> bool:
        """Every row's verdict comes before any timing: safe to run beside other such kernels.
        A HOLE kernel is not (today it may get through to timing)."""
        if self.hole:
            return False
        if self.status in ("refused", "error", "timeout"):
            return True
        return (self.status == "failed" and self.where is None
                and not any(g in r for r in self.reasons for g in TIMING_GUARDS))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["path"] = str(self.path.relative_to(REPO)) if self.path.is_relative_to(REPO) else str(self.path)
        return d


def _block(lines: list[str], tag: str) -> str:
    """The text of a `// TAG:` line and the untagged `//` lines that continue it."""
    out, on = [], False
    for ln in lines:
        s = ln.strip()
        m = _TAG.match(s)
        if m:
            on = m.group(1) == tag
            if on:
                out.append(m.group(2).strip())
            continue
        if on and s.startswith("//"):
            out.append(s[2:].strip())
        else:
            on = False
    return " ".join(x for x in out if x)


def parse(path: str | Path) -> Expect:
    """The Expect of one kernel file; ValueError naming the file when the header is incomplete."""
    path = Path(path)
    lines = path.read_text().splitlines()
    head = []
    for ln in lines:                      # the leading comment block
        if ln.strip().startswith("//") or not ln.strip():
            head.append(ln)
        else:
            break
    trick, expect, hole = (_block(head, t) for t in ("TRICK", "EXPECT", "HOLE"))
    if not trick:
        raise ValueError(f"{path.name}: no '// TRICK:' comment in the leading comment block")
    if not expect:
        raise ValueError(f"{path.name}: no '// EXPECT:' comment in the leading comment block")
    m = _STATUS.search(expect)
    if not m or m.group(1) not in STATUSES:
        raise ValueError(f"{path.name}: EXPECT needs status=<{'|'.join(STATUSES)}>, got {expect!r}")
    status = m.group(1)
    r = _REASON.search(expect)
    reasons = [x for x in r.group(1).split("|") if x] if r else []
    if status != "passed" and not reasons:
        raise ValueError(f"{path.name}: EXPECT status={status} needs reason contains \"...\"")
    w, sc, t = _WHERE.search(expect), _SCEN.search(expect), _TIMEOUT.search(expect)
    return Expect(name=path.stem, path=path, trick=trick, status=status, reasons=reasons,
                  where=w.group(1) if w else None, scenarios=sc.group(1) if sc else None,
                  timeout_s=float(t.group(1)) if t else None, hole=hole,
                  honest=status == "passed" and trick.lower().startswith("none"))


def kernel_files() -> list[Path]:
    return sorted(ADV_DIR.glob("*.cu"))


def honest(path: str | Path) -> Expect:
    """The expectation of an honest reference kernel (kernels/naive_fwd.cu and the like)."""
    path = Path(path)
    return Expect(name=path.stem, path=path, trick="none (honest reference kernel)", status="passed",
                  reasons=[], honest=True)


def _get(row, key, default=None):
    return row.get(key, default) if isinstance(row, dict) else getattr(row, key, default)


def expected_status(exp: Expect, scenario: str) -> str:
    if exp.where is not None and exp.where not in scenario:
        return "passed"
    return exp.status


def problems(exp: Expect, rows: list) -> list[str]:
    """What is wrong with a run's rows (results.Row or dicts) for this expectation; [] = as expected.

    A row expected to pass must pass and carry a timing; an honest reference kernel's rows must
    also not be suspicious. A row expected to be refused/failed/... must have that status and a
    reason containing one of the expected substrings.
    """
    out = []
    if not rows:
        return [f"{exp.name}: no rows"]
    if exp.where is not None and not any(exp.where in _get(r, "scenario", "") for r in rows):
        out.append(f"{exp.name}: no scenario matches where={exp.where!r}: the expectation was never exercised")
    for r in rows:
        scen, status, reason = _get(r, "scenario", "?"), _get(r, "status", "?"), _get(r, "reason", "") or ""
        want = expected_status(exp, scen)
        if status != want:
            out.append(f"{exp.name} / {scen}: status {status!r}, expected {want!r} (reason: {reason[:300]})")
            continue
        if want == "passed":
            if _get(r, "time_ms") is None:
                out.append(f"{exp.name} / {scen}: passed but was not timed")
            if exp.honest and _get(r, "suspicious"):
                out.append(f"{exp.name} / {scen}: honest kernel flagged suspicious: {_get(r, 'suspicious_reason', '')}")
        elif not any(x in reason for x in exp.reasons):
            out.append(f"{exp.name} / {scen}: status {status!r} as expected but the reason does not contain "
                       f"{' or '.join(map(repr, exp.reasons))}: {reason[:300]}")
    return out


def slips_through(exp: Expect, rows: list) -> bool:
    """A HOLE kernel that the harness lets through today: every row it should fail passed."""
    return bool(exp.hole) and bool(rows) and all(
        _get(r, "status") == "passed" for r in rows if expected_status(exp, _get(r, "scenario", "")) != "passed")
