"""Confinement with bubblewrap: the one place that says what a process running model-written code sees.

Three such processes, each started under `bwrap` on a new, empty, read-only root:
    the agent's shell    its workspace (read-write) and the toolchain (read-only)
    the candidate build  nvcc: the kernel's folder and kseek.h (read-only), its output folder
    the worker           the harness package and the candidate library (read-only), its own scratch,
                         the GPU device files
The toolchain is /usr (with /bin, /lib, ... as on the host), the CUDA toolkit, this Python's
installation and the loader's files of /etc. Nothing else is there: not the repository, not other
campaigns, not $HOME (ssh keys), not /etc/shadow; other processes are hidden (own pid namespace, a
new /proc), there is no network (own network namespace) and no capability, and the environment is
rebuilt from an allow-list, so no API key enters. A folder of the toolchain that would contain the
repository or a home directory is never bound whole; such paths are masked with an empty tmpfs.

bwrap is $KSEEK_BWRAP, else `bwrap` on PATH, else tools/bin/bwrap (a binary carried to a machine
that lacks the package). $KSEEK_SANDBOX_RO adds read-only folders (colon-separated) to the toolchain.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .paths import PACKAGE, REPO
from .redact import SECRET_NAME

ENV_BWRAP, ENV_RO = "KSEEK_BWRAP", "KSEEK_SANDBOX_RO"
SAFE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
            "CONDA_PREFIX", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")  # the loader's, no more
TOP_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")                            # merged-/usr links
SYS_DIRS = ("bus", "class", "dev", "devices", "module")                                   # what CUDA reads


class ConfinementUnavailable(RuntimeError):
    """bubblewrap is required and cannot run here."""


def find_bwrap() -> str | None:
    """The bwrap binary: $KSEEK_BWRAP when set (then only it: a named binary that is missing means
    none), else PATH, else tools/bin/bwrap of the checkout (carried to the GPU machine)."""
    if os.environ.get(ENV_BWRAP):
        c = os.environ[ENV_BWRAP]
        return c if os.path.isfile(c) and os.access(c, os.X_OK) else None
    for c in (shutil.which("bwrap"), str(REPO / "tools" / "bin" / "bwrap")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@lru_cache(maxsize=None)
def _probe(bw: str) -> str | None:
    try:
        p = subprocess.run([bw, *_base_args(), "--die-with-parent", "true"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap ({bw}) failed to start: {e}"
    return None if p.returncode == 0 else f"bubblewrap ({bw}) cannot create its namespaces here: {p.stderr.strip()[:300]}"


def unavailable() -> str | None:
    """None when bubblewrap runs here; else why not (one line, with the fix)."""
    bw = find_bwrap()
    if not bw:
        return (f"bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap; or set {ENV_BWRAP} "
                "to a bwrap binary, or put one at tools/bin/bwrap)")
    return _probe(bw)


def require(what: str) -> str:
    """The bwrap path, or ConfinementUnavailable naming what needed it and how to proceed."""
    why = unavailable()
    if why:
        raise ConfinementUnavailable(f"{what} runs confined and needs bubblewrap, but {why}. To run it "
                                     "unconfined instead, say so explicitly (--unconfined); that is recorded")
    return find_bwrap()


# ---- what a confined process sees --------------------------------------------------------------
def _under(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def protected() -> list[Path]:
    """Paths no toolchain folder may contain: the repository and the home directories."""
    out = {REPO, Path.home().resolve()}
    if Path("/root").is_dir():
        out.add(Path("/root"))
    return sorted(out)


def cuda_root() -> Path | None:
    try:
        from .build import find_nvcc
        return Path(find_nvcc()).resolve().parent.parent
    except Exception:  # no nvcc: a shell without a CUDA toolkit is still a shell
        return None


def toolchain() -> list[Path]:
    """Read-only folders: /usr, the CUDA toolkit, Python's installation, LD_LIBRARY_PATH, $KSEEK_SANDBOX_RO.
    A folder that is or holds the repository or a home directory is left out (never bound whole)."""
    cands = [cuda_root(), Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
             Path(sys.executable).resolve().parent.parent]
    cands += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    cands += [Path(p) for p in os.environ.get(ENV_RO, "").split(":") if p]
    roots: list[Path] = [Path("/usr")]         # always; a protected path inside it is masked
    for c in cands:
        if c is None or not c.is_dir():
            continue
        c = c.resolve()
        if c == Path("/") or any(_under(p, c) and p != c for p in protected()) or c in protected():
            continue            # would expose the repository or a home directory whole
        if not any(_under(c, r) for r in roots):
            roots = [r for r in roots if not _under(r, c)] + [c]
    return sorted(roots)


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/renderD*"))


def _base_args(hide=()) -> list[str]:
    """The empty root with the toolchain in it: binds shared by every confined process. Protected paths
    and `hide` (e.g. the campaigns folder) that fall inside a bound folder get an empty tmpfs on top."""
    a = []
    for name in TOP_LINKS:
        p = Path("/") / name
        if p.is_symlink():
            a += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            a += ["--ro-bind", str(p), str(p)]
    for r in toolchain():
        a += ["--ro-bind", str(r), str(r)]
    roots = toolchain()
    for m in [*protected(), *map(Path, hide)]:
        if any(_under(m, r) for r in roots) and not any(_under(r, m) for r in roots):
            a += ["--tmpfs", str(m)]
    for f in ETC_FILES:
        a += ["--ro-bind-try", f"/etc/{f}", f"/etc/{f}"]
    a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm",
          "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
          "--cap-drop", "ALL"]
    return a


@dataclass
class Jail:
    """One confined command: what it may read and write, its devices and its environment."""
    ro: list = field(default_factory=list)         # read-only paths (folders or files), bound as they are
    hide: list = field(default_factory=list)       # folders masked with an empty tmpfs (before ro and rw)
    rw: list = field(default_factory=list)         # read-write folders
    gpu: bool = False                              # bind the GPU device files and the parts of /sys CUDA reads
    env: dict = field(default_factory=dict)        # the whole environment (see clean_env)
    chdir: str | None = None
    new_session: bool = True                       # setsid: no terminal to inject keystrokes into

    # bwrap's own init (pid 1 inside) keeps the environment bwrap was started with, and /proc/1/environ
    # is readable inside: so bwrap itself must be started with `env` (popen(..., env=jail.env)).

    def argv(self, cmd: list[str], bwrap: str | None = None) -> list[str]:
        a = [bwrap or find_bwrap() or "bwrap", *_base_args(self.hide)]
        for p in self.ro:
            a += ["--ro-bind", str(p), str(p)]
        for p in self.rw:
            a += ["--bind", str(p), str(p)]
        if self.gpu:
            for d in gpu_devices():
                a += ["--dev-bind", d, d]
            for d in SYS_DIRS:
                a += ["--ro-bind-try", f"/sys/{d}", f"/sys/{d}"]
        a += ["--remount-ro", "/", "--die-with-parent"] + (["--new-session"] if self.new_session else [])
        a += ["--clearenv"]
        for k, v in self.env.items():
            a += ["--setenv", k, str(v)]
        if self.chdir:
            a += ["--chdir", str(self.chdir)]
        return a + ["--", *cmd]


def clean_env(environ=None, home: str = "/tmp", extra: dict | None = None, prefixes=()) -> dict:
    """An allow-listed environment: SAFE_ENV and names starting with `prefixes`, never a credential-like
    name; PATH starts with this Python's folder (no shims); HOME is `home`."""
    env = os.environ if environ is None else environ
    out = {k: v for k, v in env.items()
           if (k in SAFE_ENV or any(k.startswith(p) for p in prefixes)) and not SECRET_NAME.search(k)}
    first = [str(Path(sys.executable).parent)]
    cuda = cuda_root()
    if cuda is not None:
        first.append(str(cuda / "bin"))
    path = out.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    out["PATH"] = ":".join(first + [p for p in path.split(":") if p and p not in first and "shims" not in p])
    out.update(HOME=home, TMPDIR="/tmp", USER="kseek", LOGNAME="kseek", PYTHONDONTWRITEBYTECODE="1")
    out.update(extra or {})
    return out


