"""The agent's shell and file access, confined to the campaign's workspace.

The shell runs what a model wrote. Under bubblewrap (Debian's `bubblewrap`) it gets: the system
read-only, a private /tmp, only the workspace writable, no network at all (the loop, outside the
sandbox, is the only thing that talks to the API), its own pid namespace (so no other process's
environment can be read), the GPU device files bound when they exist, credential files and
folders of the home directory masked, and an environment rebuilt from a short allow-list: no
ANTHROPIC_API_KEY or other credential ever reaches it. Without bubblewrap the shell runs
unconfined with a scrubbed environment; `Sandbox.protection` says which is in force, and the loop
records it in the trace. read/write/edit resolve paths inside the workspace and refuse the rest.
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..traces import SECRET_NAME

SAFE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
            "PYENV_ROOT", "PYENV_VERSION")
CREDENTIALS = (".ssh", ".aws", ".azure", ".gnupg", ".config/gcloud", ".config/gh", ".docker", ".kube",
               ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".anthropic", ".config/anthropic",
               ".claude", ".claude.json", ".config/git/credentials", ".cache/huggingface/token")
MODES = ("auto", "bwrap", "none")


class SandboxError(PermissionError):
    """A path outside the workspace, or a sandbox that was required and is not available."""


@dataclass
class ShellResult:
    returncode: int | None
    output: str              # stdout and stderr interleaved, capped
    timed_out: bool
    seconds: float
    truncated: bool

    def text(self) -> str:
        head = "timed out" if self.timed_out else f"exit {self.returncode}"
        return f"[{head}, {self.seconds:.1f} s]\n{self.output}"


def clean_env(environ=None, home: str | None = None) -> dict:
    """The shell's environment: the allow-listed names only, and never a credential-like one."""
    env = os.environ if environ is None else environ
    out = {k: env[k] for k in SAFE_ENV if k in env and not SECRET_NAME.search(k)}
    out.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    out.update(HOME=home or "/tmp", TMPDIR="/tmp", PYTHONDONTWRITEBYTECODE="1")
    return out


@contextmanager
def scrubbed_environ():
    """Remove credential-like variables from os.environ for the duration (the evaluator's worker
    runs model-written code and inherits the environment); restore them after."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if SECRET_NAME.search(k)}
    try:
        yield
    finally:
        os.environ.update(saved)


def cap(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and the tail of a long text, saying how much was cut."""
    if len(text) <= limit:
        return text, False
    head, tail = int(limit * 0.4), int(limit * 0.6)
    return text[:head] + f"\n[... {len(text) - head - tail} characters cut ...]\n" + text[-tail:], True


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*"))


@lru_cache(maxsize=None)
def bwrap_usable(bw: str | None = None) -> str | None:
    """None when bubblewrap runs here; else why not."""
    bw = bw or shutil.which("bwrap")
    if not bw:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    try:
        p = subprocess.run([bw, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net",
                            "--unshare-pid", "--die-with-parent", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap failed to start ({e})"
    return None if p.returncode == 0 else f"bubblewrap cannot create namespaces here: {p.stderr.strip()[:200]}"


def _homes() -> list[Path]:
    hs = {Path.home()}
    if Path("/root").is_dir():
        hs.add(Path("/root"))
    return sorted(hs)


class Sandbox:
    """Runs shell commands and resolves file paths for one workspace."""

    def __init__(self, workspace, timeout_s: float = 600.0, output_cap: int = 30000, mode: str = "auto",
                 gpu: bool | None = None):
        if mode not in MODES:
            raise ValueError(f"sandbox mode {mode!r}: one of {', '.join(MODES)}")
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.timeout_s, self.output_cap = timeout_s, output_cap
        self.gpus = gpu_devices() if gpu is not False else []
        why = bwrap_usable() if mode != "none" else "the campaign chose no sandbox (mode none)"
        if mode == "bwrap" and why:
            raise SandboxError(f"sandbox mode bwrap required, but {why}")
        self.bwrap = shutil.which("bwrap") if why is None else None
        if self.bwrap:
            self.protection = ("bubblewrap: system read-only, only the workspace writable, private /tmp, "
                               "no network, own pid namespace, credentials masked, environment scrubbed"
                               + (f", GPU devices bound ({len(self.gpus)})" if self.gpus else ", no GPU devices"))
        else:
            self.protection = (f"none: {why}; the shell runs unconfined as this user (filesystem and network "
                               "open), with only its environment scrubbed; read/write/edit stay in the workspace")

    # ---- files -------------------------------------------------------------------------------
    def path(self, p: str) -> Path:
        """An absolute path inside the workspace for `p` (relative paths are relative to it)."""
        q = Path(p)
        q = (q if q.is_absolute() else self.workspace / q).resolve()
        if q != self.workspace and self.workspace not in q.parents:
            raise SandboxError(f"{p}: outside the workspace {self.workspace}; only files in it can be "
                               "read or written")
        return q

    def rel(self, p: Path) -> str:
        return str(Path(p).resolve().relative_to(self.workspace))

    # ---- shell -------------------------------------------------------------------------------
    def argv(self, command: str) -> list[str]:
        if not self.bwrap:
            return ["bash", "-c", command]
        ws = str(self.workspace)
        a = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
        for d in self.gpus:
            a += ["--dev-bind", d, d]
        a += ["--proc", "/proc", "--tmpfs", "/tmp"]
        for home in _homes():
            for c in CREDENTIALS:
                p = home / c
                if p.is_dir() and not p.is_symlink():
                    a += ["--tmpfs", str(p)]
                elif p.exists():
                    a += ["--ro-bind", "/dev/null", str(p)]
        a += ["--bind", ws, ws, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
              "--die-with-parent", "--new-session", "--clearenv"]
        for k, v in clean_env(home=ws).items():
            a += ["--setenv", k, v]
        return a + ["--chdir", ws, "bash", "-c", command]

    def run(self, command: str, timeout_s: float | None = None) -> ShellResult:
        timeout = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        t0 = time.monotonic()
        env = clean_env(home=str(self.workspace))
        proc = subprocess.Popen(self.argv(command), cwd=self.workspace, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = proc.communicate()
        text, cut = cap(out.decode(errors="replace"), self.output_cap)
        return ShellResult(None if timed_out else proc.returncode, text, timed_out,
                           time.monotonic() - t0, cut)
