"""Build a kernel (a .cu file or a kernel folder) into a .so with nvcc, cached by content, with its ptxas report.

    from kernelseek.build import build
    r = build(Path("kernels/naive_fwd.cu"))       # r.ok, r.so_path, r.ptxas, r.log, r.cached
    r = build(Path("kernels/fa3_hopper"), defines={"KSEEK_FA3_BN": 64})   # a folder; a build variant

A folder `<name>/` is built from `<name>/<name>.cu`, its one translation unit (kernel_source.py).
nvcc's include path is the kernel's own directory plus a private directory holding only a copy of
kseek.h: `#include "kseek.h"` works anywhere, relative includes resolve as usual, and the
repository's other kernels cannot be included by name. The cache key is the sha256 of the entry
file and every local file it includes (names and bytes), kseek.h, the flags (defines among them,
as -DNAME=VALUE), the arch and `nvcc --version`, so the same kernel never compiles twice and a
changed header, variant or toolchain always does. Cache entries are directories written under a
temporary name and renamed into place, so concurrent builds of one kernel never see a half-written
entry. A compile error is a result (ok False, with the log), not an exception; only a missing nvcc
(NvccNotFound) and a bad define (KernelError) raise.
CLI: `kernelseek build PATH [--arch sm_90a] [--define NAME=VALUE]...` prints the ptxas table and the
constraint check.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .kernel_source import (KSEEK_H, KernelError, check_defines, closure, define_flags, entry_file,
                            kernel_hash, local_headers)

__all__ = ["build", "BuildResult", "NvccNotFound", "REPO_KERNELS", "entry_file", "check_defines", "local_headers",
           "source_hash", "parse_ptxas", "format_ptxas", "find_nvcc", "arch_flags", "cache_root"]

REPO_KERNELS = KSEEK_H.parent   # the repository's kernels/ (holds kseek.h); never on nvcc's include path
# -fno-gnu-unique: g++ binds a template's function-local statics and C++17 inline variables as
# STB_GNU_UNIQUE, which the dynamic loader shares across every library loaded in the process, even with
# RTLD_LOCAL: two builds of one kernel (a variant beside the default) would then share their opt-in flags
# and caches, and the second's kernels ran without their shared-memory opt-in (a cuda error; session 14).
BASE_FLAGS = ("-O3", "-lineinfo", "-shared", "-Xcompiler", "-fPIC,-fno-gnu-unique", "--cudart", "shared",
              "-Xptxas", "-v")
NVCC_TIMEOUT_S = 900


class NvccNotFound(RuntimeError):
    """No nvcc: the one build problem that raises instead of returning ok=False."""


@dataclass
class BuildResult:
    ok: bool
    so_path: Path | None          # the cached shared library (None when the build failed)
    log: str                      # nvcc's stdout + stderr (ptxas -v included)
    ptxas: list[dict] = field(default_factory=list)  # one dict per kernel, see parse_ptxas
    flags: list[str] = field(default_factory=list)   # the full nvcc argument list, minus paths
    key: str = ""                 # cache key (sha256 hex)
    cached: bool = False          # True when served from the cache without compiling
    seconds: float = 0.0          # wall time of this call (compile or cache lookup)
    source: str = ""              # the source path as given
    source_hash: str = ""         # kernel_source.kernel_hash: the entry file and its local includes
    arch: str = ""
    defines: dict = field(default_factory=dict)   # build variant: NAME -> VALUE, built as -DNAME=VALUE

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["so_path"] = str(self.so_path) if self.so_path else None
        return d


# ---- toolchain --------------------------------------------------------------------------------
def find_nvcc() -> str:
    """nvcc from $KSEEK_NVCC (only it, when set), else PATH, $CUDA_HOME/bin, /usr/local/cuda/bin."""
    explicit = os.environ.get("KSEEK_NVCC")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise NvccNotFound(f"KSEEK_NVCC={explicit}: no executable nvcc there")
    cands = [shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "bin", "nvcc"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise NvccNotFound("nvcc not found: install the CUDA toolkit, put nvcc on PATH, "
                       "or set KSEEK_NVCC or CUDA_HOME")


@functools.lru_cache(maxsize=8)
def nvcc_version(nvcc: str | None = None) -> str:
    """`nvcc --version` output (part of every cache key)."""
    nvcc = nvcc or find_nvcc()
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def arch_flags(arch: str) -> list[str]:
    """sm_90a -> -gencode=arch=compute_90a,code=sm_90a."""
    m = re.fullmatch(r"sm_(\d+[a-z]?)", arch)
    if not m:
        raise ValueError(f"arch {arch!r}: expected a name like sm_90a or sm_80")
    return [f"-gencode=arch=compute_{m.group(1)},code={arch}"]


# ---- hashing and cache --------------------------------------------------------------------------
def source_hash(path: str | Path) -> str:
    """The kernel's hash (kernel_source.kernel_hash): a lone file's sha256, else its closure's."""
    return kernel_hash(path)


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The build cache: cache_dir, else $KSEEK_CACHE_DIR, else ~/.cache/kernelseek/build."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("KSEEK_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kernelseek" / "build"


