"""Two workers per evaluation: the candidate's, and a trusted one for the baselines.

The candidate library's host code runs in the process that checks and times it (worker.py), so
nothing that process says about the baselines could be trusted. Here the baselines are checked and
timed by a second worker that never loads candidate code, on the same GPU, the same scenario and
seed (the same inputs) and the same timing method (worker._scenario: fresh content per batch, cold
L2, events around batches). The parent merges the two replies into one row and computes the speedup
(evaluate.make_row). Per row:
  1. the candidate's worker: check, timing (baselines "none");
  2. the candidate's worker is stopped (SIGSTOP, its whole process group and every process descending
     from it: a thread or process it left running enqueues nothing; worker_proc.Worker.pause) while
     the baseline worker checks and times the baselines, then runs an
     empty burst and a burst of the fastest baseline (corroborate.py: the calibration);
  3. the candidate's worker resumes and runs a burst of the candidate; the parent's clock judges
     its claimed time (corroborate.judge), and its kernel_ms (corroborate.accounting); with graph
     timing, a graph burst judges its graph time, which is moved out of the row unless corroborated
     (the trusted worker's graph burst of its fastest graphed baseline, in step 2, calibrates it).
     External times go into the row (`corroboration`).
Interleaving is per row, not per batch as in one process: both sides see the same cache state
through the defence's refresh and flush before every batch.
"""
from __future__ import annotations

import re
import shutil
import time

from . import corroborate as CO
from . import graph_timing as GT

PATH_RE = re.compile(r"[a-z0-9_ +-]{1,24}")   # the kernel's path label (abi.KernelLib.last_path)
ROUND_REPLAYS = 5        # timed replays per implementation per round (--graph-rounds)


def fastest_baseline(baselines: dict) -> tuple[str, float] | None:
    """(name, per-call ms) of the fastest real baseline that passed (stand-ins never count)."""
    timed = [(n, b["time_ms"]) for n, b in baselines.items()
             if b.get("status") == "passed" and b.get("time_ms") and "standin" not in n]
    return min(timed, key=lambda x: x[1]) if timed else None


def round_order(order: list[str], k: int) -> list[str]:
    """Round k's order of the implementations (--graph-rounds): A B C, then C B A, and so on. Within a
    round a drift favours the early ones, and who precedes whom alternates, so the cost of a switch
    between implementations (if any) lands on every side alike."""
    return list(order) if k % 2 == 0 else list(order)[::-1]


