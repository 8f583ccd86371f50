"""The worker's defences, in one place: fresh inputs for timing and the run-time code check.

The worker (worker.py) calls this module at a few points of a scenario; everything here runs in
the child process that owns the GPU:
    start_monitor()                    at process start, before CUDA loads anything (runcheck.py)
    d = Defence.begin(req)             a scenario starts: its settings, the candidate's own code
    lib = d.load(so)                   dlopen inside the run-time check's window
    with d.window(): ...               a candidate call (checked, trap) inside the window
    pool = timing_pool(...); hooks = d.hooks(pool, verify)   the input sets (SetPool) and timing's hooks
    d.after_timing(pool, call0, verify)   the in-place check and the near-repeat traps
    graph_timing(d, pool, hooks, ...)  CUDA-graph replay time, refreshed and verified between replays
    baseline_graph_timing(pool, hooks, name)   a baseline's graph replay time, refreshed likewise
    candidate_graph_call / baseline_graph_call   the calls a graph holds (the worker's graph burst too)
    Defence.end(reply)                 the reply: the run-time check's verdict, the defence's cost
With `"defence": false` in the request (kernelseek eval --no-defence) timing runs the old loop
(rotation over fixed sets, no refresh, no verification, no traps) and no code check is made; only
the in-place check after timing stays. That mode exists to measure the defence's cost.
"""
from __future__ import annotations

import contextlib
import os
import random
import time

import torch

from . import fresh, timing
from . import graph_timing as GT

STALE = "stale or skipped work"        # in every reason of a wrong answer from memory
VERIFY_P = 0.125                       # chance that a batch (besides the last) is verified
MAX_VERIFY = 3                         # verified batches at most, besides the last
MAX_K = 64                             # calls per batch at most (one input set each)

_monitor = None                         # runcheck.Monitor, when it started
_monitor_note = "not started"
_current: "Defence | None" = None
_candidate_loaded = False               # a candidate library is mapped in this process


def start_monitor() -> str:
    """Start the run-time check in this process, unless KSEEK_RUNCHECK=0; returns its state."""
    global _monitor, _monitor_note
    if os.environ.get("KSEEK_RUNCHECK", "1") == "0":
        _monitor_note = "off (KSEEK_RUNCHECK=0)"
        return _monitor_note
    try:
        import torch  # noqa: F401  (first: its libcupti, if it links one, is then the one we use)
        from .runcheck import Monitor
        _monitor = Monitor.start(os.environ.get("KSEEK_TRUST_SHIM") or None)
        _monitor_note = f"on: {_monitor.cupti}; {_monitor.note}"
    except Exception as e:   # no compiler, no CUPTI, a profiler attached: say so in every row
        _monitor_note = f"unavailable: {type(e).__name__}: {str(e)[:300]}"
    return _monitor_note


def monitor_state() -> str:
    return _monitor_note


