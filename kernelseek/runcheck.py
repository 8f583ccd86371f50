"""The run-time check: during the candidate's calls only the candidate's own device code runs.

Static checks (constraints.py) read names; a kernel can hide names (build them at run time, walk
the loaded objects and read a library's symbol table by hand) and reach cuBLAS that torch already
mapped. This check watches what actually runs. The worker starts a monitor (Monitor.start, a small
CUPTI client in kernelseek/native/kseek_trust.c, built here with the system C compiler) before CUDA
loads anything, then wraps every call into the candidate library (load, workspace query, checked
calls, warm-up, timed batches, profiled calls, graph capture) in a window. In a window, and on any
thread but the harness's own at any time, each kernel launch is recorded with its name, its
CUfunction and the CUmodule it came from; every module the process loads is recorded with the
hash of its cubin and of each kernel's code. After the scenario, `judge` attributes every recorded
launch to the loaded modules and refuses the candidate unless each kernel that ran is the
candidate's own code:
  - own: the module's whole cubin, or the kernel's code (relocated instructions masked), is
    byte-identical to a cubin embedded in the candidate .so (cubins.own_code): compared by code,
    so a vendor cubin loaded under a new name, or under a name the candidate also uses, is foreign;
  - foreign: anything else (cuBLAS's SGEMM, a torch kernel, a cubin built at run time), named in
    the reason with its module's size and hash;
  - not allowed at all: launching a CUDA graph or a multi-device launch inside a call (their
    kernels are not visible to the launch callbacks), a launch whose module was never seen loading.
The device time of profiled calls comes from the same monitor (CUPTI activity records), since
CUPTI takes one client per process and torch's profiler would be a second.

What it cannot see: code that reaches the GPU without the driver API (private driver entry points)
or a module loaded before the monitor started (none: it starts before the CUDA context exists). If
CUPTI cannot be started (no libcupti, a profiler already attached) the worker reports the check as
unavailable in the row (`runcheck`) and evaluate refuses to count such rows as trusted.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .cubins import OwnCode
from .paths import PACKAGE

SHIM_SRC = PACKAGE / "native" / "kseek_trust.c"


# ---- building and finding the pieces -----------------------------------------------------------
def cuda_include_dirs() -> list[Path]:
    """Directories holding cupti.h and cuda.h: the CUDA toolkit, then the pip wheels'."""
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    cands = []
    for r in filter(None, roots):
        cands += [Path(r) / "include", Path(r) / "extras" / "CUPTI" / "include"]
    try:
        import nvidia
        for root in nvidia.__path__:
            cands += [Path(p) for p in sorted(glob.glob(os.path.join(root, "*", "include")))]
    except ImportError:
        pass
    have_cupti = [d for d in cands if (d / "cupti.h").is_file()]
    have_cuda = [d for d in cands if (d / "cuda.h").is_file()]
    if not have_cupti or not have_cuda:
        raise FileNotFoundError("cupti.h and cuda.h not found (CUDA toolkit include/, extras/CUPTI/include, "
                                "or the nvidia-cuda-cupti wheel): the run-time check cannot be built")
    return list(dict.fromkeys([have_cupti[0], have_cuda[0]]))


def build_shim(cache_dir: str | Path | None = None) -> Path:
    """kseek_trust.so, compiled once per source and include directory (cached like kernels)."""
    from .build import cache_root
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if not cc:
        raise FileNotFoundError("no C compiler (gcc or cc) for the run-time check's shim")
    incs = cuda_include_dirs()
    h = hashlib.sha256(SHIM_SRC.read_bytes() + "\0".join(map(str, incs)).encode()).hexdigest()[:16]
    out = cache_root(cache_dir) / "shim" / f"kseek_trust-{h}.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, "-O2", "-shared", "-fPIC", *[f"-I{d}" for d in incs], str(SHIM_SRC), "-o", str(tmp), "-ldl", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"building the run-time check's shim failed: {r.stderr.strip()[-800:]}")
    os.replace(tmp, out)
    return out


