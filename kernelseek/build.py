"""Build a kernel file (.cu -> .so) with nvcc, cached by content, with its ptxas report.

    from kernelseek.build import build
    r = build(Path("kernels/naive_fwd.cu"))       # r.ok, r.so_path, r.ptxas, r.log, r.cached

The cache key is the sha256 of the source (bytes and file name), the local headers it includes
(kseek.h among them), the flags, the arch and `nvcc --version`, so the same kernel never compiles twice and a changed
header or toolchain always does. Cache entries are directories written under a temporary name and
renamed into place, so concurrent builds of one kernel never see a half-written entry. A compile
error is a result (ok False, with the log), not an exception; only a missing nvcc raises.
CLI: `kernelseek build FILE [--arch sm_90a]` prints the ptxas table and the constraint check.
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

REPO_KERNELS = Path(__file__).resolve().parent.parent / "kernels"   # holds kseek.h
BASE_FLAGS = ("-O3", "-lineinfo", "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared", "-Xptxas", "-v")
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
    source_hash: str = ""         # sha256 hex of the source bytes
    arch: str = ""

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
    """sha256 hex of the source file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)


def local_headers(src: Path, include_dirs: list[Path]) -> list[Path]:
    """Quoted #include files that resolve in the source's directory or include_dirs, recursively."""
    seen: dict[Path, None] = {}
    todo = [src]
    while todo:
        f = todo.pop()
        for name in _INCLUDE.findall(f.read_bytes()):
            rel = name.decode(errors="replace")
            for d in [f.parent, *include_dirs]:
                cand = (d / rel).resolve()
                if cand.is_file():
                    if cand not in seen and cand != src.resolve():
                        seen[cand] = None
                        todo.append(cand)
                    break
    return sorted(seen)


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The build cache: cache_dir, else $KSEEK_CACHE_DIR, else ~/.cache/kernelseek/build."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("KSEEK_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kernelseek" / "build"


def cache_key(src: Path, flags: list[str], arch: str, version: str, include_dirs: list[Path]) -> str:
    h = hashlib.sha256()
    h.update(b"kernelseek-build-v1\0" + arch.encode() + b"\0" + "\0".join(flags).encode() + b"\0")
    h.update(version.encode() + b"\0" + src.name.encode() + b"\0")   # the .so is named after it
    h.update(src.read_bytes())
    for hdr in local_headers(src, include_dirs):
        h.update(b"\0" + hdr.name.encode() + b"\0" + hdr.read_bytes())
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
          timeout_s: float = NVCC_TIMEOUT_S, confine=None) -> BuildResult:
    """Compile `src` into a cached shared library; ok False (with the log) on a compile error.
    confine: None, or a function (cmd, src, include_dirs, out_dir) -> (argv, env) that runs nvcc
    confined (kernelseek.confine.confined_nvcc: only the kernel's folder, kseek.h and the output
    folder are there, so no #include reaches the repository); such builds have their own cache key."""
    t0 = time.perf_counter()
    src = Path(src)
    nvcc = find_nvcc()
    if not src.is_file():
        return BuildResult(False, None, f"{src}: no such file", source=str(src), arch=arch)
    include_dirs = [src.resolve().parent, REPO_KERNELS]
    flags = [*arch_flags(arch), *BASE_FLAGS, *map(str, extra_flags)]
    version = nvcc_version(nvcc)
    key = cache_key(src, flags + (["<confined>"] if confine is not None else []), arch, version, include_dirs)
    root = cache_root(cache_dir)
    entry = root / key
    so_name = src.stem + ".so"
    common = dict(flags=flags, key=key, source=str(src), source_hash=source_hash(src), arch=arch)

    if (entry / so_name).is_file():    # an entry appears whole (rename), so existing = complete
        return BuildResult(True, entry / so_name, _read(entry / "build.log"),
                           _load_ptxas(entry / "ptxas.json"), cached=True,
                           seconds=time.perf_counter() - t0, **common)

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=root))
    try:
        cmd = [nvcc, *flags, *(f"-I{d}" for d in include_dirs), str(src.resolve()), "-o", str(tmp / so_name)]
        run_cmd, env = confine(cmd, src, include_dirs, tmp) if confine is not None else (cmd, None)
        try:
            proc = subprocess.run(run_cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
            log, rc = (proc.stdout + proc.stderr), proc.returncode
        except subprocess.TimeoutExpired as e:
            log, rc = f"nvcc timed out after {timeout_s:.0f} s\n{_text(e.stdout)}{_text(e.stderr)}", -1
        log = " ".join(cmd) + "\n" + log
        if rc != 0 or not (tmp / so_name).is_file():
            return BuildResult(False, None, log, parse_ptxas(log), seconds=time.perf_counter() - t0, **common)
        ptxas = parse_ptxas(log)
        for k, name in zip(ptxas, demangle([k["kernel"] for k in ptxas])):
            k["demangled"] = name
        (tmp / "build.log").write_text(log)
        (tmp / "ptxas.json").write_text(json.dumps(ptxas, indent=1))
        (tmp / "meta.json").write_text(json.dumps({**common, "nvcc_version": version}, indent=1))
        try:
            os.replace(tmp, entry)   # atomic; fails if another process already placed the entry
        except OSError:
            if not (entry / so_name).is_file():   # a damaged entry (files deleted by hand): replace it
                shutil.rmtree(entry, ignore_errors=True)
                os.replace(tmp, entry)
        return BuildResult(True, entry / so_name, log, ptxas, seconds=time.perf_counter() - t0, **common)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
