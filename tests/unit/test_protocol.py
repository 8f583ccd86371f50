"""The worker's reply protocol (kernelseek/protocol.py) with real child processes: a nonce per
request, exactly one reply; a violation kills the worker and fails every row of the run."""
from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelseek import evaluate as E
from kernelseek import protocol
from kernelseek.worker import Worker

REPO = Path(__file__).resolve().parents[2]
STANDIN = [sys.executable, str(REPO / "tests" / "fixtures" / "worker" / "standin_worker.py")]
NAIVE = REPO / "kernels" / "naive_fwd.cu"


def req(name):
    return {"op": "scenario", "scenario": {"name": name}}


def test_nonces_are_fresh_and_unpredictable():
    seen = {protocol.new_nonce() for _ in range(1000)}
    assert len(seen) == 1000 and all(len(n) == 2 * protocol.NONCE_BYTES for n in seen)


def test_parse_reply_rules():
    assert protocol.parse_reply('{"status": "passed", "nonce": "ab"}', "ab", b"") == {"status": "passed"}
    with pytest.raises(protocol.Violation, match="nonce"):
        protocol.parse_reply('{"status": "passed", "nonce": "ac"}', "ab", b"")
    with pytest.raises(protocol.Violation, match="nonce"):
        protocol.parse_reply('{"status": "passed"}', "ab", b"")
    with pytest.raises(protocol.Violation, match="bytes after the reply"):
        protocol.parse_reply('{"status": "passed", "nonce": "ab"}', "ab", b'{"status": "passed"}\n')
    with pytest.raises(ValueError):
        protocol.parse_reply("not json", "ab", b"")


def test_an_honest_child_passes_and_records_the_wall_time(worker):
    r = worker.request(req("ok"), timeout=30)
    assert r["status"] == "passed" and "nonce" not in r and worker.violation == ""
    assert 0 < worker.last_wall_s < 30


def test_a_forged_line_before_the_reply_is_a_violation_and_kills_the_worker(worker):
    r = worker.request(req("forge_first"), timeout=30)
    assert r["status"] == "error" and "reply protocol violated" in r["reason"] and "nonce" in r["reason"]
    assert worker.proc is None and worker.violation == r["reason"]
    assert worker.request(req("ok"), timeout=30)["status"] == "passed"     # a fresh worker answers
    assert worker.violation                                                 # and the violation is kept


def test_two_replies_to_one_request_are_a_violation(worker):
    r = worker.request(req("double"), timeout=30)
    if r["status"] == "passed":              # the second line came in a later read: seen before the next
        time.sleep(0.3)
        r = worker.request(req("ok"), timeout=30)
    assert r["status"] == "error" and "reply protocol violated" in r["reason"], r
    assert worker.violation


def test_a_thread_writing_after_the_reply_is_caught_before_the_next_request(worker):
    assert worker.request(req("late"), timeout=30)["status"] == "passed"
    time.sleep(0.8)                          # the child's thread writes 0.3 s after its reply
    r = worker.request(req("ok"), timeout=30)
    assert r["status"] == "error" and "between requests" in r["reason"]
    assert worker.violation and worker.proc is None


def test_the_real_worker_echoes_the_nonce(tmp_path):
    w = Worker(log_path=tmp_path / "w.log", extra_env={"KSEEK_RUNCHECK": "0"})
    try:
        r = w.request({"op": "no_such_op"}, timeout=120)
        assert r["status"] == "error" and "unknown op" in r["reason"] and w.violation == ""
        r = w.request({"op": "burst", "impl": "candidate", "calls": 3}, timeout=120)
        assert r["status"] == "error" and "no timed implementation" in r["reason"]
    finally:
        w.close()


GRID = textwrap.dedent("""\
    grid: standin
    defaults: {dtype: bf16, batch: 1, seqlen_q: 128, seqlen_k: 128, heads_q: 4, heads_kv: 2, head_dim: 64}
    scenarios:
    - {name: ok_first}
    - {name: late_writer}
    - {name: ok_last}
""")


def test_a_violation_fails_every_row_of_the_run(tmp_path, monkeypatch):
    """The late writer's row and the one before it passed when they were made, the one after it
    comes from a fresh worker; the stray line (read where the next reply was due) fails them all:
    no reply of a library whose process wrote one can be believed."""
    monkeypatch.setenv("KSEEK_CACHE_DIR", str(tmp_path / "cache"))
    grid = tmp_path / "g.yaml"
    grid.write_text(GRID)
    run, rows, meta = E.evaluate(str(NAIVE), str(grid), baseline="cudnn", timeout_s=5.0, budget_s=0.1,
                                 runs_dir=str(tmp_path / "runs"), progress=False, worker_cmd=STANDIN)
    # where the stray line is read (as a burst's reply, or before the next request) depends on timing:
    # the request it is read at gets an error row; every other row is failed
    assert {r.status for r in rows} <= {"failed", "error"} and "failed" in {r.status for r in rows}, \
        [(r.status, r.reason) for r in rows]
    assert all("reply protocol violated" in r.reason for r in rows)
    assert meta["protocol_violation"].startswith("reply protocol violated")
    assert all(r.speedup is None for r in rows)
