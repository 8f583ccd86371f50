"""The question bank: load `bank/*.yaml`, fill a question's slots, pick one for a moment.

An entry asks; it never prescribes. Each has an id, text (a question, with optional slots such as
{worst_rows} filled from a results table), a group, the moments it fits, the layer it moves the
agent to, how its answer is checked, and its provenance. Tiers: `core` (names no CUDA construct;
bank/constructs.yaml lists them), `compare` (needs another implementation to compare against) and
`arch` (tied to Hopper or Blackwell). Slots and their values: bank_slots.py. The lint: bank_lint.py;
the verb: commands/bank.py:
    kernelseek bank lint [PATHS]      kernelseek bank list [--moment M] [--group G]
    kernelseek bank ask MOMENT [RUN_DIR]
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .bank_slots import SLOTS, bound_fractions, fields, fill, values  # noqa: F401 (bank.values etc.)
from .paths import BANK

GROUPS = ("measurement check", "bound differencing", "benchmark validity", "gap triage",
          "agent process", "challenge a limit", "strategy options", "hypothesis check",
          "scenario coverage", "correctness")
MOMENTS = ("start", "plateau", "limit_claim", "suspicious_gain", "correctness_excuse")
LAYERS = ("host", "launch", "kernel", "instruction", "memory hierarchy", "benchmark", "scenarios",
          "process")
TIERS = ("core", "compare", "arch")
ARCHS = ("hopper", "blackwell")
PROVENANCE = ("authored", "mined", "confirmed")
BANK_DIR = Path(os.environ.get("KERNELSEEK_BANK") or BANK)
RECENT = 2      # groups of the last RECENT questions are asked from last


class BankError(ValueError):
    """A bank that cannot be used; the message names file and line."""

    def __init__(self, file, line: int, message: str):
        super().__init__(f"{file}:{line}: {message}")
        self.file, self.line, self.message = str(file), line, message


@dataclass(frozen=True)
class Entry:
    id: str
    text: str
    group: str
    moments: tuple[str, ...]
    layer: str
    check: str
    provenance: dict = field(default_factory=dict, hash=False, compare=False)
    tier: str = "core"
    arch: str | None = None
    file: str = ""
    line: int = 0
    lines: dict = field(default_factory=dict, hash=False, compare=False, repr=False)  # key -> line

    def usable(self, reference: bool = False, arch: str | None = None) -> bool:
        """Whether selection may offer it: compare needs a reference, arch needs that GPU."""
        if self.tier == "compare":
            return reference
        if self.tier == "arch":
            return arch is not None and self.arch == arch
        return True

    @property
    def slots(self) -> list[str]:
        try:
            return fields(self.text)
        except ValueError:
            return []


# ---- YAML with line numbers -------------------------------------------------------------------
class LineDict(dict):
    """A mapping that remembers the line it starts on and the line of each key (1-based)."""
    line = 0
    key_lines: dict = {}
    dup_keys: list = []


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    pass


def _construct_map(loader, node):
    d = LineDict()
    d.line = node.start_mark.line + 1
    d.key_lines, d.dup_keys = {}, []
    yield d
    for k_node, _ in node.value:
        k = loader.construct_object(k_node)
        if k in d.key_lines:
            d.dup_keys.append((k, k_node.start_mark.line + 1))
        d.key_lines[k] = k_node.start_mark.line + 1
    d.update(loader.construct_mapping(node, deep=True))


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)


def read_yaml(path: Path):
    """Parse one YAML file keeping line numbers; raises BankError naming file:line."""
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_LineLoader)  # noqa: S506 (safe loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 0
        raise BankError(path, line, f"YAML error: {e.problem or e}") from None
    except OSError as e:
        raise BankError(path, 0, f"cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise BankError(path, 0, f"not UTF-8 text (byte {e.start})") from None


# ---- loading ---------------------------------------------------------------------------------
def bank_files(paths=None) -> list[Path]:
    """The YAML files of the bank: the given files and directories, or the shipped bank/."""
    out: list[Path] = []
    for p in [Path(p) for p in (paths or [BANK_DIR])]:
        out.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    return out


def parse_entry(raw: dict, defaults: dict, path: Path) -> tuple[Entry | None, list[tuple[int, str]]]:
    """One entry from its mapping and the file's defaults; problems as (line, message)."""
    probs: list[tuple[int, str]] = []
    line = getattr(raw, "line", 0)
    kl = getattr(raw, "key_lines", {})

    def at(key):
        return kl.get(key, line)
    for k, ln in getattr(raw, "dup_keys", []):
        probs.append((ln, f"duplicate key '{k}'"))
    known = {"id", "text", "group", "moments", "layer", "check", "provenance", "tier", "arch"}
    for k in raw:
        if k not in known:
            probs.append((at(k), f"unknown field '{k}' (known: {', '.join(sorted(known))})"))
    get = lambda k: raw.get(k, defaults.get(k))  # noqa: E731
    eid, text = get("id"), get("text")
    for k in ("id", "text", "check"):
        if not isinstance(get(k), str) or not get(k).strip():
            probs.append((at(k), f"field '{k}' missing or not a non-empty string"))
    group, layer, tier, arch = get("group"), get("layer"), get("tier") or "core", get("arch")
    if group not in GROUPS:
        probs.append((at("group"), f"group {group!r} is not one of: {', '.join(GROUPS)}"))
    if layer not in LAYERS:
        probs.append((at("layer"), f"layer {layer!r} is not one of: {', '.join(LAYERS)}"))
    if tier not in TIERS:
        probs.append((at("tier"), f"tier {tier!r} is not one of: {', '.join(TIERS)}"))
    if tier == "arch" and arch not in ARCHS:
        probs.append((at("arch"), f"an arch entry needs arch: one of {', '.join(ARCHS)} (got {arch!r})"))
    if tier != "arch" and arch is not None:
        probs.append((at("arch"), "only tier 'arch' entries name an architecture"))
    moments = get("moments")
    if not isinstance(moments, list) or not moments:
        probs.append((at("moments"), f"field 'moments' must be a non-empty list of: {', '.join(MOMENTS)}"))
        moments = []
    for m in moments:
        if m not in MOMENTS:
            probs.append((at("moments"), f"moment {m!r} is not one of: {', '.join(MOMENTS)}"))
    prov = get("provenance")
    prov = {"kind": prov} if isinstance(prov, str) else prov
    if not isinstance(prov, dict) or prov.get("kind") not in PROVENANCE:
        probs.append((at("provenance"), f"provenance must be one of {', '.join(PROVENANCE)} "
                                        "(or a mapping with kind:)"))
        prov = {}
    elif prov["kind"] == "mined" and not str(prov.get("source") or "").strip():
        probs.append((at("provenance"), "a mined entry names its public source (provenance.source)"))
    elif prov["kind"] == "confirmed" and not (prov.get("trace") and prov.get("event") is not None):
        probs.append((at("provenance"), "a confirmed entry names the trace and the event that show it "
                                        "changed a campaign (provenance.trace, provenance.event)"))
    if probs:
        return None, probs
    return Entry(id=eid.strip(), text=" ".join(text.split()), group=group, moments=tuple(moments),
                 layer=layer, check=get("check").strip(), provenance=dict(prov), tier=tier,
                 arch=arch, file=str(path), line=line, lines=dict(kl)), probs


