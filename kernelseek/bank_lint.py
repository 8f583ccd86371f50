"""The rules a question bank must keep (`kernelseek bank lint` prints them; kernelseek/commands/bank.py).

Lint, each error as `file:line: message`:
  schema (fields, groups, moments, layers, tiers, provenance); unique ids; every text a question
  (ends with '?') of at most MAX_CHARS characters with known slots; near-duplicate texts
  (difflib ratio >= DUP_RATIO on normalized text); each moment served by at least
  MIN_GROUPS_PER_MOMENT groups of core entries; core entries free of the construct list
  (bank/constructs.yaml); a `confirmed` entry's trace must exist, hold the event and not come
  from a fake API. On the shipped bank also the counts: >= 101 core entries in all ten groups,
  >= 5 compare, >= 18 arch.
"""
from __future__ import annotations

import difflib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path

from .bank import ARCHS, BANK_DIR, GROUPS, MOMENTS, Entry, bank_files, read_bank
from .bank_slots import SLOTS

DUP_RATIO = 0.85            # SequenceMatcher ratio at or above which two texts are near-duplicates
MIN_GROUPS_PER_MOMENT = 3   # "each moment served by several groups"
MAX_CHARS = 200             # short: one breath
COUNTS = {"core": 101, "compare": 5, "arch": 18}


@dataclass(frozen=True)
class Issue:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: error: {self.message}"


def construct_pattern(name: str) -> re.Pattern:
    """Case-insensitive; space and hyphen alike; not glued to a word in front; the last word's
    ending is free ('warp specialization' also catches 'warp-specialized', 'swizzle' 'swizzling')."""
    words = re.split(r"[\s-]+", name.strip())
    last = words[-1]
    for suffix in ("ation", "ing", "ed", "es", "e", "s"):
        if last.lower().endswith(suffix) and len(last) - len(suffix) >= 4:
            last = last[: -len(suffix)]
            break
    parts = [re.escape(w) for w in words[:-1] + [last]]
    return re.compile(r"(?<![A-Za-z0-9])" + r"[\s-]+".join(parts) + r"\w*", re.IGNORECASE)


def _norm(text: str) -> str:
    text = re.sub(r"\{[^}]*\}", " slot ", text.lower())
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def _check_text(e: Entry, constructs) -> list[str]:
    out = []
    if not e.text.rstrip().endswith("?"):
        out.append("not a question: the text must end with '?'")
    if len(e.text) > MAX_CHARS:
        out.append(f"text is {len(e.text)} characters; keep it under {MAX_CHARS}")
    try:
        for _, f, spec, conv in string.Formatter().parse(e.text):
            if f is None:
                continue
            if f not in SLOTS:
                out.append(f"unknown slot {{{f}}} (known: {', '.join(SLOTS)})")
            if spec or conv:
                out.append(f"slot {{{f}}} takes no format spec or conversion")
    except ValueError as err:
        out.append(f"unbalanced braces in text ({err})")
    if e.tier == "core":
        for name, pat in constructs:
            m = pat.search(e.text)
            if m:
                out.append(f"core entry names a CUDA construct: '{m.group(0)}' (matches '{name}' "
                           "in constructs.yaml); ask about the layer, or move it to tier arch")
    return out


def _trace_problem(e: Entry) -> str | None:
    """None when a confirmed entry's trace exists, holds the event and is not a fake-API run."""
    prov = e.provenance
    if prov.get("kind") != "confirmed":
        return None
    here = Path(e.file).resolve().parent
    cands = [Path(prov["trace"]), here / prov["trace"], here.parent / prov["trace"]]
    path = next((p for p in cands if p.is_file()), None)
    if path is None:
        return f"confirmed by trace {prov['trace']!r}, which does not exist"
    want, found = str(prov["event"]), False
    for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(rec, dict):
            continue
        if rec.get("fake") is True or any(w in str(rec.get(k, "")).lower() for w in ("fake", "scripted")
                                          for k in ("model", "api", "provider", "backend")):
            return (f"trace {prov['trace']} comes from a fake API or scripted-model run (line {i}); "
                    "it confirms nothing")
        ids = {str(rec.get(k)) for k in ("id", "event_id", "seq") if k in rec} | {f"line:{i}"}
        found = found or want in ids
    return None if found else f"event {want!r} not found in trace {prov['trace']}"


def lint(paths=None, counts: bool | None = None) -> list[Issue]:
    """Every problem in the bank at `paths` (default: the shipped bank/), sorted by file and line.

    counts: check the minimum counts (default: only for the shipped bank)."""
    counts = paths is None if counts is None else counts
    entries, constructs, probs = read_bank(paths)
    issues = [Issue(f, ln, m) for f, ln, m in probs]
    files = bank_files(paths)
    where = entries[0].file if entries else str(files[0] if files else (paths or [BANK_DIR])[0])
    if not constructs:
        issues.append(Issue(where, 1, "no construct list: a file with 'constructs:' is required"))
    pats = [(c, construct_pattern(c)) for c in constructs]
    seen: dict[str, Entry] = {}
    for e in entries:
        issues += [Issue(e.file, e.lines.get("text", e.line), f"{e.id}: {m}") for m in _check_text(e, pats)]
        if e.id in seen:
            f = seen[e.id]
            issues.append(Issue(e.file, e.line, f"duplicate id '{e.id}' (first at {f.file}:{f.line})"))
        seen.setdefault(e.id, e)
        t = _trace_problem(e)
        if t:
            issues.append(Issue(e.file, e.lines.get("provenance", e.line), f"{e.id}: {t}"))
    normed = [(_norm(e.text), e) for e in entries]
    for i, (a, ea) in enumerate(normed):
        for b, eb in normed[:i]:
            sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
            if sm.real_quick_ratio() >= DUP_RATIO and sm.quick_ratio() >= DUP_RATIO \
                    and sm.ratio() >= DUP_RATIO:
                issues.append(Issue(ea.file, ea.lines.get("text", ea.line), f"{ea.id}: near-duplicate of "
                                    f"{eb.id} ({eb.file}:{eb.lines.get('text', eb.line)}; similarity {sm.ratio():.2f} >= {DUP_RATIO})"))
    core = [e for e in entries if e.tier == "core"]
    for m in MOMENTS:
        groups = sorted({e.group for e in core if m in e.moments})
        if len(groups) < MIN_GROUPS_PER_MOMENT:
            issues.append(Issue(where, 1, f"moment '{m}' is served by {len(groups)} group(s) of core "
                                f"entries ({', '.join(groups) or 'none'}); need {MIN_GROUPS_PER_MOMENT}"))
    if counts:
        for tier, n in COUNTS.items():
            have = sum(e.tier == tier for e in entries)
            if have < n:
                issues.append(Issue(where, 1, f"{have} {tier} entries; the bank needs at least {n}"))
        for g in GROUPS:
            if not any(e.group == g for e in core):
                issues.append(Issue(where, 1, f"group '{g}' has no core entries"))
        for a in ARCHS:
            if not any(e.arch == a for e in entries):
                issues.append(Issue(where, 1, f"no entries tied to {a}"))
    return sorted(set(issues), key=lambda i: (i.file, i.line, i.message))
