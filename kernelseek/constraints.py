"""The constraint check: a kernel must do its own attention, not call a vendor library.

`check_binary(so_path)` reads the built ELF shared library (with pyelftools) and refuses it when
  (a) a symbol (imported or defined, dynamic or static table) names cuBLAS, cuBLASLt, cuDNN,
      CUTLASS or CuTe (C names like cublasCreate_v2, mangled C++ names like _ZN7cutlass..., N4cute);
  (b) it depends (DT_NEEDED) on such a library (libcublas*, libcublasLt*, libcudnn*, ...);
  (c) a string in any loaded host section names one, as dlopen/dlsym would need ("libcublas.so.13",
      "cublasLtMatmul"); device code (the fatbin) is scanned for CUTLASS/CuTe mangled names only,
      since -lineinfo puts source paths there.
Every library also passes the host-code gate (host_gate.py: the imports, system-call bytes and
load-time code its CPU side may have), whose reasons are added here.
`check_source(path)` refuses #includes of cuBLAS/cuDNN/CUTLASS/CuTe headers and string literals
naming the libraries. The CUDA runtime (libcudart) and driver (libcuda) are allowed. Each reason
names the symbol, library or string found. A determined cheat could hide a name (build it at run
time); this check catches the honest mistake and the plain trick, and timing plus SASS review do
the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

# A name of a forbidden library family, in a symbol, a DT_NEEDED entry or a string.
_LIB_NAME = re.compile(r"cublas|cudnn|cutlass", re.I)
# Mangled C++ names in the cutlass / cute namespaces (case matters: this is the Itanium ABI).
_MANGLED = re.compile(r"N7cutlass|N4cute")   # _ZN7cutlass..., _Z6kernelIN4cute...
_MANGLED_B = re.compile(rb"N7cutlass|N4cute")
_PRINTABLE = re.compile(rb"[\x20-\x7e]{5,}")
# Device-code sections: scanned for mangled names only.
_DEVICE_SECTIONS = (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment")
_RUNTIME_LOADERS = {"dlopen", "dlmopen", "dlsym", "dlvsym"}
# A kernel library runs inside the harness's Python process: reaching back into the interpreter or
# libtorch would let it call cuBLAS/cuDNN through torch, so those are refused too.
_HOST_ESCAPE = re.compile(r"^(_?Py[A-Z_a-z]|_ZN2at|_ZN3c10|_ZN5torch|_ZNK2at|_ZNK3c10)")
_HOST_ESCAPE_LIB = re.compile(r"libpython|libtorch|libc10", re.I)
_MAX_PER_KIND = 12


@dataclass
class ConstraintResult:
    ok: bool                                        # False = refused
    reasons: list[str] = field(default_factory=list)  # why refused, each naming what was found
    notes: list[str] = field(default_factory=list)    # informational, never refuse


def family(name: str) -> str:
    """Which forbidden library a name belongs to (for messages)."""
    low = name.lower()
    if "cublaslt" in low:
        return "cuBLASLt"
    if "cublas" in low:
        return "cuBLAS"
    if "cudnn" in low:
        return "cuDNN"
    if "cutlass" in low:
        return "CUTLASS"
    return "CuTe"


# nvcc names a file's anonymous namespace after the file: `_GLOBAL__N__fa56f966_11_nocublas_cu_8020c445`
# (a hash, then the length-prefixed `<stem>_cu`, then a hash). A file called nocublas.cu or
# cutlass_free.cu puts a library name into every symbol of its kernels, which says nothing about what
# the code does: such ids are cut out before matching (only these exact, length-checked ids, so a
# real `cublasSgemm_v2` string elsewhere in the same name or section is still found).
# Overlapping (a lookahead): the leading hash can be all digits (`_26798326_11_nocublas_cu_...`, as
# from one checkout's path), and its closing underscore then opens the length that follows.
_FILE_ID = re.compile(r"(?=_(\d+)_)")


def strip_file_ids(name: str) -> str:
    """`name` with nvcc's file-derived namespace ids (`_<n>_<stem>_cu_<hex8>`) removed."""
    out, i = [], 0
    for m in _FILE_ID.finditer(name):
        if m.start() < i:
            continue
        n, end = int(m.group(1)), m.end(1) + 1          # end: just past `_<n>_`
        body = name[end:end + n]
        tail = name[end + n:end + n + 9]
        if len(body) == n and body.endswith(("_cu", "_cuh")) and re.fullmatch(r"_[0-9a-f]{8}", tail):
            out.append(name[i:m.start()] + "_<file>")
            i = end + n + 9
    return "".join(out) + name[i:]


def forbidden_name(name: str) -> bool:
    name = strip_file_ids(name)
    return bool(_LIB_NAME.search(name) or _MANGLED.search(name))


def check_binary(so_path: str | Path) -> ConstraintResult:
    """Refuse a shared library that uses, links or names a forbidden library (see module doc)."""
    path = Path(so_path)
    try:
        f = path.open("rb")
    except OSError as e:
        return ConstraintResult(False, [f"{path}: cannot read ({e.strerror})"])
    with f:
        try:
            elf = ELFFile(f)
            res = _check_elf(elf)
        except ELFError as e:
            return ConstraintResult(False, [f"{path}: not a readable ELF file ({e})"])
    from .host_gate import check as host_gate   # what the host code may reach (forging the reply)
    named = " ".join(res.reasons)
    extra = [r for r in host_gate(path) if not any(f" {w} " in f" {named} " for w in _named_import(r))]
    if extra:
        res = ConstraintResult(False, res.reasons + extra, res.notes)
    return res


