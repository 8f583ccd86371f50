"""SASS and PTX instruction mixes of a built kernel, and its ptxas report as a table.

SASS comes from cuobjdump (or nvdisasm for a bare .cubin), found by cudatools.find_tool; the
PyPI wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm are enough (no GPU needed).

    kernelseek sass A.so [B.so] [--kernel NAME] [--ptxas PTXAS.txt]
"""
from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd

from kernelseek.cudatools import find_tool, need_tool

# instruction families always reported (zero when absent)
FAMILIES = ("HGMMA", "QGMMA", "HMMA", "FFMA", "MUFU", "LDG", "LDS", "LDL", "STL", "UTMALDG", "BAR", "SYNCS")


def sass(path: str | Path) -> str:
    """SASS of a .so, .cubin or fatbin (cuobjdump -sass; nvdisasm for a bare .cubin if no cuobjdump)."""
    obj = find_tool("cuobjdump")
    if obj:
        p = subprocess.run([obj, "-sass", str(path)], capture_output=True, text=True)
    elif str(path).endswith(".cubin") and find_tool("nvdisasm"):
        p = subprocess.run([find_tool("nvdisasm"), "-c", str(path)], capture_output=True, text=True)
    else:
        need_tool("cuobjdump")
    if p.returncode != 0:
        raise RuntimeError(f"{path}: SASS dump failed: {p.stderr.strip()[:400]}")
    return p.stdout


def ptx(path: str | Path) -> str:
    """PTX embedded in a binary (cuobjdump -ptx); empty when it carries none."""
    p = subprocess.run([need_tool("cuobjdump"), "-ptx", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{path}: PTX dump failed: {p.stderr.strip()[:400]}")
    return p.stdout


_FUNC = re.compile(r"^\s*(?:Function\s*:\s*(\S+)|\.text\.(\S+?):)\s*$")


_INSN = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+\{?\s*(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)")


def split_kernels(sass_text: str) -> dict[str, list[str]]:
    """Kernel name -> its instruction lines (cuobjdump `Function :` or nvdisasm `.text.` sections)."""
    out: dict[str, list[str]] = {}
    cur = None
    for ln in sass_text.splitlines():
        m = _FUNC.match(ln)
        if m:
            cur = m.group(1) or m.group(2)
            out.setdefault(cur, [])
        elif cur is not None and _INSN.match(ln):
            out[cur].append(ln)
    return out


def instruction_mix(sass_text: str, kernel: str | None = None) -> Counter:
    """Opcode families ('HGMMA.64x128x16.F32.BF16' -> 'HGMMA', predicates dropped) over all
    kernels, or the one whose name equals or contains `kernel`. FAMILIES are always present;
    NOPs (alignment padding) are not counted."""
    kernels = split_kernels(sass_text)
    if kernel is not None:
        pick = [k for k in kernels if k == kernel] or [k for k in kernels if kernel in k]
        if not pick:
            raise KeyError(f"no kernel matching {kernel!r}; kernels: {', '.join(kernels) or 'none'}")
        lines = kernels[pick[0]]
    else:
        lines = [ln for ls in kernels.values() for ln in ls] or sass_text.splitlines()
    c = Counter({f: 0 for f in FAMILIES})
    for ln in lines:
        m = _INSN.match(ln)
        if m and m.group(1) != "NOP":
            c[m.group(1)] += 1
    return c


def mix_diff(a: Counter | dict | str, b: Counter | dict | str) -> pd.DataFrame:
    """Family, count in a, count in b, b - a: FAMILIES first, then the rest by |b - a|."""
    a = instruction_mix(a) if isinstance(a, str) else Counter(a)
    b = instruction_mix(b) if isinstance(b, str) else Counter(b)
    fams = list(FAMILIES) + sorted((set(a) | set(b)) - set(FAMILIES), key=lambda f: (-abs(b[f] - a[f]), f))
    return pd.DataFrame({"family": fams, "a": [a[f] for f in fams], "b": [b[f] for f in fams],
                         "delta": [b[f] - a[f] for f in fams]})


def ptx_mix(ptx_text: str) -> Counter:
    """PTX instruction counts by opcode ('ld.global', 'st.shared', 'mma', 'wgmma', 'ex2', ...)."""
    c: Counter = Counter()
    for ln in ptx_text.splitlines():
        t = ln.split("//")[0].strip()
        t = re.sub(r"^@!?%\w+\s+", "", t)
        if not t or t[0] in ".{}/" or t.endswith(":") or not t.endswith(";"):
            continue
        parts = t.split()[0].rstrip(";").split(".")
        op = parts[0]
        if op in ("ld", "st", "atom", "red", "cp") and len(parts) > 1:
            op = f"{op}.{parts[1]}"
        c[op] += 1
    return c


def ptxas_table(ptxas: list[dict] | str) -> pd.DataFrame:
    """Registers, spills and stack per kernel from build.py's parsed list or `-Xptxas -v` text."""
    if isinstance(ptxas, str):
        from kernelseek.build import parse_ptxas
        ptxas = parse_ptxas(ptxas)
    return pd.DataFrame(ptxas)
