"""What a kernel is on disk: a file `x.cu` or a folder `<name>/` built from `<name>/<name>.cu`.

    entry_file(Path("kernels/fa3_hopper"))   # kernels/fa3_hopper/fa3_hopper.cu (the one translation unit)
    closure(entry)                           # the entry and every local file it includes, recursively
    kernel_hash(Path("kernels/fa3_hopper"))  # meta kernel_sha256: changes when any of them changes
    kernel_id("kernels/fa3_hopper.cu")       # "kernels/fa3_hopper": the old file and the folder are one kernel
    check_defines({"KSEEK_FA3_BN": 64})      # {"KSEEK_FA3_BN": "64"}; a bad name or value raises KernelError

A quoted `#include "x"` is resolved as nvcc resolves it: beside the including file first, then on
the include path, which the build makes the kernel's own directory plus a private directory holding
only a copy of kseek.h (build.py). The repository's other kernels are not on it, so a candidate
cannot include them by name. Build variants are preprocessor defines (NAME -> VALUE, passed as
-DNAME=VALUE): part of the build's cache key and recorded in the run's meta, never read from the
environment at run time.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from . import paths

KSEEK_H = paths.KSEEK_H   # the harness's interface
_INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VALUE = re.compile(r"[^\s\"'\\]+")      # one preprocessor token run: no whitespace, quotes or backslash


class KernelError(ValueError):
    """A kernel path or build define the harness cannot use (the message names the culprit)."""


# ---- the kernel's files -----------------------------------------------------------------------
def entry_file(path: str | Path) -> Path:
    """The translation unit nvcc compiles: the file itself, or <folder>/<folder name>.cu."""
    p = Path(path)
    if p.is_dir():
        name = p.resolve().name
        entry = p / f"{name}.cu"
        if not entry.is_file():
            raise KernelError(f"kernel folder {p}: no {name}/{name}.cu (a folder kernel's one translation unit)")
        return entry
    if p.is_file():
        return p
    raise FileNotFoundError(f"kernel {p}: no such file or folder")


def resolve_include(name: str, including: Path, search: list[Path]) -> Path | None:
    """Where nvcc finds `#include "name"` written in `including`: its directory, then `search`."""
    for d in (including.parent, *search):
        cand = Path(os.path.normpath(d / name))
        if cand.is_file():
            return cand.resolve()
    return None


def closure(entry: str | Path, search: list[Path] | None = None) -> list[Path]:
    """The entry (first) and every file its quoted includes reach, recursively, as nvcc resolves
    them (`search` default: the entry's directory). Files found nowhere (system headers written
    with quotes) are skipped; so is kseek.h when only the build's private copy provides it."""
    entry = Path(entry).resolve()
    search = [entry.parent] if search is None else [Path(d) for d in search]
    seen = {entry: None}
    todo = [entry]
    while todo:
        f = todo.pop()
        for raw in _INCLUDE.findall(f.read_bytes()):
            hit = resolve_include(raw.decode(errors="replace"), f, search)
            if hit is not None and hit not in seen:
                seen[hit] = None
                todo.append(hit)
    return list(seen)


def local_headers(src: str | Path, include_dirs: list[Path]) -> list[Path]:
    """The files `src` includes locally (its closure without itself), sorted."""
    return sorted(closure(src, include_dirs)[1:])


def _is_interface(f: Path) -> bool:
    """A byte-identical copy of the harness's kseek.h: the interface, not the kernel's own code."""
    return f.name == KSEEK_H.name and KSEEK_H.is_file() and f.read_bytes() == KSEEK_H.read_bytes()


def own_files(path: str | Path) -> list[Path]:
    """The kernel's own files: its closure (entry first) less unchanged copies of kseek.h, which is
    the harness's interface (the build's cache key covers it)."""
    entry = entry_file(path).resolve()
    return [f for f in closure(entry) if f == entry or not _is_interface(f)]


def is_lone_file(path: str | Path) -> bool:
    """A .cu file that includes no local file of its own (a kernel kept and hashed as one file)."""
    return Path(path).is_file() and len(own_files(path)) == 1