class WorkerPair:
    """The candidate's worker (`cand`) and the trusted baseline worker (`base`, None: check only)."""

    def __init__(self, cand, base, scratch=()):
        self.cand, self.base, self.scratch = cand, base, list(scratch)

    def close(self, rows: list) -> dict:
        """Close both workers (each takes a last look for stray bytes) and remove their scratch
        folders; fail `rows` on a protocol violation. Returns the run's meta fields."""
        for x in (self.cand, self.base):
            if x is not None:
                x.close()
        for d in self.scratch:
            shutil.rmtree(d, ignore_errors=True)
        meta = {"worker_restarts": self.cand.restarts,
                "baseline_worker_restarts": self.base.restarts if self.base else None}
        if self.violation:
            violated(rows, self.violation)
            meta["protocol_violation"] = self.violation
        return meta

    @property
    def violation(self) -> str:
        return self.cand.violation

    def request(self, req: dict, timeout: float) -> dict:
        """Meta and other plain requests: the baseline worker's answer when there is one (trusted),
        with the candidate worker's run-time check state."""
        c = self.cand.request(req, timeout)
        if self.base is None:
            return c
        b = self.base.request(req, timeout)
        b["runcheck"] = c.get("runcheck", b.get("runcheck"))
        b["candidate_worker"] = {k: c.get(k) for k in ("status", "reason", "gpu", "runcheck") if k in c}
        return b

    def scenario(self, req: dict, timeout: float) -> dict:
        """One row's merged reply (see the module docstring)."""
        c = _numbers_only(self.cand.request({**req, "baseline": "none"}, timeout))
        ext = {"candidate_request_s": _r(self.cand.last_wall_s)}
        if self.base is None:                      # checking only: no time is judged, none kept
            if c.get("graph_ms"):
                _drop_graph(c, ext, "no trusted worker (checking only)")
            return {**c, "corroboration": ext}
        self.cand.pause()
        try:
            b = self.base.request({**req, "kernel_so": None}, timeout)
            ext["baseline_request_s"] = _r(self.base.last_wall_s)
            out = dict(c)
            out["baselines"] = b.get("baselines") or {}
            out["baselines_skipped"] = b.get("baselines_skipped") or []
            out["baselines_declined"] = b.get("baselines_declined") or {}
            if b.get("status") not in ("passed", None) and not out["baselines"]:
                out["baselines_skipped"] = out["baselines_skipped"] + [f"baseline worker: {b.get('reason', '')[:200]}"]
                out["baselines_declined"] = {**out["baselines_declined"],
                                             "baseline worker": f"failed: {b.get('reason', '')[:200]}"}
            phases = dict(c.get("phases_s") or {})
            for k, v in (b.get("phases_s") or {}).items():
                phases[k] = phases.get(k, 0.0) + v
            out["phases_s"] = phases
            if req.get("graph_rounds"):
                t = time.perf_counter()
                self._graph_rounds(out, int(req["graph_rounds"]), timeout, ext)
                # its own phase: on bench26 x 6 peers, 4 rounds cost ~170 s of a 491 s run (session 12)
                phases["graph_rounds"] = phases.get("graph_rounds", 0.0) + time.perf_counter() - t
            calib = self._calibrate(out["baselines"], timeout) if _timed(c) else None
            gcal = self._calibrate_graph(out["baselines"], req, timeout) if _timed(c) and c.get("graph_ms") else None
        finally:
            self.cand.resume()
        if calib is not None:
            self._judge(out, calib, ext, timeout)
            why = CO.accounting(out["time_ms"], out.get("kernel_ms"), out.get("sync_ms")) if _timed(out) else ""
            if why:
                _fail(out, why)                  # the worker's own check, re-applied to what it said
        self._judge_graph(out, calib, gcal, ext, timeout)
        out["corroboration"] = ext
        return out

    def _graph_rounds(self, out: dict, rounds: int, timeout: float, ext: dict) -> None:
        """--graph-rounds: `rounds` rounds of ROUND_REPLAYS timed replays, the candidate's graph then
        each graphed baseline's, in turn, every other round in reverse order (the candidate's worker
        runs only for its own request); each
        graph_ms becomes the median over its round replays (solo median kept as graph_solo_ms). The
        candidate's times are its claims like any: _judge_graph corroborates the new graph_ms."""
        names = [n for n, b in out["baselines"].items() if b.get("status") == "passed" and b.get("graph_ms")]
        if out.get("status") != "passed" or not out.get("graph_ms") or not names:
            return
        xs: dict[str, list[float]] = {"candidate": [], **{n: [] for n in names}}
        wall = dict.fromkeys(xs, 0.0)            # the parent's clock per implementation: where the rounds' time goes
        order = list(xs)
        for k in range(rounds):
            for n in round_order(order, k):
                w = self.cand if n == "candidate" else self.base
                if w is self.cand:
                    self.cand.resume()
                try:
                    r = w.request({"op": "graph_more", "impl": n, "replays": ROUND_REPLAYS}, timeout)
                    wall[n] += w.last_wall_s or 0.0          # (read before a pause clears it)
                finally:
                    if w is self.cand:
                        self.cand.pause()
                got = round_times(r, ROUND_REPLAYS)
                if isinstance(got, str):
                    ext["graph_rounds"] = {"rounds": rounds, "stopped": f"{n}: {got}"}
                    if n == "candidate":
                        _fail(out, f"graph rounds: the candidate's worker: {got}")
                    return
                xs[n] += got
        for n, v in xs.items():
            rec = out if n == "candidate" else out["baselines"][n]
            rec["graph_solo_ms"] = rec["graph_ms"]
            rec.update(GT.summary(v))
        ext["graph_rounds"] = {"rounds": rounds, "replays": ROUND_REPLAYS, "order": order,
                               "solo_ms": {n: (out if n == "candidate" else out["baselines"][n])["graph_solo_ms"]
                                           for n in xs},
                               # every replay, round by round: whether the first of a round runs slow
                               "times_ms": {n: [round(x, 5) for x in v] for n, v in xs.items()},
                               # seconds of requests per implementation (replays, refreshes, flushes, checks)
                               "wall_s": {n: round(v, 6) for n, v in wall.items()}}

    def _calibrate(self, baselines: dict, timeout: float):
        """(fixed ms, (wall, calls, claimed) of the fastest baseline's burst or None), or a reason
        string when the trusted worker could not run them."""
        r = self.base.request({"op": "burst", "calls": 0}, timeout)
        if r.get("status") != "passed":
            return f"the baseline worker's empty burst failed: {r.get('reason', '')[:200]}"
        fixed = self.base.last_wall_s * 1e3
        best = fastest_baseline(baselines)
        if best is None:
            return fixed, None
        n = CO.burst_calls(best[1])
        r = self.base.request({"op": "burst", "impl": best[0], "calls": n}, timeout)
        if r.get("status") != "passed":
            return fixed, None
        return fixed, (self.base.last_wall_s * 1e3, n, best[1])

    def _calibrate_graph(self, baselines: dict, req: dict, timeout: float):
        """(calls per graph m, (wall, calls, claimed graph ms) of the fastest graphed baseline's graph
        burst, or None), for the candidate's graph burst."""
        from .scenarios import Scenario
        sd = {k: tuple(v) if isinstance(v, list) else v for k, v in req["scenario"].items()}
        m = CO.graph_sets(Scenario(**sd).min_bytes())
        timed = [(n, b["graph_ms"]) for n, b in baselines.items()
                 if b.get("status") == "passed" and b.get("graph_ms") and "standin" not in n]
        if not timed:
            return m, None
        name, ms = min(timed, key=lambda x: x[1])
        got = self._graph_burst(self.base, name, m, ms, timeout)
        return m, (got if isinstance(got, tuple) else None)

    @staticmethod
    def _graph_burst(w, impl: str, m: int, claimed: float, timeout: float):
        """A graph of m calls of `impl` captured by worker `w` (not timed), then its burst: (wall ms,
        calls) on the parent's clock, or why not (a string)."""
        r = w.request({"op": "graph", "impl": impl, "sets": m}, timeout)
        if r.get("status") != "passed":
            return f"its graph of {m} calls could not be captured: {str(r.get('reason', ''))[:200]}"
        n = CO.burst_calls(claimed)
        want = -(-n // m) * m
        r = w.request({"op": "burst", "impl": impl, "calls": n, "graph": True}, timeout)
        if r.get("status") != "passed" or r.get("calls") != want:
            why = r.get("reason") or f"it answered {r.get('calls')!r} calls for {want}"
            return f"its graph burst failed: {str(why)[:200]}"
        return w.last_wall_s * 1e3, want, claimed

    def _judge_graph(self, out: dict, calib, gcal, ext: dict, timeout: float) -> None:
        """Keep the candidate's graph time only when the parent's clock corroborates it (a graph burst
        of m calls per replay, m the parent's: corroborate.graph_sets); otherwise move it out of the
        row into `corroboration.graph`, so graph_speedup, the goal's graph measure, peers and the
        ledger never see it."""
        claimed = out.get("graph_ms")
        if not claimed:
            return
        if self.base is None or not isinstance(calib, tuple) or gcal is None:
            return _drop_graph(out, ext, "no trusted calibration (empty burst) for this row")
        if out.get("status") != "passed":
            return _drop_graph(out, ext, "the row did not pass")
        m, base = gcal
        got = self._graph_burst(self.cand, "candidate", m, float(claimed), timeout)
        if isinstance(got, str):
            return _drop_graph(out, ext, f"the candidate's worker: {got}")
        v = CO.judge(float(claimed), got[0], got[1], calib[0], base, what="CUDA-graph time")
        ext["graph"] = {**v.as_dict(), "sets": m}
        if not v.ok:
            _drop_graph(out, ext, v.reason)

    def _judge(self, out: dict, calib, ext: dict, timeout: float) -> None:
        if isinstance(calib, str):
            ext["note"] = f"not corroborated: {calib}"
            return
        fixed, base = calib
        claimed = float(out["time_ms"])                 # a number: _numbers_only
        n = CO.burst_calls(claimed)
        r = self.cand.request({"op": "burst", "impl": "candidate", "calls": n}, timeout)
        if r.get("status") != "passed" or r.get("calls") != n:
            why = r.get("reason") or f"it answered {r.get('calls')!r} calls for {n}"
            _fail(out, f"timing not corroborated: the candidate's burst of {n} calls failed: {why[:300]}")
            return
        v = CO.judge(claimed, self.cand.last_wall_s * 1e3, n, fixed, base)
        ext.update(v.as_dict(), unchecked=list(CO.UNCHECKED))
        if not v.ok:
            _fail(out, v.reason)


def _worker(worker_cmd, so, baseline: str, arch: str, log_path, confine: bool, extra_env: dict):
    """(the worker, its scratch folder or None): plain, or confined (kernelseek.confine.confined_worker).
    `extra_env`: KSEEK_* settings for the worker (the defence's)."""
    if confine:
        from .confine import confined_worker
        return confined_worker(worker_cmd, so, baseline, arch, log_path, extra_env)
    from .worker_proc import Worker
    return Worker(cmd=worker_cmd, log_path=log_path, extra_env=extra_env), None


def start_pair(worker_cmd, so, baseline: str, arch: str, logs, confine: bool, extra_env: dict,
               check_only: bool) -> WorkerPair:
    """The candidate's worker, which loads `so` and runs no baseline, and the trusted baseline worker,
    which never loads candidate code (none when checking only), with the same settings and
    confinement; `logs`: the run (store.Run) whose worker logs they write. Not started until asked."""
    cand, s1 = _worker(worker_cmd, so, "none", arch, logs.worker_log, confine, extra_env)
    if check_only:
        return WorkerPair(cand, None, [d for d in (s1,) if d])
    base, s2 = _worker(worker_cmd, None, baseline, arch, logs.baseline_worker_log, confine, extra_env)
    return WorkerPair(cand, base, [d for d in (s1, s2) if d])


def _timed(reply: dict) -> bool:
    return reply.get("status") == "passed" and bool(reply.get("time_ms"))


# The candidate's numbers a row keeps (evaluate.make_row); results.load refuses a file holding
# anything else there, so a forged reply must not put it on disk.
NUMERIC = ("max_err", "ref_err", "err_bound", "err_ratio", "lse_err", "time_ms", "time_p10_ms",
           "time_p90_ms", "kernel_ms", "host_ms", "sync_ms", "graph_ms", "graph_p10_ms", "graph_p90_ms")


def _numbers_only(reply: dict) -> dict:
    """The candidate's reply with every NUMERIC field a number or None; a field that held anything
    else (a forged reply may send anything) is set to None and fails the row, naming it."""
    bad = [k for k in NUMERIC if reply.get(k) is not None
           and (isinstance(reply[k], bool) or not isinstance(reply[k], (int, float)))]
    for k in bad:
        why = f"{k} {str(reply[k])[:40]!r} is not a number"
        reply[k] = None
        if reply.get("status") in ("passed", "failed"):
            _fail(reply, f"the candidate's worker replied: {why}")
    if reply.get("path") is not None and not (isinstance(reply["path"], str) and PATH_RE.fullmatch(reply["path"])):
        reply["path"] = "unreadable"                     # a label for triage only: never judged
    return reply


def round_times(reply: dict, n: int):
    """The n per-call times of a "graph_more" reply, or why they cannot be used (a string): its
    failure, or anything but n finite positive numbers (a forged reply may send anything)."""
    if reply.get("status") != "passed":
        return f"{reply.get('status')}: {str(reply.get('reason', ''))[:300]}"
    xs = reply.get("times_ms")
    if not isinstance(xs, list) or len(xs) != n or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < float("inf") for x in xs):
        return f"graph_more replied {str(xs)[:60]!r}, not {n} positive times"
    return [float(x) for x in xs]


def _r(x):
    return round(x, 4) if x is not None else None


def _drop_graph(out: dict, ext: dict, why: str) -> None:
    """Move the candidate's uncorroborated graph times out of the reply (kept in ext["graph"])."""
    claimed = {k: out.pop(k, None) for k in ("graph_ms", "graph_p10_ms", "graph_p90_ms")}
    ext["graph"] = {**ext.get("graph", {}), "ok": False, "claimed": claimed, "reason": why}
    note = f"graph time not corroborated, not used: {why}"
    out["graph_note"] = f"{out['graph_note']}; {note}" if out.get("graph_note") else note


def _fail(out: dict, reason: str) -> None:
    out["reason"] = f"{out['reason']}; {reason}" if out.get("status") == "failed" and out.get("reason") else reason
    out["status"] = "failed"


def violated(rows: list, why: str) -> None:
    """Fail every row of a run whose candidate worker broke the reply protocol: none of that
    process's replies can be told from a forged one."""
    for r in rows:
        if r.status in ("passed", "failed"):
            r.reason = why if r.status == "passed" else f"{r.reason}; {why}"
            r.status = "failed"
            r.speedup = r.kernel_speedup = None
