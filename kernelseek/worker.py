"""The worker: a child process that owns the CUDA context and runs one scenario per request.
An evaluation runs two (worker_pair.py): the candidate's, which loads the library and runs no
baseline, and a trusted one that never loads candidate code and checks and times the baselines.

Protocol: one JSON object per line. The parent writes requests to the child's stdin; the child
answers on a private copy of its original stdout (fd 1 itself is pointed at stderr, so anything a
candidate prints cannot corrupt a reply). Every reply echoes its request's "nonce" (protocol.py).
The parent (`Worker`, worker_proc.py) enforces a timeout per request; a crash, a timeout, a
malformed reply or a protocol violation becomes an error reply, the child is killed and the next
request starts a fresh one. Nothing the candidate does reaches the parent's memory.

Requests: {"op": "meta"} -> GPU, driver, clocks, library versions.
          {"op": "scenario", "scenario": {...}, "kernel_so": path|None, "baseline": spec, "seed": int,
           "check_only": bool, "budget_s": float, "stand_in": bool, "defence": bool, "graph": bool}
          -> fields of a results Row (defence.py: the defences; graph: also CUDA-graph replay
          time, the candidate's and every baseline's that can be captured). "baseline": "none"
          runs no baseline (the candidate's worker: worker_pair.py); "kernel_so": None runs only
          baselines (the trusted worker).
          {"op": "burst", "impl": name, "calls": n} -> n untimed back-to-back calls (corroborate.py).
          {"op": "graph", "impl": name, "sets": m} then {"op": "burst", ..., "graph": true}: a graph
          of m calls captured, then replayed back to back (corroborates graph_ms).
          {"op": "graph_more", "impl": name, "replays": n} -> n more timed replays of the graph the
          last scenario timed ("times_ms"; --graph-rounds, graph_timing.py).
Run by hand: `python -m kernelseek.worker` and type requests.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback

from .worker_proc import Worker  # noqa: F401  (the parent side, imported from here by callers)


# ======================================================================== child side ===========
def _meta() -> dict:
    import platform
    import torch
    d: dict = {"status": "passed", "python": platform.python_version(), "torch": torch.__version__,
               "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        d.update(gpu=p.name, sm_count=p.multi_processor_count, capability=f"{p.major}.{p.minor}",
                 memory_gb=round(p.total_memory / 1e9, 1), cuda_runtime=torch.version.cuda,
                 cudnn=torch.backends.cudnn.version(), l2_bytes=getattr(p, "L2_cache_size", None),
                 # which physical GPU this worker used (a matrix pins one per campaign)
                 gpu_uuid=str(getattr(p, "uuid", "") or "") or None,
                 cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    try:
        q = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw"
        vis = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").strip()
        pick = ["-i", vis] if vis and "," not in vis else []      # nvidia-smi ignores CUDA_VISIBLE_DEVICES
        out = subprocess.run(["nvidia-smi", *pick, f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        if out:
            f = [x.strip() for x in out[0].split(",")]
            d.update(driver=f[1], clocks_sm=f[2], clocks_max_sm=f[3], clocks_mem=f[4], temperature=f[5], power=f[6])
    except Exception as e:
        d["nvidia_smi"] = f"unavailable: {e}"
    from . import baselines
    libs, where = {}, {}
    for name in list(baselines.REGISTRY):
        b = baselines.get(name)
        ok, why = b.available()
        libs[name] = _safe(b.version) if ok else f"unavailable: {why}"
        if ok:
            where[name] = _safe(b.where)
    d["baselines"] = libs
    d["baselines_from"] = where                           # the files each available baseline loads
    try:
        import triton
        d["triton"] = triton.__version__
    except Exception:
        pass
    return d


class _Job:
    """One scenario request being served: the scenario, its seeded inputs, both references (made
    here, as the first two steps), and the phase clock (seconds per step, each step ending on a
    device-wide synchronize)."""

    def __init__(self, req: dict):
        import torch
        from .reference import attention_ref
        from .scenarios import Scenario
        sd = dict(req["scenario"])
        for k in ("seqlens_q", "seqlens_k", "cache_seqlens", "leftpad", "window"):
            if sd.get(k) is not None:
                sd[k] = tuple(sd[k])
        self.s = Scenario(**sd)
        self.seed = int(req.get("seed", 0))
        self.check_only = bool(req.get("check_only"))
        self.budget_s = float(req.get("budget_s", 0.4))
        self.phases: dict[str, float] = {}
        torch.cuda.synchronize()
        self._t0 = time.perf_counter()
        self.inp = self.inputs(self.seed)
        self.mark("inputs")
        self.ref32, self.reflp = attention_ref(self.s, self.inp, "fp32"), attention_ref(self.s, self.inp, "lowp")
        self.mark("reference")

    def inputs(self, seed: int):
        from .inputs import make_inputs
        return make_inputs(self.s, seed, device="cuda", gen_device="cuda")

    def mark(self, name: str) -> None:
        """Close the step `name`: synchronize the device and add the elapsed time to phases[name]."""
        import torch
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + (t1 - self._t0)
        self._t0 = t1


def _scenario(req: dict) -> dict:
    """One scenario, top to bottom: inputs and references -> the candidate's checked call -> each
    baseline's checked call -> timing, candidate and baselines interleaved on input sets whose
    content is fresh for every batch (defence.py) -> the checks after timing (new content in place,
    near repeats) and, with "graph", CUDA-graph replay -> the fields of a results Row. The run-time
    code check's verdict is added by serve() (defence.Defence.end)."""
    from . import timing
    from .defence import (Defence, baseline_graph_call, baseline_graph_timing, candidate_graph_call,
                          check_against_references, graph_timing, timed_impls, timing_pool)
    _LAST.clear()                                       # the previous scenario's sets: freed first
    guard = Defence.begin(req)                          # fresh timing inputs, the run-time code check
    job = _Job(req)                                     # the scenario, seeded inputs, references
    out: dict = {"status": "passed", "reason": "", "phases_s": job.phases, "baselines": {}}
    lib = _check_candidate(job, req["kernel_so"], out, guard) if req.get("kernel_so") else None
    bound = _check_baselines(job, req.get("baseline") or "best", req.get("stand_in", True), out)
    if job.check_only or not bound and (lib is None or out["status"] != "passed"):
        return out                                      # nothing to time (the baseline worker on a row no
                                                        # baseline computes: the row says why, per baseline)
    cand = lib if lib is not None and out["status"] == "passed" else None
    pool = timing_pool(job, cand, bound, out, guard)
    impls = timed_impls(pool, bound)
    job.mark("timing_setup")
    verify = lambda st, o, lse: check_against_references(job.s, st, o, lse)   # noqa: E731
    hooks = guard.hooks(pool, verify)
    res = timing.time_interleaved(impls, len(pool.sets), budget_s=job.budget_s, hooks=hooks)
    job.mark("timing")
    _LAST.update(impls=impls, n_sets=len(pool.sets))    # for "burst" requests (corroborate.py)
    if cand is not None:
        guard.after_timing(pool, lambda: impls["candidate"](0), verify)
        if req.get("graph") and not guard.failures:     # graph replay: same refresh and verification
            out.update(graph_timing(guard, pool, hooks, lib, keep=_LAST.setdefault("graph_timers", {})))
            _keep_graph("candidate", out, candidate_graph_call(pool, lib), len(pool.sets))
        for why in guard.failures:
            _fail(out, why)
        _check_accounting(res.get("candidate"), out)
        job.mark("last_call_check")
    for name, t in res.items():
        (out if name == "candidate" else out["baselines"][name]).update(t.as_dict())
    if req.get("graph"):                                # every baseline that can be captured, likewise
        for name in [n for n in bound if n in res]:
            kept = _LAST.setdefault("graph_timers", {})   # for "graph_more" (--graph-rounds)
            out["baselines"][name].update(baseline_graph_timing(pool, hooks, name, kept))
            _keep_graph(name, out["baselines"][name], baseline_graph_call(pool, name),
                        min(len(pool.sets), len(pool.base.get(name) or [])))
        job.mark("graph_baselines")
    return out