def kernel_hash(path: str | Path) -> str:
    """sha256 hex of the kernel: of the entry's bytes when it includes no local file of its own
    (so a lone .cu keeps the plain file hash earlier runs recorded), else of the list of
    (path relative to the entry's directory, sha256) over its own_files."""
    entry = entry_file(path).resolve()
    files = own_files(entry)
    if len(files) == 1:
        return hashlib.sha256(entry.read_bytes()).hexdigest()
    h = hashlib.sha256(b"kernelseek-kernel-v1\0")
    for rel, f in sorted((os.path.relpath(f, entry.parent), f) for f in files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(f.read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


def kernel_id(path: str | os.PathLike | None) -> str:
    """A kernel's identity for grouping runs: its path without a trailing slash or `.cu`, and a
    folder's entry file named as its folder, so kernels/fa3_hopper.cu (runs before the split),
    kernels/fa3_hopper/ and kernels/fa3_hopper/fa3_hopper.cu are one kernel."""
    if not path:
        return ""
    p = Path(os.path.normpath(str(path)))
    if p.suffix == ".cu":
        p = p.with_suffix("")
        if p.parent.name == p.name:          # <name>/<name>.cu: the folder's translation unit
            p = p.parent
    return p.as_posix()


# ---- copying a kernel (campaign workspaces and kept versions) -------------------------------------
def kernel_files(path: str | Path) -> tuple[Path, list[Path]]:
    """(root, files): the directory the kernel is laid out from (a file kernel's directory, a
    folder kernel's parent) and its closure. Raises KernelError when a local include lies outside
    root: a copy of the kernel could not resolve it."""
    p = Path(path)
    entry = entry_file(p).resolve()
    root = p.resolve().parent if p.is_dir() else entry.parent
    files = closure(entry)
    outside = [f for f in files if not f.is_relative_to(root)]
    if outside:
        raise KernelError(f"kernel {p}: includes {outside[0]}, outside {root}; a copy of the kernel "
                          "could not include it (keep its headers beside it or below)")
    return root, files


def copy_kernel(path: str | Path, dest: str | Path, whole_folder: bool = False) -> Path:
    """Copy the kernel into `dest` as it is laid out (a file with the local headers it includes,
    or a folder as a folder: its closure, or every file in it with `whole_folder`); returns the
    copy's path (dest/<file or folder name>)."""
    p, dest = Path(path), Path(dest)
    root, files = kernel_files(p)
    if whole_folder and p.is_dir():
        shutil.copytree(p, dest / p.resolve().name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.so", "*.o", "__pycache__", ".*"))
    for f in files:
        out = dest / f.relative_to(root)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, out)
    return dest / p.resolve().name


# ---- build variants -----------------------------------------------------------------------------
def check_defines(defines: dict | None) -> dict[str, str]:
    """Validated defines, sorted by name, values as strings: names are C identifiers, values one
    run of characters without whitespace, quotes or backslashes (ints are written in decimal)."""
    out = {}
    for name, value in (defines or {}).items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise KernelError(f"build define {name!r}: the name must be a C identifier")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise KernelError(f"build define {name}: value {value!r} must be a string or an integer")
        if not _VALUE.fullmatch(str(value)):
            raise KernelError(f"build define {name}={value!r}: the value must be non-empty, without "
                              "whitespace, quotes or backslashes")
        out[name] = str(value)
    return dict(sorted(out.items()))


def parse_defines(items: list[str] | None) -> dict[str, str]:
    """`--define NAME=VALUE` arguments (`NAME` alone means NAME=1) as a validated dict."""
    out: dict[str, str] = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        if name in out:
            raise KernelError(f"--define {item}: {name} is defined twice")
        out[name] = value if eq else "1"
    return check_defines(out)


def define_flags(defines: dict | None) -> list[str]:
    """nvcc flags for validated defines: -DNAME=VALUE, sorted by name."""
    return [f"-D{k}={v}" for k, v in check_defines(defines).items()]


def format_defines(defines: dict | None) -> str:
    """NAME=VALUE NAME=VALUE (empty when there are none): how reports print a build variant."""
    return " ".join(f"{k}={v}" for k, v in (defines or {}).items())