def read_bank(paths=None) -> tuple[list[Entry], list[str], list[tuple[str, int, str]]]:
    """Entries, the construct list and every per-file problem as (file, line, message)."""
    entries: list[Entry] = []
    constructs: list[str] = []
    probs: list[tuple[str, int, str]] = []
    files = bank_files(paths)
    if not files:
        probs.append((str(paths[0] if paths else BANK_DIR), 0, "no *.yaml files"))
    for path in files:
        try:
            doc = read_yaml(path)
        except BankError as e:
            probs.append((e.file, e.line, e.message))
            continue
        if not isinstance(doc, dict):
            probs.append((str(path), 1, "top level must be a mapping with 'entries' or 'constructs'"))
            continue
        for k, ln in getattr(doc, "dup_keys", []):
            probs.append((str(path), ln, f"duplicate key '{k}'"))
        if "constructs" in doc:
            cs = doc["constructs"]
            if not isinstance(cs, list) or not all(isinstance(c, str) and c.strip() for c in cs):
                probs.append((str(path), doc.key_lines.get("constructs", 1), "constructs must be a list of strings"))
            else:
                constructs.extend(c.strip() for c in cs)
        defaults = {k: doc[k] for k in ("group", "tier", "arch", "layer") if k in doc}
        raw_entries = doc.get("entries", [])
        if "constructs" not in doc and not raw_entries:
            probs.append((str(path), 1, "no 'entries' list"))
        if not isinstance(raw_entries, list):
            probs.append((str(path), doc.key_lines.get("entries", 1), "'entries' must be a list"))
            continue
        for raw in raw_entries:
            if not isinstance(raw, dict):
                probs.append((str(path), doc.key_lines.get("entries", 1), f"an entry must be a mapping, got {raw!r}"))
                continue
            e, ps = parse_entry(raw, defaults, path)
            probs.extend((str(path), ln, (f"{raw.get('id')}: " if raw.get("id") else "") + m) for ln, m in ps)
            if e:
                entries.append(e)
    return entries, constructs, probs


