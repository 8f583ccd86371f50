"""One loop per campaign: an exclusive lock on campaigns/<id>/lock, held while the loop runs.

    lock = CampaignLock(root).acquire()     # CampaignLocked when another loop holds it
    ...
    lock.release()

The lock is a flock(2) on the file, so the kernel drops it when its process dies, however it
dies (SIGKILL included); the file's content says who holds it (pid, host, start time, command)
for the refusal message. A clean release empties the file. Finding the flock free but the file
not empty means the last holder died without releasing: the new loop takes over and
`previous` holds the dead holder's record (the loop writes it to the trace as `lock_takeover`
and kills the processes its tools left running in the workspace).
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from ..store import Campaign



class CampaignLocked(OSError):
    """Another loop runs this campaign. (An OSError, so every command reports it as an input error.)"""


def pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


class CampaignLock:
    def __init__(self, root):
        self.root = Path(root)
        self.path = Campaign(self.root).lock
        self.fd: int | None = None
        self.previous: dict | None = None     # a dead holder's record, when taken over

    def _read(self, fd) -> dict:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 65536).decode(errors="replace").strip()
        try:
            rec = json.loads(raw) if raw else {}
        except ValueError:
            rec = {"unreadable": raw[:200]}
        return rec if isinstance(rec, dict) else {"unreadable": raw[:200]}

    def acquire(self) -> "CampaignLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            h = self._read(fd)
            os.close(fd)
            raise CampaignLocked(
                f"{self.root}: this campaign is already running (pid {h.get('pid', '?')} on "
                f"{h.get('host', '?')}, since {h.get('started_utc', '?')}: {h.get('command', '?')}); "
                f"wait for it to stop, or end it (kill {h.get('pid', '<pid>')}) and then resume it") from None
        prev = self._read(fd)
        self.previous = prev or None
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "command": " ".join(sys.argv)[:300]}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(me).encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None
