"""While the trusted worker times the baselines, the candidate's worker is stopped
(worker_proc.Worker.pause): its process group, and every process descending from it, such as one
the candidate started in a session of its own, or, confined, an orphan its sandbox's init adopted.
Real processes throughout: a worker that spawns a ticker appending to a file every 5 ms
(tests/fixtures/worker/escaping_worker.py), and bubblewrap for the confined case."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from kernelseek.confine import find_bwrap
from kernelseek.worker_proc import Worker, descendants

REPO = Path(__file__).resolve().parents[2]
ESCAPING = str(REPO / "tests" / "fixtures" / "worker" / "escaping_worker.py")


def _growth(path: Path, wait: float = 0.25) -> int:
    """Bytes the ticker appended to `path` in `wait` seconds."""
    a = path.stat().st_size
    time.sleep(wait)
    return path.stat().st_size - a


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return "gone"
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def _spawn(w: Worker, path: Path, how: str) -> dict:
    r = w.request({"op": "spawn", "file": str(path), "how": how}, timeout=30)
    assert r.get("status") == "passed" and r.get("pid"), r
    assert _growth(path) > 0, "the ticker does not run"
    return r


def test_descendants_follow_parent_pids(tmp_path):
    w = Worker(cmd=[sys.executable, ESCAPING], log_path=tmp_path / "w.log")
    try:
        pid = _spawn(w, tmp_path / "tick", "session")["pid"]
        assert pid in descendants(w.proc.pid) and w.proc.pid not in descendants(w.proc.pid)
        assert os.getpid() not in descendants(w.proc.pid)                          # its parent is not
        assert descendants(2 ** 22 + 7) == set()                                   # no such process
    finally:
        w.kill()


def test_a_process_in_a_session_of_its_own_is_stopped_with_the_worker_and_killed_with_it(tmp_path):
    tick = tmp_path / "tick"
    w = Worker(cmd=[sys.executable, ESCAPING], log_path=tmp_path / "w.log")
    try:
        pid = _spawn(w, tick, "session")["pid"]
        os.killpg(w.proc.pid, signal.SIGSTOP)             # the process group alone misses it
        try:
            assert _growth(tick) > 0 and _state(pid) != "T"
        finally:
            os.killpg(w.proc.pid, signal.SIGCONT)
        w.pause()
        time.sleep(0.05)                                   # a write already under way lands
        assert _growth(tick) == 0 and _state(pid) == "T" and _state(w.proc.pid) == "T"
        w.resume()
        assert _growth(tick) > 0 and _state(pid) != "T"
        # the worker still answers after its pause
        assert w.request({"op": "noop"}, timeout=30).get("status") == "passed"
    finally:
        w.kill()
    for _ in range(200):                                   # killed with the worker, then reaped by init
        if _state(pid) in ("gone", "Z"):
            break
        time.sleep(0.01)
    assert _state(pid) in ("gone", "Z"), _state(pid)


def test_a_confined_workers_orphan_is_stopped_too(tmp_path):
    """Under bubblewrap (--unshare-pid, as confine.py runs the candidate's worker) an orphan goes to
    the sandbox's init, a descendant of the worker's process: the walk finds it."""
    bw = find_bwrap()
    assert bw, "bubblewrap is required (apt-get install bubblewrap): confinement tests fail, not skip"
    tick = tmp_path / "tick"
    cmd = [bw, "--dev-bind", "/", "/", "--unshare-pid", "--die-with-parent", "--", sys.executable, ESCAPING]
    w = Worker(cmd=cmd, log_path=tmp_path / "w.log")
    try:
        _spawn(w, tick, "orphan")
        w.pause()
        time.sleep(0.05)
        assert _growth(tick) == 0
        w.resume()
        assert _growth(tick) > 0
    finally:
        w.kill()
    time.sleep(0.3)
    assert _growth(tick) == 0                              # the sandbox went with the worker