def cache_key(entry: Path, flags: list[str], arch: str, version: str) -> str:
    """sha256 hex over the toolchain, the flags, the harness's kseek.h and the entry's closure
    (each file's path relative to the entry's directory and its bytes)."""
    h = hashlib.sha256()
    h.update(b"kernelseek-build-v2\0" + arch.encode() + b"\0" + "\0".join(flags).encode() + b"\0")
    h.update(version.encode() + b"\0" + entry.name.encode() + b"\0")   # the .so is named after it
    h.update(KSEEK_H.read_bytes() if KSEEK_H.is_file() else b"")
    for f in closure(entry):
        h.update(b"\0" + os.path.relpath(f, entry.resolve().parent).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


# ---- ptxas report -------------------------------------------------------------------------------
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
# ptxas's wgmma notes: C7515 / C7512 = it serialized every wgmma of the function (each waits for the
# previous: no overlap of GEMMs with anything), C7517 = it injected a warpgroup.wait before a use of
# registers a wgmma defines. C7515 and C7517 mean a non-wgmma instruction touches wgmma registers in
# flight; C7512 that there are not enough registers to keep them apart.
_SERIAL = re.compile(r"\((?:C7515|C7512)\).*?serialized due to (.*?) (?:in|for) the function '([^']+)'")
_WAIT = re.compile(r"\(C7517\) warpgroup\.wait is injected.*? in function '([^']+)'")


def parse_ptxas(log: str) -> list[dict]:
    """Per kernel entry: {kernel, arch, registers, smem_bytes, stack_bytes, spill_stores_bytes,
    spill_loads_bytes, wgmma_serialized, wgmma_waits_injected} from nvcc's `-Xptxas -v` output (sizes
    in bytes; smem is static smem; wgmma_serialized is ptxas's reason, "" when it did not)."""
    out: dict[str, dict] = {}

    def entry(name, arch="?"):
        return out.setdefault(name, {"kernel": name, "arch": arch, "registers": 0, "smem_bytes": 0,
                                     "stack_bytes": 0, "spill_stores_bytes": 0, "spill_loads_bytes": 0,
                                     "wgmma_serialized": "", "wgmma_waits_injected": 0})
    cur = None       # the entry whose "Used N registers" line comes next
    props = None     # the function whose stack/spill line comes next
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            cur = m.group(1)
            entry(cur, m.group(2))["arch"] = m.group(2)
        elif m := _SERIAL.search(line):
            entry(m.group(2))["wgmma_serialized"] = m.group(1)
        elif m := _WAIT.search(line):
            entry(m.group(1))["wgmma_waits_injected"] += 1
        elif m := _PROPS.search(line):
            props = m.group(1)
        elif (m := _STACK.search(line)) and props in out:
            out[props].update(stack_bytes=int(m.group(1)), spill_stores_bytes=int(m.group(2)),
                              spill_loads_bytes=int(m.group(3)))
        elif (m := _USED.search(line)) and cur in out:
            out[cur]["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                out[cur]["smem_bytes"] = int(s.group(1))
    return list(out.values())


def demangle(names: list[str]) -> list[str]:
    """C++ names through c++filt when present (else unchanged)."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return list(names)
    try:
        r = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30)
        res = r.stdout.splitlines()
        return res if len(res) == len(names) else list(names)
    except (OSError, subprocess.SubprocessError):
        return list(names)


# ---- build ----------------------------------------------------------------------------------------
def build(src: str | Path, arch: str = "sm_90a", extra_flags=(), cache_dir: str | Path | None = None,
          timeout_s: float = NVCC_TIMEOUT_S, defines: dict | None = None, confine=None) -> BuildResult:
    """Compile the kernel `src` (a .cu file or a kernel folder) with `defines` (NAME -> VALUE, built
    as -DNAME=VALUE) into a cached shared library; ok False (with the log) on a compile error or a
    missing kernel. confine: None, or a function (cmd, src, include_dirs, out_dir) -> (argv, env)
    running nvcc confined (kernelseek.confine.confined_nvcc: only the folder holding the kernel, kseek.h
    and the output folder are there, so no #include reaches the repository); its own cache key."""
    t0 = time.perf_counter()
    src = Path(src)
    defines = check_defines(defines)
    nvcc = find_nvcc()
    try:
        entry = entry_file(src)
    except (KernelError, FileNotFoundError) as e:
        return BuildResult(False, None, str(e), source=str(src), arch=arch, defines=defines)
    flags = [*arch_flags(arch), *BASE_FLAGS, *define_flags(defines), *map(str, extra_flags)]
    version = nvcc_version(nvcc)
    key = cache_key(entry, flags + (["<confined>"] if confine is not None else []), arch, version)
    entry_dir = cache_root(cache_dir) / key
    so_name = entry.stem + ".so"
    common = dict(flags=flags, key=key, source=str(src), source_hash=kernel_hash(src), arch=arch, defines=defines)
    if (entry_dir / so_name).is_file():    # an entry appears whole (rename), so existing = complete
        return BuildResult(True, entry_dir / so_name, _read(entry_dir / "build.log"),
                           _load_ptxas(entry_dir / "ptxas.json"), cached=True,
                           seconds=time.perf_counter() - t0, **common)
    jail = (lambda cmd, inc, out: confine(cmd, src, [inc], out)) if confine is not None else None
    ok, so, log, ptxas = _compile(nvcc, entry, flags, entry_dir, {**common, "nvcc_version": version}, timeout_s,
                                  jail)
    return BuildResult(ok, so, log, ptxas, seconds=time.perf_counter() - t0, **common)


def _compile(nvcc: str, entry: Path, flags: list[str], dest: Path, meta: dict, timeout_s: float, jail=None):
    """nvcc into a temporary directory renamed to `dest` on success; (ok, so path, log, ptxas).
    The include path: the kernel's directory, then a private directory with only kseek.h in it.
    jail(cmd, include_dir, out_dir) -> (argv, env): how to run nvcc confined (see build)."""
    so_name = entry.stem + ".so"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name[:12]}-", dir=dest.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="kseek-include-") as inc:
            shutil.copyfile(KSEEK_H, Path(inc) / KSEEK_H.name)
            cmd = [nvcc, *flags, f"-I{entry.resolve().parent}", f"-I{inc}", str(entry.resolve()),
                   "-o", str(tmp / so_name)]
            rc, log = _nvcc(cmd, inc, tmp, timeout_s, jail)
        log = " ".join(cmd) + "\n" + log
        if rc != 0 or not (tmp / so_name).is_file():
            return False, None, log, parse_ptxas(log)
        ptxas = parse_ptxas(log)
        for k, name in zip(ptxas, demangle([k["kernel"] for k in ptxas])):
            k["demangled"] = name
        (tmp / "build.log").write_text(log)
        (tmp / "ptxas.json").write_text(json.dumps(ptxas, indent=1))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.replace(tmp, dest)   # atomic; fails if another process already placed the entry
        except OSError:
            if not (dest / so_name).is_file():   # a damaged entry (files deleted by hand): replace it
                shutil.rmtree(dest, ignore_errors=True)
                os.replace(tmp, dest)
        return True, dest / so_name, log, ptxas
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _nvcc(cmd: list[str], inc: str, out: Path, timeout_s: float, jail) -> tuple[int, str]:
    """Run one nvcc command (confined when `jail` is given): (return code, stdout + stderr)."""
    run_cmd, env = jail(cmd, inc, out) if jail is not None else (cmd, None)
    try:
        proc = subprocess.run(run_cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        return proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        return -1, f"nvcc timed out after {timeout_s:.0f} s\n{_text(e.stdout)}{_text(e.stderr)}"


def _read(p: Path) -> str:
    return p.read_text() if p.is_file() else ""


def _load_ptxas(p: Path) -> list[dict]:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return []


def _text(x) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


# ---- report --------------------------------------------------------------------------------------
def format_ptxas(ptxas: list[dict]) -> str:
    """The ptxas report as a table: one line per kernel entry; wgmma "SERIAL" (C7515/C7512) or "+N wait"
    (C7517) where ptxas gave up overlapping wgmma, with a count of such kernels last."""
    hdr = (f"{'regs':>5} {'smem B':>8} {'stack B':>8} {'spill st B':>10} {'spill ld B':>10} {'wgmma':>7}"
           "  kernel")
    lines = [hdr, "-" * len(hdr)]
    for k in ptxas:
        w = ("SERIAL" if k.get("wgmma_serialized") else
             f"+{k['wgmma_waits_injected']} wait" if k.get("wgmma_waits_injected") else "")
        lines.append(f"{k['registers']:>5} {k['smem_bytes']:>8} {k['stack_bytes']:>8} "
                     f"{k['spill_stores_bytes']:>10} {k['spill_loads_bytes']:>10} {w:>7}  "
                     f"{k.get('demangled', k['kernel'])}")
    serial = [k for k in ptxas if k.get("wgmma_serialized")]
    if serial:
        lines.append(f"WARNING: ptxas serialized the wgmma of {len(serial)} kernel(s) (C7515/C7512: "
                     f"{serial[0]['wgmma_serialized']}): no GEMM overlaps anything there")
    return "\n".join(lines)
