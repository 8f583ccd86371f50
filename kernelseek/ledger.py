"""The ledger: the evaluations a campaign's loop itself ran, tied to its trace by a digest.

The loop alone writes a campaign's trace.jsonl and its evals/<n>/ (outside the agent's sandbox and
the candidate's worker). For every evaluation it appends an `evaluation` event holding `n`, `dir`
and `results_sha256`, the sha256 of the evals/<n>/results.json it has just written. Every reader
that judges a campaign (the goal, the Stop hook, the triggers and arms, the console) takes the
evaluations from here:
    a results file with no ledger entry         is ignored ("the loop did not run it")
    a results file whose bytes no longer match  is refused (ForgedResults) by the judges, ignored by
                                                 the rest; either way with a message naming it
So a file that appears in a campaign folder is never judged. A folder of run directories without a
trace is not a campaign and has no ledger.

    ledger.evaluations(root)          verified run directories, oldest first
    ledger.latest(root)               the newest one (FileNotFoundError / ForgedResults otherwise)
    ledger.check(root).problems       one line per ignored or mismatched results file
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

DIGEST = "results_sha256"
TRACE = "trace.jsonl"


class ForgedResults(ValueError):
    """A results file whose bytes differ from the digest the loop recorded for it."""


def digest(path) -> str:
    """sha256 hex of a results.json (a run directory or the file)."""
    p = Path(path)
    return hashlib.sha256((p / "results.json" if p.is_dir() else p).read_bytes()).hexdigest()


def is_campaign(root) -> bool:
    """A loop campaign: a folder with a trace (its evaluations are judged only through the ledger)."""
    return (Path(root) / TRACE).is_file()


def entries(root) -> dict[int, dict]:
    """n -> the loop's evaluation event carrying a digest (the last one for an n, if repeated)."""
    from .traces import read
    out = {}
    for ev in read(Path(root) / TRACE):
        if ev.get("type") == "evaluation" and isinstance(ev.get(DIGEST), str) and isinstance(ev.get("n"), int):
            out[ev["n"]] = ev
    return out


@dataclass
class Check:
    verified: list = field(default_factory=list)     # run directories, oldest first
    problems: list = field(default_factory=list)     # one line per results file not judged
    forged: list = field(default_factory=list)       # the mismatched ones among them


def _on_disk(root: Path) -> list[Path]:
    ev = root / "evals"
    ds = [d for d in ev.iterdir() if (d / "results.json").is_file()] if ev.is_dir() else []
    return sorted(ds, key=lambda d: (0, int(d.name)) if d.name.isdigit() else (1, d.name))


def check(root) -> Check:
    """Match the results files under evals/ against the ledger of the trace."""
    root = Path(root).resolve()
    c = Check()
    if not is_campaign(root):
        c.problems.append(f"{root}: no {TRACE}, so no ledger: not a campaign the loop ran; its evaluations "
                          "are not judged")
        return c
    led = entries(root)
    for n, ev in sorted(led.items()):
        d = (root / str(ev.get("dir") or f"evals/{n}")).resolve()
        if root not in d.parents:
            c.problems.append(f"ledger entry {ev.get('id')}: dir {ev.get('dir')!r} is outside the campaign")
            continue
        if not (d / "results.json").is_file():
            c.problems.append(f"{d.relative_to(root)}/results.json: recorded in the ledger ({ev.get('id')}) but "
                              "missing")
            continue
        have = digest(d)
        if have != ev[DIGEST]:
            c.forged.append(d)
            c.problems.append(f"{d.relative_to(root)}/results.json: its sha256 {have[:12]} does not match the "
                              f"{ev[DIGEST][:12]} the loop recorded in {TRACE} ({ev.get('id')}): it changed after "
                              "the loop wrote it, so it is not judged")
            continue
        c.verified.append(d)
    known = set(c.verified) | set(c.forged)
    for d in _on_disk(root):
        if d.resolve() not in known:
            c.problems.append(f"{d.relative_to(root)}/results.json: no ledger entry in {TRACE} (the loop did not "
                              "run this evaluation), so it is not judged")
    return c


def evaluations(root) -> list[Path]:
    """The verified evaluations of a campaign, oldest first (everything else is ignored)."""
    return check(root).verified


def latest(root) -> Path:
    """results.json of the newest verified evaluation. Raises ForgedResults when any recorded results
    file was changed, FileNotFoundError when there is none (the message lists what was ignored)."""
    c = check(root)
    if c.forged:
        raise ForgedResults("; ".join(p for p in c.problems if "does not match" in p))
    if not c.verified:
        why = "; ".join(c.problems[:4]) or "no evaluation recorded in its ledger yet"
        raise FileNotFoundError(f"{Path(root)}: no evaluation the loop recorded: {why}")
    return c.verified[-1] / "results.json"


def record(run_dir) -> dict:
    """The ledger fields of an evaluation the loop has just written (for its `evaluation` event)."""
    return {DIGEST: digest(run_dir)}


def dump(root) -> str:
    """The ledger as text (for a person checking a campaign)."""
    c = check(root)
    lines = [f"{len(c.verified)} verified evaluation(s)"] + [f"  ok  {d.name}" for d in c.verified]
    return "\n".join(lines + [f"  NOT JUDGED  {p}" for p in c.problems])