# ---- the candidate: its build and its worker ---------------------------------------------------
HEADER = "kseek.h"


def build_jail(src, include_dirs, out_dir) -> Jail:
    """nvcc for one kernel (a .cu file or a kernel folder): the folder holding it (for a campaign, the
    workspace; relative includes such as "../shared.cuh" of a folder kernel resolve there) and the
    kseek.h of the include folders (read-only; never those folders themselves), its output folder."""
    src_dir = Path(src).resolve().parent
    headers = [Path(d).resolve() / HEADER for d in include_dirs if Path(d).resolve() != src_dir]
    ro = [src_dir] + [h for h in headers if h.is_file()]
    return Jail(ro=ro, rw=[Path(out_dir)], env=clean_env(home=str(out_dir)), chdir=str(out_dir))


# Compile caches of the baselines the worker runs: (variable, default). In a confined worker each is
# seeded read-only (symlinks into the bound cache) into its scratch, where new entries go and are
# dropped with it: a candidate cannot poison a baseline's cache for later evaluations.
CACHES = (("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", "~/.cache/kernelseek/fa4"),
          ("TRITON_CACHE_DIR", "~/.triton/cache"))


def _seed(src: Path, dst: Path) -> None:
    for d, _, files in os.walk(src):
        rel = Path(d).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            os.symlink(Path(d) / f, dst / rel / f)