_LAST: dict = {}                                        # the last scenario's timed calls and sets


def _keep_graph(name: str, rec: dict, make_call, n_sets: int) -> None:
    """Remember, for a graph burst, the calls of an implementation whose graph replay was timed."""
    if rec.get("graph_ms"):
        _LAST.setdefault("graph_calls", {})[name] = (make_call, n_sets)


def _graph(req: dict) -> dict:
    """{"op": "graph", "impl": name, "sets": m}: capture a CUDA graph of one call of `name` on each of
    input sets 0..m-1 (m from the parent: corroborate.graph_sets), for the next graph burst. Not timed."""
    from .graph_timing import capture_graph
    m = int(req.get("sets", 0))
    make_call, have = (_LAST.get("graph_calls") or {}).get(req.get("impl"), (None, 0))
    _LAST.pop("graph_ready", None)
    if make_call is None:
        return {"status": "error", "reason": f"graph: {req.get('impl')!r} had no graph replay timed in the last scenario"}
    if not 1 <= m <= have:
        return {"status": "error", "reason": f"graph: {m} sets asked, {have} exist"}
    _LAST["graph_ready"] = (req.get("impl"), m, *capture_graph(make_call, m, name=str(req.get("impl"))))
    return {"status": "passed", "sets": m}


def _burst(req: dict) -> dict:
    """{"op": "burst", "impl": name, "calls": n}: n back-to-back calls of an implementation timed in
    the last scenario, rotating over its input sets, then a device-wide synchronize. The parent
    times the request on its own clock (corroborate.py); nothing here is measured.
    With "graph": true, ceil(n / m) back-to-back replays of the graph the last "graph" request
    captured (m calls each) instead; the reply's "calls" is replays * m."""
    import gc
    n, per = int(req.get("calls", 0)), 1                  # loop steps, calls per step
    if req.get("graph"):
        impl, m, graph, _side = _LAST.get("graph_ready") or (None, 0, None, None)
        if impl != req.get("impl") or not m:
            return {"status": "error", "reason": f"burst: no graph of {req.get('impl')!r} captured"}
        replay = graph.replay
        call, sets, n, per = (lambda _i: replay()), 1, -(-n // m), m
    else:
        call, sets = (_LAST.get("impls") or {}).get(req.get("impl")), _LAST.get("n_sets", 1)
    if n and call is None:
        return {"status": "error", "reason": f"burst: no timed implementation {req.get('impl')!r} in the last scenario"}
    was = gc.isenabled()
    gc.disable()                     # no collection pause inside (and no gc.collect(): its length
    try:                             # depends on the process's heap, not on the calls)
        for i in range(n):
            call(i % sets)
        if n:
            import torch
            torch.cuda.synchronize()
    finally:
        if was:
            gc.enable()
    return {"status": "passed", "calls": n * per}


def _forbid_syscalls(kernel_so: str, out: dict) -> bool:
    """From here on a system call made from the candidate's own pages kills this worker (syscall_filter);
    where that filter cannot be installed, a library holding system-call bytes anywhere is refused."""
    from . import host_gate, syscall_filter
    try:
        out["syscall_filter"] = syscall_filter.forbid(kernel_so)
        return True
    except OSError as e:
        out["syscall_filter"] = f"unavailable: {e}"
        sites = host_gate.syscall_sites(kernel_so)
        if sites:
            at, insn, sec = sites[0]
            out.update(status="refused", reason=f"host-code gate: the bytes of a `{insn}` instruction at {at:#x} in "
                       f"{sec}, and no run-time filter to stop a jump to them ({e})")
        return not sites


def _check_candidate(job: _Job, kernel_so: str, out: dict, guard):
    """The candidate's checked call: poisoned outputs, one launch, the check. Returns the library.
    Loading and the call run in the run-time check's window (only the candidate's own code)."""
    import torch
    from . import abi
    from .check import check_output
    from .inputs import alloc_outputs
    lib = guard.load(abi, kernel_so)
    if not _forbid_syscalls(kernel_so, out):
        return None
    o, lse = alloc_outputs(job.s, job.inp)
    try:
        with guard.window():
            abi.launch(lib, job.s, job.inp, o, lse)
            out["path"] = lib.last_path()             # the kernel's word (kseek.h), for triage only
        failure = None
    except abi.LaunchError as e:
        failure = str(e)
    torch.cuda.synchronize()                           # device-wide: other streams count too
    if failure:
        out.update(status="error", reason=failure)
    else:
        c = check_output(job.s, o, lse, job.ref32, job.reflp)
        out.update(max_err=c.max_err, ref_err=c.ref_err, err_bound=c.err_bound, err_ratio=c.err_ratio,
                   lse_err=c.lse_err)
        if not c.passed:
            out.update(status="failed", reason=c.reason)
    del o, lse
    job.mark("candidate_check")
    return lib


def _check_baselines(job: _Job, spec: str, stand_in: bool, out: dict) -> dict:
    """Each baseline chosen for `spec`, checked like the candidate; {name: adapter} of those that passed."""
    import torch
    from . import baselines
    from .check import check_output
    s = job.s
    none = job.check_only or spec == "none"              # "none": the baselines run in another worker
    picked, declined = ([], {}) if none else baselines.choose_why(spec, s)
    stand = baselines.stand_in_for(s) if not none and stand_in else None
    if stand is not None:
        picked.append(stand)                                # labeled: not the same work
    out["baselines_skipped"] = [f"{n}: {why}" for n, why in declined.items()] or (
        ["check only: no baselines" if job.check_only else "none here"] if none else [])
    out["baselines_declined"] = {n: why[:300] for n, why in declined.items()}   # each row keeps why
    bound = {}
    for b in picked:
        rec = {"version": _safe(b.version), "from": _safe(b.where)}
        try:
            bb = b.bind(s, job.inp)
            raw = bb.call()
            torch.cuda.synchronize()
            bo, blse = bb.result(raw)
            c = check_output(s, bo, None, job.ref32, job.reflp)
            rec.update(status="passed" if c.passed else "failed", reason=c.reason, err_ratio=c.err_ratio)
            if c.passed:
                bound[b.name] = b
        except Exception as e:
            rec.update(status="error", reason=f"{type(e).__name__}: {str(e)[:300]}")
            torch.cuda.synchronize()
        out["baselines"][b.name] = rec
    job.mark("baseline_check")
    return bound


def _check_accounting(t, out: dict) -> None:
    """The candidate's timed work must be on the timed stream and seen by the profiler
    (corroborate.accounting, which the parent re-applies to the reply)."""
    from .corroborate import accounting
    why = accounting(t.time_ms, t.kernel_ms, t.sync_ms) if t else ""
    if why:
        _fail(out, why)


def _fail(out: dict, reason: str) -> None:
    """Mark the candidate failed, keeping every reason found (the first is the most specific)."""
    out["reason"] = f"{out['reason']}; {reason}" if out.get("status") == "failed" and out.get("reason") else reason
    out["status"] = "failed"


def _safe(fn):
    try:
        return fn()
    except Exception as e:
        return f"unknown ({e})"


def serve(inp=sys.stdin.buffer, reply_fd: int | None = None):
    """Child main loop. Replies go to a private duplicate of fd 1; fd 1 then points at stderr."""
    if reply_fd is None:
        reply_fd = os.dup(1)
        os.dup2(2, 1)
    reply = os.fdopen(reply_fd, "w", buffering=1)
    from . import defence
    defence.start_monitor()                               # before CUDA loads any module (runcheck.py)
    for line in inp:
        if not line.strip():
            continue
        exit_after = False
        op = req = None
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "meta":
                ans = _meta()
                ans["runcheck"] = defence.monitor_state()
            elif op == "scenario":
                ans = _scenario(req)
            elif op == "burst":
                ans = _burst(req)
            elif op == "graph":
                ans = _graph(req)
            elif op == "graph_more":
                from .graph_timing import more
                ans = more(_LAST.get("graph_timers") or {}, req)
            elif op == "exit":
                return
            else:
                ans = {"status": "error", "reason": f"unknown op {op!r}"}
        except Exception as e:
            tb = traceback.format_exc(limit=4)
            ans = {"status": "error", "reason": f"{type(e).__name__}: {str(e)[:500]}", "traceback": tb[-1500:]}
            msg = str(e).lower()
            exit_after = "cuda" in msg or "illegal" in msg or "accelerator" in msg
        if op == "scenario":                              # what ran decides, even after an error
            try:
                ans = defence.Defence.end(ans)
            except Exception as e:
                ans.update(status="error", reason=f"run-time check failed: {type(e).__name__}: {e}")
        if exit_after:
            ans["_exit"] = True                           # a sticky CUDA error: ask for a fresh worker
        if isinstance(req, dict) and "nonce" in req:      # protocol.py: the reply names its request
            ans["nonce"] = req["nonce"]
        reply.write(json.dumps(ans, default=_jsonable) + "\n")
        reply.flush()
        if exit_after:
            os._exit(0)


def _jsonable(x):
    if hasattr(x, "item"):                                # numpy / torch scalars
        return x.item()
    return str(x)


if __name__ == "__main__":
    serve()
