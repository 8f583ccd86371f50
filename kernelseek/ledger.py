"""The ledger: the evaluations a campaign's loop itself ran, tied to its trace by a digest.

The loop alone writes a campaign's trace.jsonl and its evals/<n>/ (outside the agent's sandbox and
the candidate's worker). For every evaluation it appends an `evaluation` event holding `n`, `dir`
and `results_sha256`, the sha256 of the evals/<n>/results.json it has just written. store.Campaign
lists a campaign's evaluations through `check` (so the goal, the Stop hook, the triggers and arms,
triage and the console all read the same list):
    a results file with no ledger entry         is left out ("the loop did not run it")
    a results file whose bytes no longer match  is left out, and store.find_results (the goal, the
                                                 Stop hook) refuses the campaign: ForgedResults
So a file that appears in a campaign folder is never judged. A folder of runs without a trace has
no ledger, hence no evaluations. This module imports nothing of kernelseek (store imports it); the
folder's file names come from store.

    ledger.check(root, trace, numbered, results_name)   -> Check(verified, problems, forged)
    ledger.digest(results_file)                          the digest the loop records
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

DIGEST = "results_sha256"


class ForgedResults(ValueError):
    """A results file whose bytes differ from the digest the loop recorded for it."""


def digest(results_file) -> str:
    """sha256 hex of a results file (store.results_file of a run directory)."""
    return hashlib.sha256(Path(results_file).read_bytes()).hexdigest()


def entries(trace) -> dict[int, dict]:
    """n -> the loop's `evaluation` event carrying a digest (the last one for an n), from trace.jsonl."""
    out = {}
    p = Path(trace)
    if not p.is_file():
        return out
    with open(p, encoding="utf-8", errors="replace") as f:
        for raw in f:
            try:
                ev = json.loads(raw)
            except json.JSONDecodeError:
                continue                     # a line torn by a crash (traces.read skips it too)
            if (isinstance(ev, dict) and ev.get("type") == "evaluation" and isinstance(ev.get(DIGEST), str)
                    and isinstance(ev.get("n"), int)):
                out[ev["n"]] = ev
    return out


@dataclass
class Check:
    verified: list = field(default_factory=list)     # run directories, oldest first
    problems: list = field(default_factory=list)     # one line per results file not judged
    forged: list = field(default_factory=list)       # the changed ones among them

    def refuse(self) -> None:
        """ForgedResults naming every changed results file, if there is one."""
        if self.forged:
            raise ForgedResults("; ".join(p for p in self.problems if "does not match" in p))


def check(root, trace, numbered: list, results: str) -> Check:
    """Match a campaign's results files (`numbered`: its evals/<n>/ run directories) against the
    ledger in `trace`. Verified directories are given under `root` as given (not resolved)."""
    given, root = Path(root), Path(root).resolve()
    c = Check()
    if not Path(trace).is_file():
        c.problems.append(f"{root}: no {Path(trace).name}, so no ledger: not a campaign the loop ran; its "
                          "evaluations are not judged")
        return c
    for n, ev in sorted(entries(trace).items()):
        d = (root / str(ev.get("dir") or "")).resolve()      # the loop writes dir, relative to the campaign
        if root not in d.parents:
            c.problems.append(f"ledger entry {ev.get('id')}: dir {ev.get('dir')!r} is outside the campaign")
        elif not (d / results).is_file():
            c.problems.append(f"{d.relative_to(root)}/{results}: recorded in the ledger ({ev.get('id')}) but missing")
        elif digest(d / results) != ev[DIGEST]:
            c.forged.append(d)
            c.problems.append(f"{d.relative_to(root)}/{results}: its sha256 {digest(d / results)[:12]} does not "
                              f"match the {ev[DIGEST][:12]} the loop recorded in {Path(trace).name} "
                              f"({ev.get('id')}): it changed after the loop wrote it, so it is not judged")
        else:
            c.verified.append(given / d.relative_to(root))
    known = {d.resolve() for d in c.verified} | set(c.forged)
    for d in numbered:
        if Path(d).resolve() not in known:
            c.problems.append(f"{Path(d).resolve().relative_to(root)}/{results}: no ledger entry in "
                              f"{Path(trace).name} (the loop did not run this evaluation), so it is not judged")
    return c


def latest(c: Check, root) -> Path:
    """The newest verified evaluation's run directory. Raises ForgedResults when any recorded results
    file was changed, FileNotFoundError when there is none (the message says what was left out)."""
    c.refuse()
    if not c.verified:
        why = "; ".join(c.problems[:4]) or "no evaluation recorded in its ledger yet"
        raise FileNotFoundError(f"{root}: no evaluation the loop recorded: {why}")
    return c.verified[-1]


def dump(c: Check) -> str:
    """The ledger check as text (for a person checking a campaign)."""
    lines = [f"{len(c.verified)} verified evaluation(s)"] + [f"  ok  {d.name}" for d in c.verified]
    return "\n".join(lines + [f"  NOT JUDGED  {p}" for p in c.problems])