def _python_path(environ) -> list[Path]:
    """$PYTHONPATH folders a worker may see (staged baselines such as FA4, carried wheels): never the
    repository, a folder inside it, or one holding a protected path."""
    out = []
    for p in (environ.get("PYTHONPATH") or "").split(":"):
        q = Path(p).resolve() if p else None
        if q and q.is_dir() and not _under(q, REPO) and not any(_under(pr, q) for pr in protected()):
            out.append(q)
    return out


def confined_nvcc(cmd, src, include_dirs, out_dir) -> tuple[list[str], dict]:
    """build.build's `confine` hook: nvcc's command line under bubblewrap, and its environment."""
    jail = build_jail(src, include_dirs, out_dir)
    return jail.argv(cmd, require("the candidate's build")), jail.env


def worker_jail(libraries, scratch, environ=None) -> Jail:
    """The worker that loads candidate libraries: the kernelseek package, the libraries' folders, the
    outside-the-repository $PYTHONPATH folders (staged FA4) and FA3's library (read-only), its scratch
    (the only writable folder), the GPU devices; KSEEK_* settings pass."""
    env_in = os.environ if environ is None else environ
    scratch = Path(scratch)
    pkg = PACKAGE
    paths = _python_path(env_in)
    ro = [pkg, *paths] + sorted({Path(p).resolve().parent for p in libraries if p})
    extra = {"PYTHONPATH": ":".join([str(pkg.parent), *map(str, paths)]), "PYTHONNOUSERSITE": "1",
             "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "1"}
    for var, default in CACHES:
        src = Path(env_in.get(var) or os.path.expanduser(default))
        dst = scratch / "cache" / var.lower()
        dst.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not any(_under(p, src.resolve()) for p in protected()):
            ro.append(src.resolve())
            _seed(src.resolve(), dst)
        extra[var] = str(dst)
    from .baselines.fa3_vllm import ENV as FA3_ENV, find as find_fa3
    fa3 = find_fa3()                           # FA3's prebuilt library (staged under /root, or .fa3/)
    if fa3 is not None:
        ro.append(fa3.resolve())
        extra[FA3_ENV] = str(fa3.resolve())
    env = clean_env(env_in, home=str(scratch), extra=extra, prefixes=("KSEEK_",))
    return Jail(ro=ro, rw=[scratch], gpu=True, env=env, chdir=str(scratch), new_session=False)


def confined_worker(worker_cmd, so, baseline: str, arch: str, log_path, extra_env: dict):
    """(kernelseek.worker.Worker under bubblewrap, its scratch folder): it sees the package, the
    candidate library, the prebuilt original:FILE.cu baselines, the run-time check's shim, its scratch
    (removed by the caller afterwards) and the GPU; results come back over its pipe."""
    import json
    import tempfile

    from . import build as B
    from .baselines.original import PREBUILT_ENV, original_paths
    from .worker_proc import Worker
    libs, prebuilt, sources = [so], {}, []
    for f in original_paths(baseline):
        r = B.build(f, arch=arch, confine=confined_nvcc)
        if r.ok:
            prebuilt[f] = str(r.so_path)
            libs.append(r.so_path)
            sources.append(Path(f).resolve())
    scratch = tempfile.mkdtemp(prefix="kseek-worker-")
    env = dict(os.environ, **extra_env, **({PREBUILT_ENV: json.dumps(prebuilt)} if prebuilt else {}))
    jail = worker_jail(libs, scratch, env)
    jail.ro += sources + [Path(p) for p in [env.get("KSEEK_TRUST_SHIM")] if p and Path(p).is_file()]
    cmd = jail.argv(worker_cmd or [sys.executable, "-m", "kernelseek.worker"], require("the worker"))
    return Worker(cmd=cmd, env=jail.env, log_path=log_path), scratch