def find_cupti() -> str:
    """The libcupti to use: the one already mapped into this process (torch's), else torch's wheel,
    else the CUDA toolkit's. Two different libcupti in one process would fight over the driver."""
    try:
        maps = Path("/proc/self/maps").read_text()
        hit = re.search(r"(/\S*libcupti\.so[.\d]*)\s*$", maps, re.M)
        if hit:
            return hit.group(1)
    except OSError:
        pass
    cands = []
    try:
        import nvidia
        for root in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(root, "*", "lib", "libcupti.so*")), reverse=True)
    except ImportError:
        pass
    for r in filter(None, [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]):
        cands += sorted(glob.glob(os.path.join(r, "extras", "CUPTI", "lib64", "libcupti.so*")), reverse=True)
        cands += sorted(glob.glob(os.path.join(r, "lib64", "libcupti.so*")), reverse=True)
        cands += sorted(glob.glob(os.path.join(r, "lib", "libcupti.so*")), reverse=True)
    if not cands:
        raise FileNotFoundError("libcupti not found (torch's nvidia wheels or the CUDA toolkit)")
    return cands[0]


# ---- what the shim records ---------------------------------------------------------------------
@dataclass
class Launch:
    seq: int
    in_window: bool          # inside a candidate call on the harness's thread
    other_thread: bool       # launched from a thread the harness did not start
    domain: str              # drv | rt
    api: str                 # cuLaunchKernel, cudaLaunchKernel_v7000, cuGraphLaunch, ...
    function: str            # CUfunction handle (hex) or 0x0
    module: str              # CUmodule handle (hex) or 0x0
    module_sig: str          # sha256 of the CUmodule's sorted kernel names ("-" unknown)
    ret: int                 # the API's return code (0 = launched)
    name: str                # the kernel's (mangled) name, "?" when unknown


@dataclass
class Module:
    id: int
    sha256: str
    size: int
    names_sha256: str
    kernels: dict[str, str] = field(default_factory=dict)    # name -> masked code sha256
    unloaded: bool = False


def parse_launches(text: str) -> list[Launch]:
    out = []
    for line in text.splitlines():
        f = line.split(" ", 13)
        if len(f) < 14 or f[0] != "L":
            continue
        out.append(Launch(int(f[1]), f[2] == "1", f[3] == "1", f[4], f[6], f[7], f[8], f[9], int(f[11]), f[13]))
    return out


def parse_modules(text: str, into: dict[int, Module]) -> dict[int, Module]:
    cur = None
    for line in text.splitlines():
        if line.startswith("M "):
            f = line.split()
            cur = Module(int(f[1]), f[2], int(f[3]), f[5])
            into[cur.id] = cur
        elif line.startswith("F ") and cur is not None:
            f = line.split(" ", 4)
            cur.kernels[f[4]] = f[1]
        elif line.startswith("U "):
            m = into.get(int(line.split()[1]))
            if m:
                m.unloaded = True
    return into


# ---- the verdict -----------------------------------------------------------------------------
_NOT_ALLOWED = (("Graph", "launched a CUDA graph inside its call (its kernels cannot be attributed)"),
                ("MultiDevice", "made a multi-device launch inside its call"))


def judge(launches: list[Launch], modules: dict[int, Module], own: OwnCode) -> list[str]:
    """Why the candidate is refused ([] = only its own code ran). Each reason names what ran."""
    reasons: dict[str, None] = {}
    for L in launches:
        if not (L.in_window or L.other_thread):
            continue
        where = "during its call" if L.in_window else "from another thread"
        bad = next((why for key, why in _NOT_ALLOWED if key in L.api), None)
        if bad:
            reasons[f"{bad} ({L.api})"] = None
            continue
        if "HostFunc" in L.api or L.ret != 0:        # host code, or a launch that did not happen
            continue
        verdict = attribute(L, modules, own)
        if verdict and verdict != BY_NAMES:
            reasons[f"kernel {_short(L.name)} ran {where}: {verdict}"] = None
    return list(reasons)


def by_names(launches: list[Launch], modules: dict[int, Module], own: OwnCode) -> int:
    """How many candidate launches were attributed by kernel-name set only (a weaker check)."""
    return sum(1 for L in launches if (L.in_window or L.other_thread) and L.ret == 0 and "Launch" in L.api
               and not any(k in L.api for k, _ in _NOT_ALLOWED) and attribute(L, modules, own) == BY_NAMES)


BY_NAMES = "by name set"      # attribute()'s answer when only the kernel-name set could be compared