class Defence:
    """One scenario's defences (see the module docstring)."""

    def __init__(self, on: bool, so: str | None):
        self.on = on
        self.monitor = _monitor if on else None
        self.own = None
        self.cost = {"defence_refresh": 0.0, "defence_verify": 0.0, "defence_traps": 0.0, "runcheck": 0.0}
        self.failures: list[str] = []
        self.gen = None
        if so and self.monitor is not None:
            from .cubins import own_code
            t = time.perf_counter()
            self.own = own_code(so)
            self.cost["runcheck"] += time.perf_counter() - t
        self.carried = []
        if self.monitor is not None:            # launches between scenarios: the harness's own, except
            self.carried = [x for x in self.monitor.take() if x.other_thread and _candidate_loaded]

    @classmethod
    def begin(cls, req: dict) -> "Defence":
        global _current
        _current = cls(bool(req.get("defence", True)), req.get("kernel_so"))
        return _current

    @staticmethod
    def end(reply: dict) -> dict:
        """Add the run-time check's verdict and the defence's cost to a scenario's reply."""
        global _current
        d, _current = _current, None
        if d is None:
            return reply
        reply.setdefault("phases_s", {}).update({k: v for k, v in d.cost.items() if v})
        reply["defence"] = d.on
        if not d.on:
            reply["runcheck"] = "off"
            return reply
        if d.monitor is None:
            reply["runcheck"] = _monitor_note
            return reply
        t = time.perf_counter()
        reasons, weak = d.monitor.check(d.own, d.carried) if d.own is not None else ([], 0)
        reply.setdefault("phases_s", {})["runcheck"] = reply["phases_s"].get("runcheck", 0.0) + time.perf_counter() - t
        reply["runcheck"] = "refused" if reasons else (
            f"ok (by kernel-name set for {weak} launches: the driver gave CUPTI no cubin)" if weak else "ok")
        if reasons:
            reply["status"] = "refused"
            shown = "; ".join(reasons[:4]) + (f"; and {len(reasons) - 4} more" if len(reasons) > 4 else "")
            reply["reason"] = ("run-time check: only the candidate's own device code may run in its calls: " + shown
                               + (f" (also: {reply['reason']})" if reply.get("reason") else ""))
        return reply

    def window(self):
        return self.monitor.window() if self.monitor is not None else contextlib.nullcontext()

    def load(self, abi, so: str):
        global _candidate_loaded
        _candidate_loaded = True                  # from now on, other threads' launches may be its
        with self.window():                       # library constructors run at dlopen
            return abi.load(so)

    # ---- timing -------------------------------------------------------------------------------
    def hooks(self, pool: "SetPool", verify) -> timing.Hooks:
        """timing.Hooks for this scenario: the defended loop, or the old one when off."""
        if not self.on:
            return _Window(self)
        self.gen = fresh.urandom_generator(pool.device)
        return DefenceHooks(self, pool, verify)

    def after_timing(self, pool: "SetPool", call0, check) -> None:
        """The checks after timing, on set 0 (same pointers): new content in place, then the near
        repeats (fresh.TRAPS). `call0()` calls the candidate on set 0; `check(inp, o, lse)` gives a
        check.CheckResult. Failures are collected in self.failures."""
        t = time.perf_counter()
        st, (o, lse) = pool.sets[0], pool.outputs(0)
        gen = self.gen or fresh.urandom_generator(pool.device)
        steps = [("in place", None)] + ([(f.__name__, f) for f in fresh.TRAPS] if self.on else [])
        rng = fresh.trap_rng()
        for label, trap in steps:
            if trap is None:
                fresh.refresh_(st, gen)
                what = "after timing, with the inputs changed in place (same pointers)"
            else:
                where = trap(pool.s, st, rng)
                what = (f"near repeat after timing ({where} changed in place, everything else as in the "
                        f"previous call)")
            fresh.scramble_outputs_(o, lse, gen)
            with self.window():
                call0()
            _sync()
            c = check(st, o, lse)
            if not c.passed:
                self.failures.append(f"{what}, the output is wrong ({STALE}? an answer from memory?): {c.reason}")
                break
        if self.on:
            self.cost["defence_traps"] += time.perf_counter() - t


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def candidate_graph_call(pool: "SetPool", lib):
    """make_call(stream_handle) -> call(i): the candidate's prepared call on set i, launched on the
    capture stream (graph_timing.capture_graph)."""
    def make_call(stream_handle):
        def call(i):
            rc = lib.fwd(pool.cand[i].params, stream_handle)
            if rc != 0:
                raise RuntimeError(f"kernel returned status {rc} on the capture stream")
        return call
    return make_call


def baseline_graph_call(pool: "SetPool", name: str):
    """make_call(stream_handle) -> call(i): baseline `name`'s bound call on set i (baselines launch on
    torch's current stream, which capture_graph sets to the capture stream)."""
    calls = pool.base.get(name) or []

    def make_call(_stream_handle):
        return lambda i: calls[i]()
    return make_call


