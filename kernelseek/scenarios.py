"""Scenarios and grids: what one attention call computes, loaded from YAML and validated.

A `Scenario` is plain data (no tensors). `load_grid(name_or_path)` reads a grid YAML from
`kernelseek/grids/` or a path; every error names the file, the scenario and the field.
FLOPs count the attended keys of every row (the mean attended length per row times the rows, as
FlashAttention's benchmark does); minimum bytes count each input read once and the output written
once. The mask semantics are those of `kernels/kseek.h` (bottom-right aligned).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .counts import DTYPE_BYTES, Counts  # noqa: F401  (DTYPE_BYTES: re-exported)
from .paths import GRIDS as GRID_DIR  # the built-in grids (kernelseek/grids)

DTYPES = ("bf16", "fp16", "fp8")


class GridError(ValueError):
    """A grid file that cannot be used; the message names file, scenario and field."""


@dataclass(frozen=True)
class Scenario(Counts):
    name: str
    heads_q: int
    heads_kv: int
    head_dim: int
    batch: int = 1
    seqlen_q: int = 0                 # dense: query rows per sequence
    seqlen_k: int = 0                 # dense: key rows per sequence (paged: cache capacity)
    seqlens_q: tuple | None = None    # varlen: per-sequence query lengths (batch = len)
    seqlens_k: tuple | None = None    # varlen: per-sequence key lengths
    head_dim_v: int = 0               # 0 = head_dim
    dtype: str = "bf16"
    causal: bool = False
    window: tuple = (-1, -1)          # (left, right), -1 = unbounded
    softcap: float = 0.0
    scale: float | None = None        # None = 1/sqrt(head_dim)
    sinks: bool = False               # one extra logit per query head
    page_size: int = 0                # 0 = contiguous K/V
    cache_seqlens: tuple | None = None  # per-sequence key end (seqused_k)
    leftpad: tuple | None = None      # per-sequence first valid key
    num_splits: int = 0               # 0 = the kernel chooses
    attention_chunk: int = 0          # chunked local attention (kseek.h ABI 3): chunk of C keys; 0 = off
    row: int | None = None            # bench26 row number
    kind: str = ""                    # prefill or decode; "" = derived
    note: str = ""

    # ---- derived -------------------------------------------------------------------------
    @property
    def dv(self) -> int:
        return self.head_dim_v or self.head_dim

    @property
    def varlen(self) -> bool:
        return self.seqlens_q is not None

    @property
    def paged(self) -> bool:
        return self.page_size > 0

    @property
    def softmax_scale(self) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def effective_window(self) -> tuple[int, int]:
        """(left, right) with causal folded in as right = 0."""
        left, right = self.window
        if self.causal:
            right = 0 if right < 0 else min(right, 0)
        return left, right

    def q_lens(self) -> list[int]:
        return list(self.seqlens_q) if self.varlen else [self.seqlen_q] * self.batch

    def k_capacity(self) -> list[int]:
        """Key rows stored per sequence (before seqused/leftpad)."""
        return list(self.seqlens_k) if self.varlen else [self.seqlen_k] * self.batch

    def k_ranges(self) -> list[tuple[int, int]]:
        """Per sequence: (first valid key, end) in logical key positions."""
        cap = self.k_capacity()
        ends = list(self.cache_seqlens) if self.cache_seqlens is not None else cap
        starts = list(self.leftpad) if self.leftpad is not None else [0] * self.n_batch
        return list(zip(starts, ends))

    @property
    def n_batch(self) -> int:
        return len(self.seqlens_q) if self.varlen else self.batch

    @property
    def group(self) -> str:
        return self.kind or ("decode" if max(self.q_lens()) <= 16 < max(self.k_capacity()) else "prefill")

    @property
    def attn_type(self) -> str:
        if self.heads_kv == self.heads_q:
            return "MHA"
        return "MQA" if self.heads_kv == 1 else "GQA"

    def features(self) -> dict[str, Any]:
        """Labels that gap triage groups by."""
        return {
            "head_dim": self.head_dim, "dtype": self.dtype, "causal": self.causal,
            "kind": self.group, "paged": self.paged, "varlen": self.varlen,
            "attn": self.attn_type, "window": self.window != (-1, -1),
            "softcap": self.softcap > 0, "sinks": self.sinks,
        }

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not d["attention_chunk"]:
            del d["attention_chunk"]   # off: a scenario reads as it did before ABI 3 (frozen grids, old runs)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}

    def short(self) -> str:
        lens = f"varlen{len(self.seqlens_q)}" if self.varlen else f"B{self.batch} {self.seqlen_q}x{self.seqlen_k}"
        bits = [lens, f"h{self.heads_q}/{self.heads_kv}", f"d{self.head_dim}" + (f"/{self.dv}" if self.dv != self.head_dim else ""), self.dtype]
        if self.causal: bits.append("causal")
        if self.window != (-1, -1): bits.append(f"win{self.window[0]},{self.window[1]}")
        if self.softcap: bits.append(f"cap{self.softcap:g}")
        if self.sinks: bits.append("sinks")
        if self.paged: bits.append(f"page{self.page_size}")
        if self.leftpad is not None: bits.append("leftpad")
        if self.num_splits: bits.append(f"split{self.num_splits}")
        if self.attention_chunk: bits.append(f"chunk{self.attention_chunk}")
        return " ".join(bits)


# ---- validation ------------------------------------------------------------------------------
_FIELDS = {f.name: f for f in dataclasses.fields(Scenario)}
_INT = {"heads_q", "heads_kv", "head_dim", "batch", "seqlen_q", "seqlen_k", "head_dim_v", "page_size", "num_splits",
        "attention_chunk"}
_INT_LISTS = {"seqlens_q", "seqlens_k", "cache_seqlens", "leftpad"}


def _coerce(raw: dict, where: str) -> dict:
    out = {}
    for key, val in raw.items():
        if key not in _FIELDS:
            raise GridError(f"{where}: unknown field '{key}' (known: {', '.join(sorted(_FIELDS))})")
        if key in _INT:
            if isinstance(val, bool) or not isinstance(val, int):
                raise GridError(f"{where}: field '{key}' must be an integer, got {val!r}")
        elif key in _INT_LISTS:
            if val is not None:
                if not isinstance(val, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in val):
                    raise GridError(f"{where}: field '{key}' must be a list of integers, got {val!r}")
                val = tuple(val)
        elif key == "window":
            if not isinstance(val, (list, tuple)) or len(val) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in val):
                raise GridError(f"{where}: field 'window' must be [left, right] integers, got {val!r}")
            val = tuple(val)
        elif key in ("causal", "sinks"):
            if not isinstance(val, bool):
                raise GridError(f"{where}: field '{key}' must be true or false, got {val!r}")
        elif key in ("softcap", "scale"):
            if val is not None and (isinstance(val, bool) or not isinstance(val, (int, float))):
                raise GridError(f"{where}: field '{key}' must be a number, got {val!r}")
            val = None if val is None else float(val)
        out[key] = val
    return out


def validate(s: Scenario, where: str) -> None:
    """Raise GridError naming `where` (file and scenario) and the field at fault."""
    def bad(fld: str, msg: str):
        raise GridError(f"{where}: field '{fld}': {msg}")
    if not isinstance(s.name, str) or not s.name:
        bad("name", f"must be a non-empty string, got {s.name!r}")
    if s.row is not None and (isinstance(s.row, bool) or not isinstance(s.row, int) or s.row <= 0):
        bad("row", f"must be a positive integer, got {s.row!r}")
    if s.dtype not in DTYPES:
        bad("dtype", f"{s.dtype!r} is not one of {DTYPES}")
    for f in ("heads_q", "heads_kv", "head_dim"):
        if getattr(s, f) <= 0:
            bad(f, "must be positive")
    if s.heads_q % s.heads_kv:
        bad("heads_kv", f"heads_q={s.heads_q} is not a multiple of heads_kv={s.heads_kv}")
    if s.head_dim_v < 0:
        bad("head_dim_v", "must be >= 0 (0 = head_dim)")
    if s.head_dim % 8 or s.dv % 8 or s.head_dim > 256 or s.dv > 256:
        bad("head_dim", "head dims must be multiples of 8, at most 256")
    if s.varlen:
        if not s.seqlens_q:
            bad("seqlens_q", "varlen needs at least one sequence")
        if s.seqlens_k is None or len(s.seqlens_k) != len(s.seqlens_q):
            bad("seqlens_k", "varlen needs seqlens_k with one entry per seqlens_q entry")
        if any(x < 0 for x in s.seqlens_q + s.seqlens_k):
            bad("seqlens_q", "lengths must be >= 0")
        if s.paged:
            bad("page_size", "paged K/V with varlen queries is not part of the grid format")
    else:
        if s.seqlens_k is not None:
            bad("seqlens_k", "given without seqlens_q")
        if s.batch <= 0:
            bad("batch", "must be positive")
        if s.seqlen_q <= 0:
            bad("seqlen_q", "must be positive (or give seqlens_q for varlen)")
        if s.seqlen_k <= 0:
            bad("seqlen_k", "must be positive")
    nb = s.n_batch
    cap = s.k_capacity()
    if s.cache_seqlens is not None:
        if len(s.cache_seqlens) != nb:
            bad("cache_seqlens", f"needs {nb} entries, got {len(s.cache_seqlens)}")
        if any(not 0 <= c <= k for c, k in zip(s.cache_seqlens, cap)):
            bad("cache_seqlens", f"each entry must be within 0..seqlen_k ({cap[0]})")
    if s.leftpad is not None:
        if len(s.leftpad) != nb:
            bad("leftpad", f"needs {nb} entries, got {len(s.leftpad)}")
        ends = s.cache_seqlens if s.cache_seqlens is not None else cap
        if any(not 0 <= lp <= e for lp, e in zip(s.leftpad, ends)):
            bad("leftpad", "each entry must be within 0..cache_seqlens")
    if s.page_size < 0:
        bad("page_size", "must be >= 0")
    if s.window[0] < -1 or s.window[1] < -1:
        bad("window", "entries must be >= -1 (-1 = unbounded)")
    if s.softcap < 0:
        bad("softcap", "must be >= 0")
    if s.num_splits < 0:
        bad("num_splits", "must be >= 0")
    if s.attention_chunk < 0:
        bad("attention_chunk", "must be >= 0 (0 = off)")
    if s.kind not in ("", "prefill", "decode"):
        bad("kind", "must be prefill or decode")


def scenario_from_dict(raw: dict, where: str) -> Scenario:
    if not isinstance(raw, dict):
        raise GridError(f"{where}: a scenario must be a mapping, got {type(raw).__name__}")
    vals = _coerce(raw, where)
    for req in ("name", "heads_q", "heads_kv", "head_dim"):
        if req not in vals:
            raise GridError(f"{where}: missing field '{req}'")
    s = Scenario(**vals)
    validate(s, where)
    return s


# ---- grids ---------------------------------------------------------------------------------------
def _expand_generate(gen: dict, where: str) -> list[dict]:
    """`generate:` = {name: template, axes: {field: [values]}, rotate: {field: [values]}, base: {...}}.

    The cross product of `axes` (in the order written) gives the scenarios; each field under
    `rotate` cycles through its values along that product (scenario i takes value i % len), so a
    feature is spread over the grid without multiplying it. Axis values that are mappings are
    merged into the scenario (for axes like "layout" that set several fields at once).
    """
    if not isinstance(gen, dict):
        raise GridError(f"{where}: a 'generate' block must be a mapping, got {type(gen).__name__}")
    unknown = set(gen) - {"name", "axes", "rotate", "base"}
    if unknown:
        raise GridError(f"{where}: unknown key(s) {sorted(unknown)} (known: axes, base, name, rotate)")
    axes = gen.get("axes") or {}
    rotate = gen.get("rotate") or {}
    base = gen.get("base") or {}
    template = gen.get("name")
    if not isinstance(axes, dict) or not axes or not template or not isinstance(template, str):
        raise GridError(f"{where}: field 'name': 'generate' needs a 'name' template and a non-empty 'axes' mapping")
    if not isinstance(rotate, dict) or not isinstance(base, dict):
        raise GridError(f"{where}: 'rotate' and 'base' must be mappings")
    for sect, m in (("axes", axes), ("rotate", rotate)):
        for k, vals in m.items():
            if not isinstance(vals, list) or not vals:
                raise GridError(f"{where}: field '{k}': {sect} values must be a non-empty list, got {vals!r}")
    keys = list(axes)
    out = []
    for i, combo in enumerate(itertools.product(*(axes[k] for k in keys))):
        d = dict(base)
        labels = {}
        picks = list(zip(keys, combo)) + [(k, vals[i % len(vals)]) for k, vals in rotate.items()]
        for k, v in picks:
            if isinstance(v, dict):          # a mapping sets several fields; its label names it
                v = dict(v)
                labels[k] = v.pop("label", k)
                d.update(v)
            else:
                labels[k] = v
                d[k] = v
        try:
            d["name"] = template.format(i=i, **labels)
        except (KeyError, IndexError) as e:
            raise GridError(f"{where}: scenario #{i}: field 'name': template {template!r} uses unknown label {e}") from None
        except ValueError as e:
            raise GridError(f"{where}: scenario #{i}: field 'name': bad template {template!r}: {e}") from None
        out.append(d)
    return out


def grid_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    cand = GRID_DIR / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    known = sorted(x.stem for x in GRID_DIR.glob("*.yaml"))
    raise GridError(f"grid '{name_or_path}': no such grid (built-in: {', '.join(known)}; else a .yaml file)")


def load_grid(name_or_path: str | Path) -> list[Scenario]:
    """Scenarios of a grid, in file order; names are unique."""
    path = grid_path(name_or_path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise GridError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise GridError(f"{path}: top level must be a mapping with 'scenarios' and/or 'generate'")
    unknown = set(doc) - {"grid", "description", "defaults", "scenarios", "generate"}
    if unknown:
        raise GridError(f"{path}: unknown top-level key(s) {sorted(unknown)}")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise GridError(f"{path}: 'defaults' must be a mapping, got {type(defaults).__name__}")
    if not isinstance(doc.get("scenarios") or [], list):
        raise GridError(f"{path}: 'scenarios' must be a list")
    raws: list[tuple[str, dict]] = []
    for j, raw in enumerate(doc.get("scenarios") or []):
        label = raw.get("name", f"#{j}") if isinstance(raw, dict) else f"#{j}"
        raws.append((f"{path}: scenario '{label}'", {**defaults, **raw} if isinstance(raw, dict) else raw))
    gens = doc.get("generate") or []
    if isinstance(gens, dict):
        gens = [gens]
    for g, gen in enumerate(gens):
        for raw in _expand_generate(gen, f"{path}: generate[{g}]"):
            raws.append((f"{path}: scenario '{raw['name']}'", {**defaults, **raw}))
    if not raws:
        raise GridError(f"{path}: no scenarios")
    seen: dict[str, str] = {}
    out = []
    for where, raw in raws:
        s = scenario_from_dict(raw, where)
        if s.name in seen:
            raise GridError(f"{where}: field 'name': duplicate name (also {seen[s.name]})")
        seen[s.name] = where
        out.append(s)
    return out


def select(scenarios: list[Scenario], pattern: str | None) -> list[Scenario]:
    """Filter by comma-separated names, row numbers (`3`, `20-24`) or substrings."""
    if not pattern:
        return scenarios
    keep = []
    for tok in pattern.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if "-" in tok and all(p.isdigit() for p in tok.split("-", 1)):
            a, b = map(int, tok.split("-", 1))
            keep += [s for s in scenarios if s.row is not None and a <= s.row <= b]
        elif tok.isdigit():
            keep += [s for s in scenarios if s.row == int(tok)]
        else:
            keep += [s for s in scenarios if s.name == tok] or [s for s in scenarios if tok in s.name]
    seen = set()
    out = [s for s in scenarios if s in keep and not (s.name in seen or seen.add(s.name))]
    if not out:
        raise GridError(f"--scenarios {pattern!r} matches no scenario")
    return out
