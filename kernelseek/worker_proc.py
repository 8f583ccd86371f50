"""The worker's parent side: `Worker`, a restartable child process speaking kernelseek.worker's
protocol (one JSON request per line on its stdin, one reply per request on its private pipe, with
the request's nonce: protocol.py). `request()` never raises for anything the child does: a crash, a
timeout, a malformed reply or a protocol violation becomes an error reply and the child is killed;
the next request starts a fresh one. Its wall time is kept in `last_wall_s` (corroborate.py).
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import protocol

_EOF = "\x00<eof>"                                   # sentinel: the child closed its reply pipe


class Worker:
    """A restartable child process; `request()` never raises for anything the child does."""

    def __init__(self, cmd: list[str] | None = None, env: dict | None = None, log_path: str | Path | None = None,
                 extra_env: dict | None = None):
        self.cmd = cmd or [sys.executable, "-m", "kernelseek.worker"]
        if env is None:                                    # FA4 compiles per shape: keep them on disk
            env = dict(os.environ)
            env.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")
            env.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR",
                           str(Path.home() / ".cache" / "kernelseek" / "fa4"))
        self.env = {**env, **(extra_env or {})}
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self._started = 0
        self._buf = b""
        self.violation = ""                  # the first reply-protocol violation seen (protocol.py)
        self.last_wall_s: float | None = None  # the last request's wall time, write to reply (monotonic)
        self._stopped: set[int] = set()      # processes pause() stopped outside the process group

    def _start(self):
        err = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     env=self.env, start_new_session=True)
        self._buf = b""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            left = descendants(self.proc.pid)          # outside the group too (a session of their own)
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            _signal_each(left, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
        self._stopped = set()

    def close(self):
        self.check_stray()
        self.kill()

    def pause(self) -> None:
        """Stop the worker while another worker times: its whole process group (SIGSTOP), so threads
        the candidate left running enqueue nothing, and every process descending from it, found by
        parent pid in /proc until no new one appears (a process the candidate started in a session of
        its own is outside the group; a confined worker's orphans are reparented to its sandbox's
        init, a descendant too). An unconfined worker's orphan, reparented outside, is not found."""
        self._signal(signal.SIGSTOP)
        if self.proc is None or self.proc.poll() is not None:
            return
        for _ in range(16):                            # a stopped process forks no more: a fixed point
            new = descendants(self.proc.pid) - self._stopped
            if not new:
                break
            _signal_each(new, signal.SIGSTOP)
            self._stopped |= new

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        _signal_each(self._stopped, signal.SIGCONT)
        self._stopped = set()

    def _signal(self, sig) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def check_stray(self) -> str:
        """A violation when bytes arrived since the last reply (nobody asked for them); kills the
        worker. Returns the violation ("" if none)."""
        if self.proc is None or self.proc.stdout is None:
            return ""
        extra = self._buf + protocol.stray_bytes(self.proc.stdout.fileno())
        self._buf = b""
        if not extra:
            return ""
        return self._violate(f"{len(extra)} bytes arrived between requests: {extra[:80]!r}")

    def _violate(self, why: str) -> str:
        why = f"reply protocol violated: {why}"
        self.violation = self.violation or why
        self.kill()
        return why

    def _stderr_tail(self, n=1500) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()[-n:]
        return data.decode(errors="replace")

    def request(self, req: dict, timeout: float) -> dict:
        """Send one request; the reply, or {"status": "timeout"|"error", "reason": ...}. Every request
        carries a fresh nonce the reply must echo, and exactly one line may come back (protocol.py):
        anything else kills the worker and is kept in `violation`."""
        stray = self.check_stray()
        if stray:
            return {"status": "error", "reason": stray}
        if self.proc is None or self.proc.poll() is not None:
            self.restarts += self._started                 # every start after the first is a restart
            self._started = 1
            self._start()
        nonce = protocol.new_nonce()
        t0 = time.monotonic()
        self.last_wall_s = None
        try:
            self.proc.stdin.write((json.dumps({**req, "nonce": nonce}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            code = self.proc.poll()
            self.kill()
            return {"status": "error", "reason": f"worker died before the request (exit {code}): {e}; {self._stderr_tail(400)}"}
        line = self._readline(timeout)
        self.last_wall_s = time.monotonic() - t0
        if line is None or line is _EOF:
            code = None
            if line is _EOF:                      # the child closed its end: wait for its exit code
                try:
                    code = self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            if line is None:
                self.kill()
                return {"status": "timeout", "reason": f"no reply within {timeout:.0f} s; worker killed"}
            tail = self._stderr_tail()
            self.kill()
            return {"status": "error", "reason": f"worker crashed (exit {code}): {tail.strip()[-600:]}"}
        rest, self._buf = self._buf, b""
        try:
            reply = protocol.parse_reply(line, nonce, rest)
        except protocol.Violation as e:
            return {"status": "error", "reason": self._violate(str(e))}
        except ValueError as e:
            self.kill()
            return {"status": "error", "reason": f"malformed reply from worker ({e}): {line[:200]!r}"}
        if reply.pop("_exit", False):          # the child asked to be replaced (dead CUDA context)
            self.kill()
        return reply

    def _readline(self, timeout: float) -> str | None:
        out = self.proc.stdout
        sel = selectors.DefaultSelector()
        sel.register(out, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(out.fileno(), 1 << 16)
                if not chunk:
                    return _EOF
                self._buf += chunk
        finally:
            sel.close()
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")


def descendants(root: int, proc: str = "/proc") -> set[int]:
    """The pids of every live process descending from `root` by parent pid (root excluded), read from
    /proc/<pid>/stat; empty where /proc cannot be read."""
    children: dict[int, list[int]] = {}
    try:
        names = [d for d in os.listdir(proc) if d.isdigit()]
    except OSError:
        return set()
    for d in names:
        try:
            with open(f"{proc}/{d}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])    # after "(comm)": state, ppid
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _signal_each(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
