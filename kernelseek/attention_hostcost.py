"""Host cost of one kernelseek.attention call, measured without a GPU (issue 25's host time).

    lib = host_lib()                                   # host_standins: a kseek.h library that launches nothing
    with kernel_prep_on_cpu(lib): ...                  # host_standins: CPU tensors take the CUDA path's host code
    per_stage(call, reps)                              # microseconds per call by stage
    ops = count_ops(call)                              # aten ops the call issues (TorchDispatchMode)
    sync_ops(ops), launch_ops(ops)                     # those that sync / launch a kernel on CUDA

On CPU tensors attention_core answers with the float64 reference, which is slow and is not what a
GPU call runs. measure_row runs each call within host_standins.kernel_prep_on_cpu instead, so CPU
tensors take attention_core._run_kernel (the Inputs, the _Call, the outputs, the library lookup,
abi.Launch with make_params, the ctypes call) against host_standins.host_lib(): a real library built
from kseek.h by nvcc whose kseek_fwd checks the params' ABI version and workspace and returns KSEEK_OK
without launching (there is no GPU here). So the time measured is the Python path from
flash_attn_*_func down to the C call, on CPU tensors. What this cannot see: CUDA's own host cost per
launched op (a few microseconds each on the H200, so `launch_ops` counts them), the stream lookup
(`torch.cuda.current_stream`) and the real kseek_fwd's host work (tensor maps, cudaLaunchKernel).
tools/hostcost.py prints the table for the fa3api grid (it takes host_lib from here).
"""
from __future__ import annotations

import contextlib
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import abi
from . import attention as A
from . import attention_core as core
from . import attention_plan as plan
from .host_standins import host_lib, kernel_prep_on_cpu   # host_lib: tools/hostcost.py's H.host_lib()

# On CUDA these wait for the device or copy through the host: item()/int()/bool() of a tensor
# (_local_scalar_dense), nonzero (boolean masks, x[bool]), a size read from device data
# (repeat_interleave/masked_select/unique with tensor counts), a tensor built from Python data
# (lift_fresh: torch.tensor(list, device=cuda) is a host->device copy), indexing with a bool mask
# (recorded as "index.Tensor[bool]": the op calls nonzero inside), any .cpu()/.tolist().
SYNC_OPS = {"_local_scalar_dense", "nonzero", "nonzero_static", "masked_select", "unique", "_unique2",
            "unique_consecutive", "unique_dim", "lift_fresh", "lift_fresh_copy", "equal", "is_nonzero",
            "item", "_assert_async", "repeat_interleave.Tensor"}
BOOL_INDEXED = {"index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index", "_unsafe_index_put"}
# Ops that only describe memory (no kernel on CUDA); everything else launches (or could launch) one.
META_OPS = {"view", "_unsafe_view", "as_strided", "empty", "empty_strided", "expand", "permute", "t",
            "transpose", "unsqueeze", "squeeze", "select", "slice", "alias", "detach", "reshape", "unbind",
            "split", "split_with_sizes", "view_as", "_reshape_alias", "unflatten", "flatten", "narrow",
            "view_as_real", "diagonal", "set_", "resize_"}


# ---- op counts -----------------------------------------------------------------------------------
class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.name().split("::")[-1]
        name = name[:-8] if name.endswith(".default") else name
        if _base(name) in BOOL_INDEXED and _bool_index(args):
            name += "[bool]"   # the mask becomes nonzero() inside the op: a sync on CUDA
        self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def _bool_index(args) -> bool:
    idx = args[1] if len(args) > 1 else None
    return isinstance(idx, (list, tuple)) and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                                  for i in idx)


def count_ops(fn) -> Counter:
    """aten ops (name or name.overload) that one fn() issues."""
    with _Ops() as m:
        fn()
    return m.ops


def _base(name: str) -> str:
    return name.split(".")[0]


def sync_ops(ops: Counter) -> Counter:
    """The ops of `ops` that sync with (or copy through) the host on CUDA. Not visible on CPU tensors:
    .cpu()/.tolist()/.numpy() (no op on a CPU tensor); tests/unit/test_attention_hostcost.py checks
    the sources for those."""
    return Counter({n: c for n, c in ops.items() if n in SYNC_OPS or _base(n) in SYNC_OPS or n.endswith("[bool]")})


def launch_ops(ops: Counter) -> int:
    """How many of `ops` launch a kernel on CUDA (all but the metadata-only ones)."""
    return sum(c for n, c in ops.items() if _base(n) not in META_OPS)


# ---- stage timing --------------------------------------------------------------------------------
# (stage, owner, attribute): the function whose time, less the time of the stages called inside it,
# is charged to the stage (an attribute the code lacks is skipped, so older trees can be measured).
# What no stage covers is "args" (the entry point: the autograd wrapper, argument checks, Problem).
TIMED = [
    ("plan", A, "solve"),
    ("kv update", A, "_update_cache"),
    ("core prep", core, "_run_kernel"),
    ("alloc", core, "_alloc"),
    ("lib lookup", core, "_lib"),
    ("params", abi, "make_params"),
    ("workspace", abi, "workspace_for"),
    ("workspace", abi, "_workspace"),
    ("launch object", abi.Launch, "__init__"),
    ("ctypes fwd", abi.KernelLib, "fwd"),
]
STAGES = list(dict.fromkeys(stage for stage, _, _ in TIMED))


@contextlib.contextmanager
def _timers(acc: Counter):
    """Wrap every TIMED function to add its exclusive nanoseconds to acc[stage]."""
    stack = [0]   # per open timed call: time spent in timed calls nested inside it
    saved = []
    for stage, owner, attr in TIMED:
        fn = owner.__dict__.get(attr)
        if fn is None:
            continue

        def timed(*a, __fn=fn, __stage=stage, **kw):
            stack.append(0)
            t0 = time.perf_counter_ns()
            try:
                return __fn(*a, **kw)
            finally:
                dt = time.perf_counter_ns() - t0
                acc[__stage] += dt - stack.pop()
                stack[-1] += dt
        saved.append((owner, attr, fn))
        setattr(owner, attr, timed)
    try:
        yield
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)


