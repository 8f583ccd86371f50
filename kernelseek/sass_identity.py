"""Per-kernel SASS identity of two builds: is every kernel the same machine code, up to names and addresses?

    python tools/sass_identity.py OLD NEW            # a table, one row per kernel; exit 0 when all match
    python tools/sass_identity.py OLD NEW --diff fwd_kernel<__nv_bfloat16, 128   # + the listing diff
    python tools/sass_identity.py BUILD.so --write REF.json [--drop REGEX ...]    # a reference file

OLD and NEW are each a built .so / .cubin, or a reference .json written by --write. A kernel's listing
comes from `cuobjdump -sass`; it is normalised before hashing: instruction addresses dropped, branch
targets renamed L0, L1, ... in address order, mangled symbols replaced by `SYM`, whitespace collapsed.
The two encoding words are kept (the second carries the scheduling control bits: stalls, barriers);
where the instruction holds a branch target or a symbol (whose encoding holds the address) only the
control bits are.
Kernels are matched by `key`: the demangled signature without namespace qualifiers, so that a kernel
moved from one namespace to another (naive_fwd.cu's anonymous namespace -> naive::) still matches.
Resources (registers, stack, static shared and local memory, parameter bytes; `cuobjdump -res-usage`)
are compared beside the hash.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

from .build import demangle
from .cudatools import need_tool as _need
from .sass import sass

_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
_CTRL = re.compile(r"^\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
_TARGET = re.compile(r"\b(BRA|BRX|BRXU|CALL\.REL(?:\.NOINC)?|CALL\.ABS(?:\.NOINC)?|JMP|JMX|BSSY(?:\.\w+)?|SSY|PBK|PCNT|"
                     r"BREAK|BPT|WARPSYNC)\b(.*?)\b(0x[0-9a-f]+)\b")
_SYM = re.compile(r"\b_Z\w+|\$\w+|\.L_x_\d+")
_NS = re.compile(r"\(anonymous namespace\)::|\b[A-Za-z_]\w*::")
_RES = re.compile(r"^\s*Function\s+(\S+):\s*$")


def listings(path: str | Path) -> dict[str, list[tuple[str, str, str, str]]]:
    """Mangled kernel name -> [(address, text, encoding word 1, encoding word 2)] from cuobjdump -sass."""
    return parse_listing(sass(path))


def parse_listing(text: str) -> dict[str, list[tuple[str, str, str, str]]]:
    """listings() of a cuobjdump -sass text: each instruction line, then its control word's line."""
    out: dict[str, list] = {}
    cur, pending = None, None
    for ln in text.splitlines():
        if m := _FUNC.match(ln):
            cur = m.group(1)
            out[cur] = []
        elif cur and (m := _INSN.match(ln)):
            pending = [m.group(1), " ".join(m.group(2).split()), m.group(3), ""]
            out[cur].append(pending)
        elif cur and pending is not None and (m := _CTRL.match(ln)):
            pending[3] = m.group(1)
            pending = None
    return {k: [tuple(i) for i in v] for k, v in out.items()}


def normalise(insns: list[tuple[str, str, str, str]]) -> list[str]:
    """One line per instruction: text with branch targets as L<n> and symbols as SYM; encodings kept
    where the instruction names no address."""
    targets = sorted({int(m.group(3), 16) for _, t, _, _ in insns if (m := _TARGET.search(t))})
    label = {a: f"L{i}" for i, a in enumerate(targets)}
    lines = []
    for _, text, w1, w2 in insns:
        t, addr = text, False
        if m := _TARGET.search(t):
            t = t[:m.start(3)] + label[int(m.group(3), 16)] + t[m.end(3):]
            addr = True
        t, n = _SYM.subn("SYM", t)
        # the control bits (stalls, yield, barriers) are the top 23 bits of the second word
        lines.append(f"{t} ; ctrl {int(w2 or '0', 16) >> 41:#x}" if addr or n else f"{t} ; {w1} {w2}")
    return lines