def attribute(L: Launch, modules: dict[int, Module], own: OwnCode) -> str | None:
    """None when the launched kernel is the candidate's own code; BY_NAMES when its module's code was
    not recorded (the driver gave CUPTI no cubin) but the module's kernel-name set is exactly one of
    the candidate's cubins'; else what it is (a reason)."""
    defining = [m for m in modules.values() if L.name in m.kernels]
    if L.module_sig not in ("-", ""):                 # the CUmodule's identity narrows it down
        exact = [m for m in defining if m.names_sha256 == L.module_sig]
        defining = exact or defining
    if not defining:
        if L.module_sig not in ("-", "") and any(c.names_sha256 == L.module_sig and L.name in c.kernels
                                                 for c in own.cubins.values()):
            return BY_NAMES
        return "no loaded module defines it (its module was never seen loading): not the candidate's code"
    mine = [m for m in defining if own.owns_cubin(m.sha256) or own.owns_code(m.kernels[L.name])]
    if len(mine) == len(defining):
        return None
    other = next(m for m in defining if m not in mine)
    what = (f"its code is not in the candidate binary (module {other.id}: {other.size:,} bytes, "
            f"cubin sha256 {other.sha256[:12]}, kernel code {other.kernels[L.name][:12]})")
    if mine:
        return "ambiguous: loaded modules define it with different code, one of them foreign: " + what
    return what


def _short(name: str, n: int = 120) -> str:
    return name if len(name) <= n else name[:n] + "..."


# ---- the monitor in the worker ------------------------------------------------------------------
class Monitor:
    """The shim loaded into this process. One per process; start() before CUDA initializes."""
    _instance: "Monitor | None" = None

    def __init__(self, lib: ctypes.CDLL, cupti: str, note: str):
        self.lib, self.cupti, self.note = lib, cupti, note
        self.modules: dict[int, Module] = {}
        for fn in ("kt_take_launches", "kt_take_modules", "kt_activity_stop"):
            getattr(lib, fn).restype = ctypes.c_void_p
        lib.kt_free.argtypes = [ctypes.c_void_p]

    @classmethod
    def start(cls, shim: str | Path | None = None) -> "Monitor":
        """Load the shim and subscribe to CUPTI; raises RuntimeError saying why it cannot."""
        if cls._instance is not None:
            return cls._instance
        lib = ctypes.CDLL(str(shim or build_shim()), mode=ctypes.RTLD_GLOBAL)
        cupti = find_cupti()
        err = ctypes.create_string_buffer(512)
        rc = lib.kt_start(cupti.encode(), err, len(err))
        if rc != 0:
            raise RuntimeError(f"run-time check unavailable: {err.value.decode(errors='replace')} (code {rc})")
        cls._instance = cls(lib, cupti, err.value.decode(errors="replace"))
        return cls._instance

    def _take(self, fn: str) -> str:
        p = getattr(self.lib, fn)()
        try:
            return ctypes.string_at(p).decode(errors="replace") if p else ""
        finally:
            if p:
                self.lib.kt_free(p)

    @contextlib.contextmanager
    def window(self):
        """Launches made inside are the candidate's."""
        self.lib.kt_window(1)
        try:
            yield
        finally:
            self.lib.kt_window(0)

    def take(self) -> list[Launch]:
        """The launches recorded since the last take; the module table is kept up to date."""
        parse_modules(self._take("kt_take_modules"), self.modules)
        return parse_launches(self._take("kt_take_launches"))

    def check(self, own: OwnCode, earlier: list[Launch] = ()) -> tuple[list[str], int]:
        """(reasons to refuse, launches attributed by kernel-name set only) of the launches since the
        last take, and `earlier` ones kept for this check."""
        launches = list(earlier) + self.take()
        return judge(launches, self.modules, own), by_names(launches, self.modules, own)

    @contextlib.contextmanager
    def activity(self, out: dict):
        """Record kernels, memcpys and memsets run inside; out['records'] = [(kind, start_ns, end_ns,
        correlation, name_or_bytes)] after the block."""
        rc = self.lib.kt_activity_start()
        if rc != 0:
            raise RuntimeError(f"CUPTI activity could not be enabled (code {rc})")
        try:
            yield
        finally:
            text = self._take("kt_activity_stop")
            recs = []
            for line in text.splitlines():
                f = line.split(" ", 4)
                if len(f) >= 4 and f[0] in "KCS":
                    recs.append((f[0], int(f[1]), int(f[2]), int(f[3]), f[4] if len(f) > 4 else ""))
            out["records"] = recs


def device_ms(records) -> float:
    """Total device time (ms) of activity records."""
    return sum(max(0, e - s) for _k, s, e, _c, _n in records) / 1e6


if __name__ == "__main__":              # `python -m kernelseek.runcheck`: build the shim, say where
    print(build_shim())
    sys.exit(0)