def per_stage(fn, reps: int = 200, warmup: int = 20, between=None) -> dict[str, float]:
    """Median microseconds per fn() by stage (TIMED's stages, "args", "total": with the timers) and
    "total_plain": the median whole call without the timers (theirs, ~0.3 us each, is in "total").
    Medians, not means: this machine is shared and a preempted call must not count. `between` runs
    untimed after each call (on CUDA: torch.cuda.synchronize, so a full launch queue never blocks a
    timed call and what is timed is the host's work)."""
    for _ in range(warmup):
        fn()
    plain = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        plain.append(time.perf_counter_ns() - t0)
        if between:
            between()
    per: dict[str, list] = {stage: [] for stage in STAGES}
    per["args"], per["total"] = [], []
    with _timers(acc := Counter()):
        for _ in range(reps):
            acc.clear()
            t0 = time.perf_counter_ns()
            fn()
            total = time.perf_counter_ns() - t0
            if between:
                between()
            for stage in STAGES:
                per[stage].append(acc[stage])
            per["args"].append(total - sum(acc.values()))
            per["total"].append(total)
    med = (lambda xs: sorted(xs)[len(xs) // 2] / 1e3)
    return {**{k: med(v) for k, v in per.items()}, "total_plain": med(plain)}


# ---- the fa3api grid on CPU tensors --------------------------------------------------------------
LENGTH_KEYS = ("seqlen_q", "seqlen_k", "seqlens_q", "seqlens_k", "cache_seqlens", "seqused_q", "seqused_k",
               "new_kv", "attention_chunk", "leftpad")


def shrink(row: dict, f: int) -> dict:
    """The row with every length above 64 divided by f (at least 64), so CPU tensors stay small and
    the torch ops' own work does not swamp their host cost. Lengths <= 64 (decode rows, short
    sequences) are kept, so the plan takes the same branches (decode: max_q x G <= 64); the cache
    capacity grows back if the appended rows need it."""
    if f <= 1:
        return dict(row)
    small = (lambda x: x if x <= 64 else max(64, -(-x // f)))
    r = {k: ([small(x) for x in v] if isinstance(v, list) else small(v)) if k in LENGTH_KEYS else v
         for k, v in row.items()}
    if "window" in r:
        r["window"] = [w if w < 0 else small(w) for w in r["window"]]
    if r.get("fn") == "kvcache":
        new = r.get("new_kv") or 0
        need = max(r.get("cache_seqlens", [0])) + (max(new) if isinstance(new, list) else new)
        r["seqlen_k"] = max(r["seqlen_k"], need)
    return r


def grid_rows(shrink_by: int = 16, pattern: str | None = None) -> list[dict]:
    """fa3api rows (kernelseek/grids/fa3api.yaml), shrunk, optionally filtered by a regex on names."""
    import re
    from . import fa3api_grid as G
    return [shrink(r, shrink_by) for r in G.load_rows() if not pattern or re.search(pattern, r["name"])]


def bound_call(call, caches=None):
    """A no-argument callable making `call`'s kernelseek.attention call, its arguments prepared once
    (fa3api_grid.Call.bound, what the grid times)."""
    return call.bound(caches=caches)


def measure_row(row: dict, lib: abi.KernelLib | None, reps: int = 200, device: str = "cpu") -> dict:
    """One row through the kernel path's host code: stages (us), op counts, syncs. On "cpu" the tensors
    are CPU ones against `lib` (host_lib()); on "cuda" the real kernel runs (lib unused; never run
    in session 9, which had no GPU)."""
    from . import fa3api_grid as G
    fn = bound_call(G.make_call(row, seed=0, device=device))
    cuda = device.startswith("cuda")
    with contextlib.nullcontext() if cuda else kernel_prep_on_cpu(lib):
        fn()
        rec = {"paths": list(core.RECORD["paths"]), "steps": list(core.RECORD["steps"])}
        ops = count_ops(fn)
        stages = per_stage(fn, reps=reps, warmup=max(5, reps // 10), between=torch.cuda.synchronize if cuda else None)
    return {"name": row["name"], "device": device, **rec, "stages_us": stages, "ops": dict(ops),
            "n_ops": sum(ops.values()), "launch_ops": launch_ops(ops), "sync_ops": dict(sync_ops(ops))}


STAGE_ORDER = ["args", "kv update", "plan", "core prep", "alloc", "lib lookup", "params", "workspace",
               "launch object", "ctypes fwd"]


def table(results: list[dict]) -> str:
    """One line per row: total (plain and timed) and per-stage microseconds, op counts, syncs."""
    head = ["row", "plain", "timed"] + [s.replace(" ", "_") for s in STAGE_ORDER] + ["ops", "launch", "syncs"]
    lines = ["  ".join(f"{h:>9}" if i else f"{h:<22}" for i, h in enumerate(head))]
    for r in results:
        s = r["stages_us"]
        cells = [f"{s['total_plain']:9.1f}", f"{s['total']:9.1f}"] + [f"{s[k]:9.1f}" for k in STAGE_ORDER]
        syncs = ",".join(f"{k}x{v}" for k, v in sorted(r["sync_ops"].items())) or "-"
        cells += [f"{r['n_ops']:9d}", f"{r['launch_ops']:9d}", f"{syncs:>9}"]
        lines.append("  ".join([f"{r['name']:<22}"] + cells))
    return "\n".join(lines)