def key(demangled: str) -> str:
    """The matching key: the demangled signature without namespace qualifiers."""
    return _NS.sub("", demangled)


def resources(path: str | Path) -> dict[str, dict[str, int]]:
    """Mangled kernel name -> {REG, STACK, SHARED, LOCAL, CONSTANT[0]} from cuobjdump -res-usage."""
    p = subprocess.run([_need("cuobjdump"), "-res-usage", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{path}: cuobjdump -res-usage failed: {p.stderr.strip()[:300]}")
    out, cur = {}, None
    for ln in p.stdout.splitlines():
        if m := _RES.match(ln):
            cur = m.group(1)
        elif cur:
            fields = dict(f.split(":", 1) for f in ln.split() if ":" in f)
            out[cur] = {k: int(fields[k]) for k in ("REG", "STACK", "SHARED", "LOCAL", "CONSTANT[0]") if k in fields}
            cur = None
    return out


def records(path: str | Path, with_dropped: bool = False) -> dict[str, dict]:
    """key -> {mangled, demangled, sha256, instructions, resources, lines} for every kernel of a
    build (.so/.cubin), or the "kernels" of a reference .json (without lines; with_dropped: and
    its "dropped")."""
    path = Path(path)
    if path.suffix == ".json":
        doc = json.loads(path.read_text())
        return {**doc["kernels"], **(doc.get("dropped", {}) if with_dropped else {})}
    lst, res = listings(path), resources(path)
    names = list(lst)
    out = {}
    for mangled, dem in zip(names, demangle(names)):
        norm = normalise(lst[mangled])
        k = key(dem)
        if k in out:
            raise ValueError(f"{path}: two kernels share the key {k!r}")
        out[k] = {"mangled": mangled, "demangled": dem, "instructions": len(norm),
                  "sha256": hashlib.sha256("\n".join(norm).encode()).hexdigest(),
                  "resources": res.get(mangled, {}), "lines": norm}
    return out


def compare(old: dict[str, dict], new: dict[str, dict]) -> list[dict]:
    """One row per key: status same | differs | resources (same SASS, other resources) | only old |
    only new."""
    rows = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a is None or b is None:
            status = "only new" if a is None else "only old"
        elif a["sha256"] != b["sha256"]:
            status = "differs"
        elif a.get("resources", {}) != b.get("resources", {}):
            status = "resources"
        else:
            status = "same"
        rows.append({"key": k, "status": status, "old": (a or {}).get("sha256", "")[:12],
                     "new": (b or {}).get("sha256", "")[:12],
                     "instructions": f"{(a or {}).get('instructions', '-')}/{(b or {}).get('instructions', '-')}"})
    return rows


def table(rows: list[dict]) -> str:
    """The comparison as text, a count per status last."""
    w = max([len(r["key"]) for r in rows] + [6])
    out = [f"{'kernel':<{w}}  {'status':<9}  {'old sha':<12}  {'new sha':<12}  insns old/new"]
    out += [f"{r['key']:<{w}}  {r['status']:<9}  {r['old']:<12}  {r['new']:<12}  {r['instructions']}" for r in rows]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    out.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return "\n".join(out)


def write_reference(build: str | Path, out: str | Path, drop: list[str] = (), note: str = "",
                    flags: str = "", nvcc: str = "") -> dict:
    """Write the records of `build` to `out` as JSON: under "kernels" those the reference is about,
    under "dropped" those whose key matches a `drop` regex (kept for other checks)."""
    recs = {k: {f: v for f, v in r.items() if f != "lines"} for k, r in records(build).items()}
    gone = {k for k in recs if any(re.search(d, k) for d in drop)}
    doc = {"source": str(build), "note": note, "nvcc": nvcc, "flags": flags, "drop": list(drop),
           "kernels": {k: r for k, r in recs.items() if k not in gone},
           "dropped": {k: r for k, r in recs.items() if k in gone}}
    Path(out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc
