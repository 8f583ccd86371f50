"""The tools' processes: found, killed by process group, and held to the wall-time budget.

Tools start in their own session (the sandbox's shell, the evaluator's worker), so killing the loop
does not reach them by itself. The loop finds them two ways (Linux /proc):
  - descendants of the loop process that appeared during the current tool call (`Scope`);
  - any process of this user whose working directory is inside the campaign's workspace (what a
    tool left behind, even after the loop was killed with SIGKILL and another took over).
and kills each one's process group (SIGKILL; never the loop's own group).

    with Scope(workspace) as scope, deadline(seconds, scope.kill):   # ToolDeadline when it fires
        run the tool
    with signals_raise():     # SIGTERM / SIGHUP raise CampaignKilled in the loop's thread
        ...
A deadline needs the main thread (SIGALRM); elsewhere it is a timer that only kills the processes.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path


class ToolDeadline(BaseException):
    """The wall-time budget ran out during a tool call (BaseException: no tool code may catch it)."""


class CampaignKilled(BaseException):
    """The loop got SIGTERM or SIGHUP."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _ppids() -> dict[int, int]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    stat = f.read().decode(errors="replace")
                out[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return out


def descendants(pid: int | None = None) -> set[int]:
    """Every live process below `pid` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    kids: dict[int, list[int]] = {}
    for c, p in _ppids().items():
        kids.setdefault(p, []).append(c)
    out, todo = set(), [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def ancestors(pid: int | None = None) -> set[int]:
    """This process and every process above it (never to be killed as a stray)."""
    pp, pid = _ppids(), os.getpid() if pid is None else pid
    out = set()
    while pid > 0 and pid not in out:
        out.add(pid)
        pid = pp.get(pid, 0)
    return out


def in_workspace(workspace) -> set[int]:
    """Processes of this user whose current directory is the workspace or below it (not the loop
    or the shell that started it)."""
    ws = str(Path(workspace).resolve())
    skip, out = ancestors(), set()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in skip:
            continue
        try:
            cwd = os.readlink(f"/proc/{d}/cwd")
        except OSError:
            continue
        if cwd == ws or cwd.startswith(ws + os.sep):
            out.add(int(d))
    return out


def kill_groups(pids) -> int:
    """SIGKILL each process's group (or the process alone when its group holds the loop or one
    of the loop's ancestors, e.g. the terminal's shell)."""
    mine = set()
    for a in ancestors():
        try:
            mine.add(os.getpgid(a))
        except ProcessLookupError:
            pass
    done, n = set(), 0
    for pid in pids:
        try:
            g = os.getpgid(pid)
        except ProcessLookupError:
            continue
        try:
            if g not in mine and g not in done:
                os.killpg(g, signal.SIGKILL)
                done.add(g)
            elif g in mine:
                os.kill(pid, signal.SIGKILL)
            n += 1
        except (ProcessLookupError, PermissionError):
            continue
    return n


def kill_strays(workspace) -> int:
    """Kill what still runs in the workspace (a killed loop's tools); returns how many."""
    return kill_groups(in_workspace(workspace))


class Scope:
    """The processes a tool call starts: those found below the loop that were not there before."""

    def __init__(self, workspace):
        self.workspace = workspace
        self.before: set[int] = set()

    def __enter__(self):
        self.before = descendants()
        return self

    def __exit__(self, *exc):
        return False

    def kill(self) -> int:
        return kill_groups((descendants() - self.before) | in_workspace(self.workspace))


@contextmanager
def deadline(seconds: float | None, on_expire):
    """Raise ToolDeadline in this thread after `seconds` (calling on_expire first); None: no limit."""
    if seconds is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        t = threading.Timer(max(0.0, seconds), on_expire)
        t.daemon = True
        t.start()
        try:
            yield
        finally:
            t.cancel()
        return

    def fire(signum, frame):
        on_expire()
        raise ToolDeadline(f"{seconds:.1f} s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def signals_raise(sigs=(signal.SIGTERM, signal.SIGHUP)):
    """Turn these signals into CampaignKilled while inside (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise CampaignKilled(signum)
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