def graph_timing(d: "Defence", pool: "SetPool", hooks: timing.Hooks, lib, keep: dict | None = None) -> dict:
    """The candidate's CUDA-graph replay time on up to 8 of the pool's sets, refreshed and verified
    between replays like eager batches (graph_timing.time_graph). {"graph_ms": ...} or {"graph_note": why};
    a wrong replayed output lands in d.failures. `keep` receives the captured graph (GraphTimer)."""
    make_call = candidate_graph_call(pool, lib)
    n = min(len(pool.sets), 8)
    if isinstance(hooks, DefenceHooks):
        hooks.verified = 0
    before = len(d.failures)
    try:
        ms, p10, p90 = GT.time_graph(make_call, n, hooks, keep=keep)
    except RuntimeError as e:
        return {"graph_note": str(e)}
    mark_graph_failures(d, before)
    return {"graph_ms": ms, "graph_p10_ms": p10, "graph_p90_ms": p90}


def mark_graph_failures(d: "Defence", before: int) -> None:
    """Say where the failures after index `before` happened: in graph replay."""
    for k in range(before, len(d.failures)):
        d.failures[k] = "in CUDA-graph replay (fixed pointers, content refreshed between replays): " + d.failures[k]


def baseline_graph_timing(pool: "SetPool", hooks: timing.Hooks, name: str, keep: dict | None = None) -> dict:
    """A baseline's CUDA-graph replay time on up to 8 of the pool's sets (its calls bound to each set),
    under the same refresh and flush between replays as the candidate's (graph_timing.time_graph; baselines are
    not verified). {"graph_ms", "graph_p10_ms", "graph_p90_ms"} or {"graph_note": why it could not be
    captured}: a call that synchronizes with the host, say, cannot be."""
    calls = pool.base.get(name) or []
    n = min(len(pool.sets), 8, len(calls))
    if n == 0:
        return {"graph_note": "no bound calls"}
    make_call = baseline_graph_call(pool, name)
    try:
        ms, p10, p90 = GT.time_graph(make_call, n, hooks, name=name, keep=keep)
    except Exception as e:                              # a capture that breaks leaves the others timed
        _sync()
        return {"graph_note": f"{type(e).__name__}: {str(e)[:200]}"}
    return {"graph_ms": ms, "graph_p10_ms": p10, "graph_p90_ms": p90}


class _Window(timing.Hooks):
    """The undefended loop, with the run-time check's window still around the candidate's calls."""

    def __init__(self, d: Defence):
        self.d = d

    def window(self, name):
        return self.d.window() if name == "candidate" else contextlib.nullcontext()

    def kernel_ms(self, name, call, sets):
        """Device time from the monitor's activity records (CUPTI takes one client per process,
        so torch's profiler cannot run beside it); torch's profiler when there is no monitor."""
        mon = self.d.monitor
        if mon is None:
            return super().kernel_ms(name, call, sets)
        out: dict = {}
        _sync()
        try:
            with mon.activity(out):
                for i in sets:
                    call(i)
                _sync()
        except RuntimeError:                    # CUPTI's activity API refused: torch's profiler then
            return super().kernel_ms(name, call, sets)
        from .runcheck import device_ms
        total = device_ms(out.get("records", []))
        return total / len(sets) if total > 0 else None


class DefenceHooks(_Window):
    """Fresh content and a cold L2 before every batch; sampled verification after the candidate's."""
    distinct_sets = True

    def __init__(self, d: Defence, pool: "SetPool", verify):
        super().__init__(d)
        self.pool, self.verify = pool, verify
        self.flush = fresh.L2Flush(pool.device)
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.verified = 0

    def before_batch(self, name, sets):
        t = time.perf_counter()
        for i in sets:
            fresh.refresh_(self.pool.sets[i], self.d.gen)
            if name == "candidate":
                fresh.scramble_outputs_(*self.pool.outputs(i), self.d.gen)
        self.flush()
        _sync()
        self.d.cost["defence_refresh"] += time.perf_counter() - t

    def after_batch(self, name, sets, batch, last):
        if name != "candidate" or self.d.failures:
            return
        if not last and (self.verified >= MAX_VERIFY or self.rng.random() >= VERIFY_P):
            return
        t = time.perf_counter()
        self.verified += not last
        i = self.rng.choice(sets)
        c = self.verify(self.pool.sets[i], *self.pool.outputs(i))
        if not c.passed:
            self.d.failures.append(f"a timed call's output is wrong (batch {batch}, input set {i}: {STALE}? an "
                                   f"answer from memory?): {c.reason}")
        self.d.cost["defence_verify"] += time.perf_counter() - t

    def grow(self, n_sets, want):
        t = time.perf_counter()
        n = self.pool.grow(min(want, MAX_K))
        self.d.cost["defence_refresh"] += time.perf_counter() - t
        return n


