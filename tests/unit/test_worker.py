"""The worker protocol on a machine without a GPU, through a stand-in child that misbehaves."""
import time


def req(name):
    return {"op": "scenario", "scenario": {"name": name}}


def test_normal_reply(worker):
    r = worker.request(req("ok"), timeout=30)
    assert r["status"] == "passed" and r["time_ms"] == 2.0


def test_crash_becomes_error_and_next_request_gets_fresh_worker(worker):
    r = worker.request(req("crash_me"), timeout=30)
    assert r["status"] == "error" and "exit 3" in r["reason"]
    r2 = worker.request(req("ok_after_crash"), timeout=30)
    assert r2["status"] == "passed"
    assert worker.restarts == 1


def test_timeout_kills_and_recovers(worker):
    t0 = time.monotonic()
    r = worker.request(req("hang_forever"), timeout=1.5)
    assert r["status"] == "timeout" and "no reply within" in r["reason"]
    assert time.monotonic() - t0 < 15
    assert worker.proc is None                      # killed
    assert worker.request(req("ok"), timeout=30)["status"] == "passed"


def test_garbage_reply_is_an_error(worker):
    r = worker.request(req("garbage_out"), timeout=30)
    assert r["status"] == "error" and "malformed reply" in r["reason"]
    assert worker.request(req("ok"), timeout=30)["status"] == "passed"


def test_printing_on_stdout_cannot_corrupt_replies(worker):
    r = worker.request(req("noisy_kernel"), timeout=30)
    assert r["status"] == "passed"
    assert "kernel printf noise" in (worker.log_path.read_text())


def test_failed_check_passes_through(worker):
    r = worker.request(req("fail_check"), timeout=30)
    assert r["status"] == "failed" and "bound" in r["reason"]
