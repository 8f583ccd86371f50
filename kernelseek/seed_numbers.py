"""Every number written in the paper's documents, and whether data/paper/ accounts for it.

    uncovered(numbers, left_out(), seeds)   # [] when every number is an entry or left out
    unit_stated(number)                     # whether its sentence states its unit

A number is a run of digits (1.13, 11,532, 0.009; with its x, K or % after it) or a number word
(two, seven, Thirty-seven, thousands). Digits that are part of a name are not numbers: joined to
letters (hd96, fp8, FA3, H200), after a letter and a hyphen (FlashAttention-3), or an arXiv id.
An occurrence is accounted for when it lies inside the `as_written` of an entry of data/paper/
(found in that entry's sentence, found in its source), or inside one of left_out.yaml's items
(source, as_written, sentence, reason): numbers deliberately not kept, each with why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

_UNITS = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
WORD = re.compile(rf"\b((?:{_TENS})(?:-(?:{_UNITS}))?|{_UNITS}|hundreds?|thousands?|dozens?)\b", re.I)
DIGITS = re.compile(r"(?<![\w.,])(?<![A-Za-z]-)(?<!arXiv:)(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\d])")


@dataclass(frozen=True)
class Occurrence:
    source: str
    start: int
    end: int
    text: str
    context: str

    def __str__(self):
        return f"{self.source}: {self.text!r} in ...{self.context}..."


@dataclass(frozen=True)
class LeftOut:
    source: str
    as_written: str
    sentence: str
    reason: str


def occurrences(source: str, text: str) -> list[Occurrence]:
    """Every number of one document, in order."""
    out = []
    for rx in (DIGITS, WORD):
        for m in rx.finditer(text):
            nxt = text[m.end():m.end() + 1]
            if rx is DIGITS and nxt.isalpha() and nxt not in "xK":
                continue                      # 3D, 2nd: a name or an ordinal
            s, e = m.span()
            out.append(Occurrence(source, s, e, m.group(0), text[max(0, s - 60):e + 40].replace("\n", " ")))
    return sorted(out, key=lambda o: o.start)


def left_out(root) -> list[LeftOut]:
    """left_out.yaml's items; a missing field raises ValueError naming the file and item."""
    p = Path(root) / "left_out.yaml"
    if not p.exists():
        return []
    items = (yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("left_out") or []
    out = []
    for i, raw in enumerate(items):
        missing = [k for k in ("source", "as_written", "sentence", "reason") if not raw.get(k)]
        if missing:
            raise ValueError(f"{p}: left_out[{i}] lacks {', '.join(missing)}")
        out.append(LeftOut(raw["source"], raw["as_written"], raw["sentence"], raw["reason"]))
    return out


def _spans(text: str, sentence: str, as_written: str) -> list[tuple[int, int]]:
    out = []
    s = text.find(sentence)
    while s >= 0:
        a = sentence.find(as_written)
        while a >= 0:
            out.append((s + a, s + a + len(as_written)))
            a = sentence.find(as_written, a + 1)
        s = text.find(sentence, s + 1)
    return out


def uncovered(numbers, left: list[LeftOut], seeds) -> list[Occurrence]:
    """The numbers of the documents under `seeds` that no entry and no left-out item accounts for."""
    out = []
    for f in sorted(Path(seeds).glob("*.txt")):
        text = f.read_text(encoding="utf-8")
        spans = [sp for n in numbers if n.source == f.name for sp in _spans(text, n.sentence, n.as_written)]
        spans += [sp for x in left if x.source == f.name for sp in _spans(text, x.sentence, x.as_written)]
        out += [o for o in occurrences(f.name, text) if not any(a <= o.start and o.end <= b for a, b in spans)]
    return out


# ---- units ---------------------------------------------------------------------------------------
SAME = {"x": r"[x×]", "fa3": r"FA3|FlashAttention-3", "fa4": r"FA4|FlashAttention-4", "usd": r"dollar|\$",
        "%": "%", "subagents": r"subagent", "tool-result": r"tool-result", "sass": r"SASS"}
SMALL = {"of", "per", "the", "(up", "to)", "(about)", "(more", "than)", "available"}


def unit_stated(n) -> bool:
    """Whether the sentence states the entry's unit: every word of the unit (small words aside, a
    word's first five letters) is in the sentence, and an `x` unit follows the number as written."""
    words = [w for w in n.unit.split() if w.lower() not in SMALL]
    for w in words:
        key = w.lower()
        pat = SAME.get(key) or re.escape(w[:5])
        if key == "x":
            if not re.search(r"\d[x×]", n.as_written) and not re.search(re.escape(n.as_written) + r"\s*[x×]", n.sentence):
                return False
        elif not re.search(pat, n.sentence, re.I):
            return False
    return bool(words)