class SetPool:
    """The timing's input sets, each with the candidate's prepared call (an abi.Launch: its own O,
    LSE, workspace and params) and each baseline bound to it. `grow` adds sets (one per call of the
    longest batch). make_set(i) -> Inputs; candidate(inputs) -> Launch (None: no candidate);
    bind_baselines(inputs) -> {name: call}."""

    def __init__(self, s, seed: int, device: str, make_set, candidate_outputs, bind_baselines):
        self.s, self.seed, self.device = s, seed, device
        self._make_set, self._cand, self._bind = make_set, candidate_outputs, bind_baselines
        self.sets, self.cand, self.base = [], [], {}

    def outputs(self, i: int):
        return self.cand[i].o, self.cand[i].lse

    def add(self) -> None:
        st = self._make_set(len(self.sets))
        self.sets.append(st)
        if self._cand is not None:
            self.cand.append(self._cand(st))
        for name, call in self._bind(st).items():
            self.base.setdefault(name, []).append(call)

    def bytes_per_set(self) -> float:
        ts = list(self.sets[0].tensors().values()) + [t for t in (self.outputs(0) if self.cand else ())
                                                       if t is not None]
        return float(sum(t.numel() * t.element_size() for t in ts))

    def grow(self, want: int) -> int:
        free = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else 1e9
        target = fresh.sets_for(want, self.bytes_per_set(), len(self.sets), free)
        while len(self.sets) < target:
            self.add()
        return len(self.sets)


# ---- the worker's timing setup ----------------------------------------------------------------
def timing_pool(job, lib, bound: dict, out: dict, guard) -> "SetPool":
    """The timing's input sets (defence.SetPool): each with the candidate's prepared launch (its own
    outputs and workspace) and each baseline bound to it; more are added when a batch needs them."""
    from . import abi
    from .inputs import alloc_outputs

    def launch_for(st):
        o, lse = alloc_outputs(job.s, st)               # the harness's poison fill: outside the window
        with guard.window():                            # the workspace query is the candidate's code
            return abi.Launch(lib, job.s, st, o, lse)

    def bind_all(st):
        calls = {}
        for name, b in list(bound.items()):
            try:
                calls[name] = b.bind(job.s, st).call
            except Exception as e:
                if pool.base.get(name):                   # bound before: time it on that set again
                    calls[name] = pool.base[name][-1]
                    continue
                out["baselines"][name].update(status="error", reason=f"bind for timing: {e}")
                bound.pop(name)
        return calls

    pool = SetPool(job.s, job.seed, "cuda", lambda i: job.inputs(job.seed + 1 + i),
                   launch_for if lib is not None else None, bind_all)
    for _ in range(timing.sets_needed(job.s.min_bytes())):
        pool.add()
    return pool


def timed_impls(pool: "SetPool", bound: dict) -> dict:
    """{name: call(i) on input set i}: the candidate (when it passed) and each baseline that passed."""
    impls = {}
    if pool.cand:
        impls["candidate"] = lambda i: pool.cand[i]("during timing")
    for name in list(bound):
        impls[name] = (lambda calls: (lambda i: calls[i]()))(pool.base[name])
    return impls


def check_against_references(s, inp, o, lse):
    """The pass rule on one output, against both references on `inp`'s current content."""
    from .check import check_output
    from .reference import attention_ref
    return check_output(s, o, lse, attention_ref(s, inp, "fp32"), attention_ref(s, inp, "lowp"))
