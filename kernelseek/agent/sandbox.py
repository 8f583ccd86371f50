"""The agent's shell and file access, confined to the campaign's workspace.

The shell runs what a model wrote, so by default it runs under bubblewrap (kernelseek.confine): on an
empty read-only root holding only the toolchain (/usr, the CUDA toolkit, Python) and the workspace,
the only thing it may write; a private /tmp; no network (the loop, outside, is the only thing that
talks to the API); its own pid namespace and /proc (no other process to read or signal); the GPU
device files when there are any; an environment rebuilt from an allow-list (no API key). The
repository, other campaigns, this campaign's trace, goal and evaluations, $HOME and /etc/shadow are
simply not there. Without bubblewrap a Sandbox refuses to start (SandboxError, with the fix); mode
"none" runs the shell unconfined, and only when asked for by name (`campaign run --unconfined`): the
loop then says so in the trace and the campaign's summary. read/write/edit resolve paths inside the
workspace and refuse the rest, in either mode.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import confine
from ..confine import ConfinementUnavailable, gpu_devices
from ..redact import SECRET_NAME

MODES = ("bwrap", "none")
LEGACY = {"auto": "bwrap"}          # configs written before confinement was required
UNCONFINED = ("none: UNCONFINED, chosen explicitly (--unconfined): the shell runs as this user with the "
              "filesystem, other processes and the network open, only its environment scrubbed; "
              "read/write/edit stay in the workspace")


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
    return confine.clean_env(environ, home=home or "/tmp")


@contextmanager
def scrubbed_environ():
    """Remove credential-like variables from os.environ for the duration (an unconfined evaluator's
    worker runs model-written code and inherits the environment); restore them after."""
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


def bwrap_usable() -> str | None:
    """None when bubblewrap runs here; else why not."""
    return confine.unavailable()


class Sandbox:
    """Runs shell commands and resolves file paths for one workspace."""

    def __init__(self, workspace, timeout_s: float = 600.0, output_cap: int = 30000, mode: str = "bwrap",
                 gpu: bool | None = None, hide=()):
        mode = LEGACY.get(mode, mode)
        if mode not in MODES:
            raise ValueError(f"sandbox mode {mode!r}: one of {', '.join(MODES)} (none only when asked for)")
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.timeout_s, self.output_cap = timeout_s, output_cap
        self.gpus = gpu_devices() if gpu is not False else []
        self.hide = [Path(h) for h in hide]
        self.bwrap = None
        if mode == "bwrap":
            try:
                self.bwrap = confine.require("the agent's shell")
            except ConfinementUnavailable as e:
                raise SandboxError(str(e)) from None
            self.protection = ("bubblewrap: only the toolchain (read-only) and the workspace (writable); no "
                               "repository, campaigns, home or /etc secrets; private /tmp, no network, own pid "
                               "namespace and /proc, no capabilities, environment from an allow-list"
                               + (f", GPU devices bound ({len(self.gpus)})" if self.gpus else ", no GPU devices"))
        else:
            self.protection = UNCONFINED

    @property
    def confined(self) -> bool:
        return self.bwrap is not None

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
    def jail(self) -> confine.Jail:
        ws = str(self.workspace)
        return confine.Jail(rw=[ws], hide=self.hide, gpu=bool(self.gpus), env=clean_env(home=ws), chdir=ws)

    def argv(self, command: str) -> list[str]:
        if not self.bwrap:
            return ["bash", "-c", command]
        return self.jail().argv(["bash", "-c", command], self.bwrap)

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