def _named_import(reason: str) -> list[str]:
    """The symbol or library a host-gate reason names, to skip one this check already reported."""
    for lead in ("imports ", "needs library "):
        parts = reason.split(lead, 1)
        if len(parts) == 2:
            return [parts[1].split(" ", 1)[0]]
    return []


def _check_elf(elf: ELFFile) -> ConstraintResult:
    reasons: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()   # names already reported, so a string does not repeat a symbol

    # (a) symbols, imported or defined, dynamic and static tables
    sym_reasons: list[str] = []
    loaders: set[str] = set()
    for sec in elf.iter_sections():
        if not isinstance(sec, SymbolTableSection):
            continue
        for sym in sec.iter_symbols():
            name = sym.name
            if not name or sym["st_info"]["type"] == "STT_FILE":   # source file names are not code
                continue
            undefined = sym["st_shndx"] == "SHN_UNDEF"
            if undefined and name.split("@")[0] in _RUNTIME_LOADERS:
                loaders.add(name.split("@")[0])
            if undefined and _HOST_ESCAPE.match(name) and name not in seen:
                seen.add(name)
                sym_reasons.append(f"symbol {name} imported: calls into the Python interpreter or libtorch "
                                   f"(which reach cuBLAS/cuDNN)")
            if forbidden_name(name) and name not in seen:
                seen.add(name)
                how = "imported (undefined)" if undefined else "defined"
                sym_reasons.append(f"symbol {name} {how} in {sec.name}: {family(name)}")
    reasons += _capped(sym_reasons, "symbols")

    # (b) DT_NEEDED
    for sec in elf.iter_sections():
        if isinstance(sec, DynamicSection):
            for tag in sec.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED" and _LIB_NAME.search(tag.needed):
                    seen.add(tag.needed)
                    reasons.append(f"needs library {tag.needed} (DT_NEEDED): {family(tag.needed)}")
                elif tag.entry.d_tag == "DT_NEEDED" and _HOST_ESCAPE_LIB.search(tag.needed):
                    reasons.append(f"needs library {tag.needed} (DT_NEEDED): Python/libtorch from a kernel")

    # (c) strings in every section loaded at run time (device code: mangled names only); sections
    # not loaded (.strtab, .comment, debug info) cannot feed dlopen and hold source file names
    str_reasons: list[str] = []
    for sec in elf.iter_sections():
        if sec["sh_type"] == "SHT_NOBITS" or sec["sh_size"] == 0 or not sec["sh_flags"] & SH_FLAGS.SHF_ALLOC:
            continue
        data = sec.data()
        device = sec.name.startswith(_DEVICE_SECTIONS)
        if device:
            for m in sorted(set(_MANGLED_B.findall(data))):
                s = m.decode()
                str_reasons.append(f"device code in {sec.name} has mangled names with {s}: {family(s)}")
            continue
        for m in _PRINTABLE.finditer(data):
            s = m.group().decode("ascii").strip()
            if forbidden_name(s) and s not in seen and s.split("@")[0] not in seen:
                seen.add(s)
                str_reasons.append(f"string {s!r} in {sec.name} names {family(s)}")
    reasons += _capped(str_reasons, "strings")

    if loaders:   # a single-file kernel has no business loading libraries: refused outright
        reasons.append(f"imports {', '.join(sorted(loaders))}: loads libraries at run time "
                       f"(a name built at run time could reach cuBLAS/cuDNN)")
    return ConstraintResult(not reasons, reasons, notes)


def _capped(items: list[str], what: str) -> list[str]:
    if len(items) <= _MAX_PER_KIND:
        return items
    return items[:_MAX_PER_KIND] + [f"... and {len(items) - _MAX_PER_KIND} more forbidden {what}"]


# ---- source --------------------------------------------------------------------------------------
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_STRING_LIT = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def _forbidden_header(inc: str) -> bool:
    parts = inc.lower().replace("\\", "/").split("/")
    if parts[-1] == "python.h" or parts[0] in ("aten", "torch", "c10"):
        return True
    if any(p.startswith(("cublas", "cudnn", "cutlass")) for p in parts):
        return True
    return "cute" in parts[:-1]   # cute/tensor.hpp, but not a file named cute.h of one's own


def check_source(path: str | Path) -> ConstraintResult:
    """Refuse #includes of cuBLAS/cuDNN/CUTLASS/CuTe headers and string literals naming the
    libraries, in the kernel (a file or a folder's entry) and every local file it includes."""
    from .kernel_source import KernelError, closure, entry_file
    src = Path(path)
    try:
        files = closure(entry_file(src))
    except (OSError, KernelError) as e:
        return ConstraintResult(False, [f"{src}: cannot read ({getattr(e, 'strerror', None) or e})"])
    reasons = []
    for f in files:
        text = f.read_text(errors="replace")
        for m in _INCLUDE.finditer(text):
            if _forbidden_header(m.group(1)):
                line = text.count("\n", 0, m.start()) + 1
                reasons.append(f"{f.name}:{line}: #include of {m.group(1)}: {family(m.group(1))} header")
        for ln, line_text in enumerate(text.splitlines(), 1):
            if line_text.lstrip().startswith(("//", "#include", "# include")):
                continue
            for m in _STRING_LIT.finditer(line_text):
                if _LIB_NAME.search(m.group(1)):
                    reasons.append(f"{f.name}:{ln}: string literal \"{m.group(1)}\" names {family(m.group(1))}")
    return ConstraintResult(not reasons, reasons)
