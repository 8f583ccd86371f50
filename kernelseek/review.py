"""Reviews of flagged rows: the record that a surprising row was looked at, and why it stands.

A row the harness flags (Row.suspicious: a speedup above evaluate.SUSPICIOUS_SPEEDUP against the
best baseline, in wall-clock and device time) is merely surprising: rows faster than physics are
failed outright (peaks.py). A flagged row never meets a goal silently: goal.judge counts it as NOT
met until a review covers it, and then names the review on the row's line. A review covers a flag
while nothing changed:
  - the same kernel source (meta kernel_sha256), the same scenario, and
  - a speedup at most REVIEW_BAND above the speedup that was reviewed (a larger jump is a new
    question; a smaller speedup is less surprising and stays covered).
The questioner's flag question (triggers.suspicious_gain) fires again only when that changes too:
its signature (flag_signature) is the kernel and the flagged rows' speedup bands.

Reviews are appended, one JSON object a line, to `reviews.jsonl` in the folder that holds the runs:
the run directory's parent (runs/reviews.jsonl), or for a campaign evaluation (campaigns/<id>/
evals/<n>/) the campaign directory. A campaign's evaluations are written outside the agent's
sandbox, and so is this file.
    kernelseek review RUN_DIR --scenario r24_decode_paged_b4_kv32k --note "FA4's paged path at batch 4 ..."
    kernelseek review RUN_DIR --list
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REVIEWS_NAME = "reviews.jsonl"
REVIEW_BAND = 0.10      # a reviewed speedup covers the row up to 10% above it


@dataclass
class Review:
    kernel_sha256: str
    scenario: str
    speedup: float          # the flagged speedup that was reviewed
    flag: str               # the flag's text at review time
    note: str               # why the row stands (what was checked)
    run: str = ""           # the run directory reviewed
    time_utc: str = ""

    def covers(self, kernel_sha256: str | None, scenario: str, speedup: float | None) -> bool:
        if kernel_sha256 != self.kernel_sha256 or scenario != self.scenario:
            return False
        return speedup is None or speedup <= self.speedup * (1 + REVIEW_BAND)


def reviews_path(run_dir: str | Path) -> Path:
    """Where the reviews of a run live: a campaign's directory, else the run directory's parent."""
    run = Path(run_dir)
    if run.is_file():
        run = run.parent
    if run.parent.name == "evals":
        return run.parent.parent / REVIEWS_NAME
    return run.parent / REVIEWS_NAME


def load_reviews(path: str | Path) -> list[Review]:
    """Every review in a reviews file ([] when there is none); bad lines raise, naming the line."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(Review(**{k: d[k] for k in ("kernel_sha256", "scenario", "speedup", "flag", "note")},
                              run=d.get("run", ""), time_utc=d.get("time_utc", "")))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{p}:{n}: not a review ({e})") from None
    return out


def covering(reviews: list[Review], kernel_sha256: str | None, row) -> Review | None:
    """The latest review that covers a flagged row, or None."""
    for r in reversed(reviews):
        if r.covers(kernel_sha256, row.scenario, row.speedup):
            return r
    return None


def add_review(run_dir: str | Path, scenario: str, note: str) -> Review:
    """Review the flagged row `scenario` (name or bench row number) of a run; appends to the file."""
    from .results import load
    if not note.strip():
        raise ValueError("a review needs a note saying what was checked")
    rows, meta = load(run_dir)
    row = next((r for r in rows if scenario in (r.scenario, str(r.row))), None)
    if row is None:
        raise ValueError(f"{run_dir}: no scenario {scenario!r}")
    if not row.suspicious:
        raise ValueError(f"{run_dir}: {row.scenario} is not flagged; only flagged rows are reviewed")
    sha = meta.get("kernel_sha256")
    if not sha:
        raise ValueError(f"{run_dir}: meta has no kernel_sha256, so a review could not be tied to the kernel")
    rev = Review(sha, row.scenario, float(row.speedup or 0.0), row.suspicious_reason, note.strip(),
                 str(run_dir), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    path = reviews_path(run_dir)
    with path.open("a") as f:
        f.write(json.dumps(asdict(rev)) + "\n")
    return rev


def flag_signature(kernel_sha256: str | None, rows) -> str:
    """What a flag question is about: the kernel and each flagged row's speedup band (REVIEW_BAND
    wide, on a log scale), so the question does not fire again while none of that changes."""
    band = math.log1p(REVIEW_BAND)
    parts = sorted(f"{r.scenario}@{int(math.log(r.speedup) // band) if r.speedup else 'na'}"
                   for r in rows if r.suspicious)
    return f"{(kernel_sha256 or '?')[:16]}:" + ",".join(parts) if parts else ""