_CACHE: dict = {}


def load(paths=None) -> list[Entry]:
    """Every entry of the bank; raises BankError (file:line) if any file has a problem."""
    key = tuple(str(p) for p in bank_files(paths))
    if key not in _CACHE:
        entries, _, probs = read_bank(paths)
        if probs:
            f, ln, msg = probs[0]
            more = f" (and {len(probs) - 1} more; run `kernelseek bank lint`)" if len(probs) > 1 else ""
            raise BankError(f, ln, msg + more)
        _CACHE[key] = entries
    return list(_CACHE[key])


# ---- selection -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    id: str
    text: str          # the entry's text with its slots filled
    group: str
    moment: str
    layer: str
    check: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def arch_of(gpu: str | None) -> str | None:
    """hopper or blackwell from a GPU name such as 'NVIDIA H200'; None when unknown."""
    g = (gpu or "").upper()
    if any(t in g for t in ("H100", "H200", "H800", "H20", "GH200")):
        return "hopper"
    if any(t in g for t in ("B100", "B200", "B300", "GB200", "GB300", "RTX PRO 6000")):
        return "blackwell"
    return None


def select(moment: str, rows=None, *, bounds=None, meta=None, entries=None, asked=(),
           allow_repeat: bool = False, reference: bool = False, arch: str | None = None,
           prefer_groups=(), noise: float | None = None, seed: int = 0,
           extra: dict | None = None) -> Question | None:
    """Pick a question for `moment` and fill its slots from `rows` (and `bounds`, `meta`).

    `asked` is the ids already asked in this campaign, oldest first: those are never repeated
    unless `allow_repeat`. Ranking: groups of the last RECENT questions last; then `prefer_groups`
    in order (the trigger's hint, e.g. benchmark validity after a result above its bound); then
    groups never asked, then the least recently asked; then entries whose slots the data fills;
    `seed` breaks ties reproducibly. None if nothing fits.
    """
    if moment not in MOMENTS:
        raise ValueError(f"unknown moment {moment!r}; one of {', '.join(MOMENTS)}")
    entries = load() if entries is None else entries
    if arch is None and meta:
        arch = arch_of(meta.get("gpu") or (meta.get("env") or {}).get("gpu"))
    pool = [e for e in entries if moment in e.moments and e.usable(reference, arch)]
    asked = list(asked)
    fresh = [e for e in pool if e.id not in asked]
    if not fresh and allow_repeat:
        fresh = pool
    if not fresh:
        return None
    vals, known = values(rows, bounds=bounds, meta=meta, noise=noise, extra=extra)
    by_id = {e.id: e for e in entries}
    last_asked = {}
    for i, qid in enumerate(asked):
        if qid in by_id:
            last_asked[by_id[qid].group] = i
    prefer = list(prefer_groups)

    recent = {by_id[q].group for q in asked[-RECENT:] if q in by_id}

    def rank(e: Entry):
        filled = sum(1 if s in known else -1 for s in e.slots)
        return (e.group in recent, prefer.index(e.group) if e.group in prefer else len(prefer),
                last_asked.get(e.group, -1), -filled, zlib.crc32(f"{seed}:{e.id}".encode()))
    best = min(fresh, key=rank)
    return Question(id=best.id, text=fill(best.text, vals), group=best.group, moment=moment,
                    layer=best.layer, check=best.check)
