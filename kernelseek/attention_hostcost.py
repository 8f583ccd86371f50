"""Host cost of one kernelseek.attention call, measured without a GPU (issue 25's host time).

    lib = host_lib()                                   # a kseek.h library whose kseek_fwd launches nothing
    with kernel_prep_on_cpu(lib): o, lse = call()      # CPU tensors take the CUDA path's host code
    with kv_update_on_cpu(kvu_host_lib()): ...         # and kv_update.update too (the update runs on the host)
    with segments_on_cpu(segments_host_lib()): ...     # and seqused_segments.segments (the real kernel's body)
    per_stage(call, reps)                              # microseconds per call by stage
    ops = count_ops(call)                              # aten ops the call issues (TorchDispatchMode)
    sync_ops(ops), launch_ops(ops)                     # those that sync / launch a kernel on CUDA

On CPU tensors attention_core answers with the float64 reference, which is slow and is not what a
GPU call runs. `kernel_prep_on_cpu` makes CPU tensors take attention_core._run_kernel instead (the
Inputs, the _Call, the outputs, the library lookup, abi.Launch with make_params, the ctypes call)
against `host_lib()`: a real library built from kseek.h by nvcc whose kseek_fwd checks the params'
ABI version and workspace and returns KSEEK_OK without launching (there is no GPU here). So the
time measured is the Python path from flash_attn_*_func down to the C call, on CPU tensors. What
this cannot see: CUDA's own host cost per launched op (a few microseconds each on the H200, so
`launch_ops` counts them), the stream lookup (`torch.cuda.current_stream`) and the real kseek_fwd's
host work (tensor maps, cudaLaunchKernel). tools/hostcost.py prints the table for the fa3api grid.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import abi
from . import attention as A
from . import attention_core as core
from . import attention_plan as plan

HOST_ONLY_SRC = r"""
#include "kseek.h"
// Host-only stand-in for a kernel library (kernelseek.attention_hostcost): the params are read as
// a real kernel reads them first, and nothing is launched.
extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t) {
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (p->workspace == NULL || p->workspace_bytes < 16) return KSEEK_ERR_WORKSPACE;
  if (p->q == NULL || p->k == NULL || p->v == NULL || p->o == NULL) return KSEEK_ERR_INVALID;
  return KSEEK_OK;
}
extern "C" size_t kseek_workspace_bytes(const kseek_params*) { return 0; }
extern "C" int kseek_last_path(void) { return 2; }
extern "C" const char* kseek_name(void) { return "host-only"; }
"""

KVU_HOST_SRC = r"""
// Host-only stand-in for kernels/kv_update.cu (kernelseek.attention_hostcost.kvu_host_lib): the real
// source is compiled for its struct, ABI version and status codes (its own entry is renamed and never
// called: it launches), and kseek_kv_update runs the kernel's per-element work in a loop on the host,
// over host memory (CPU tensors), with the kernel's arithmetic (float32, each product and sum rounded,
// round to nearest even). So a call on CPU tensors updates the cache as the GPU does.
#define kseek_kv_update kseek_kv_update_on_device
#include "kv_update.cu"
#undef kseek_kv_update

namespace host {
inline float f(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float f(__half x) { return __half2float(x); }
inline float f(__nv_fp8_e4m3 x) { return float(x); }
template <typename T> T to(float x);
template <> __nv_bfloat16 to(float x) { return __float2bfloat16_rn(x); }
template <> __half to(float x) { return __float2half_rn(x); }
template <> __nv_fp8_e4m3 to(float x) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
  return r;
}

float cs(const kseek_kvu_params& p, const void* base, int64_t row, int i) {
  row = row < 0 ? 0 : (row >= p.cs_rows ? p.cs_rows - 1 : row);
  const int64_t off = row * p.cs_row_stride + i;
  if (p.cs_dtype == KVU_FP32) return static_cast<const float*>(base)[off];
  if (p.cs_dtype == KVU_BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[off]);
  return __half2float(static_cast<const __half*>(base)[off]);
}

// One head row of dim elements src -> dst, its first rd dims rotated at position pos.
template <typename T>
void put(const kseek_kvu_params& p, const T* src, T* dst, int dim, int rd, int64_t pos) {
  for (int d = rd; d < dim; ++d) dst[d] = src[d];
  for (int i = 0; i < rd / 2; ++i) {
    const int a_at = p.interleaved ? 2 * i : i, b_at = p.interleaved ? 2 * i + 1 : i + rd / 2;
    const float c = cs(p, p.cos, pos, i), s = cs(p, p.sin, pos, i), a = f(src[a_at]), b = f(src[b_at]);
    dst[a_at] = to<T>(a * c - b * s);
    dst[b_at] = to<T>(a * s + b * c);
  }
}

int seq(const int32_t* cu, int batch, int64_t t) {      // the largest b with cu[b] <= t
  int b = 0;
  while (b + 1 < batch && cu[b + 1] <= t) ++b;
  return b;
}

template <typename T>
int run(const kseek_kvu_params& p) {
  for (int b = 0; b < p.batch && p.seqused_out; ++b)
    p.seqused_out[b] = p.seqlens[b] + (p.cu_new ? p.cu_new[b + 1] - p.cu_new[b] : p.seqlen_new);
  for (int64_t t = 0; p.q && p.rotary_dim > 0 && t < p.total_q; ++t) {
    const int b = p.cu_q ? seq(p.cu_q, p.batch, t) : int(t / p.seqlen_q);
    const int i = int(p.cu_q ? t - p.cu_q[b] : t % p.seqlen_q);
    const int64_t so = p.cu_q ? t * p.q_row_stride : b * p.q_batch_stride + i * p.q_row_stride;
    const int64_t doff = p.cu_q ? t * p.qo_row_stride : b * p.qo_batch_stride + i * p.qo_row_stride;
    for (int h = 0; h < p.heads_q; ++h)
      put<T>(p, static_cast<const T*>(p.q) + so + h * p.q_head_stride, static_cast<T*>(p.q_out) + doff +
             h * p.qo_head_stride, p.head_dim, p.rotary_dim, p.ro[b] + (p.per_row ? i : 0));
  }
  for (int64_t t = 0; t < p.total_new; ++t) {
    const int b = p.cu_new ? seq(p.cu_new, p.batch, t) : int(t / p.seqlen_new);
    const int j = int(p.cu_new ? t - p.cu_new[b] : t % p.seqlen_new);
    const int64_t pos = int64_t(p.seqlens[b]) + j, row = p.batch_idx ? p.batch_idx[b] : b;
    if (pos < 0 || pos >= p.capacity) continue;
    int64_t slot = row, at = pos;                          // (cache batch or page, row in it)
    if (p.page_table) {
      slot = p.page_table[row * p.page_table_stride + pos / p.page_size];
      at = pos % p.page_size;
      if (slot < 0 || slot >= p.num_pages) continue;
    }
    const int64_t kn = p.cu_new ? t * p.kn_row_stride : b * p.kn_batch_stride + j * p.kn_row_stride;
    const int64_t vn = p.cu_new ? t * p.vn_row_stride : b * p.vn_batch_stride + j * p.vn_row_stride;
    for (int h = 0; h < p.heads_kv; ++h) {
      put<T>(p, static_cast<const T*>(p.k_new) + kn + h * p.kn_head_stride, static_cast<T*>(p.k_cache) +
             slot * p.kc_batch_stride + at * p.kc_row_stride + h * p.kc_head_stride, p.head_dim, p.rotary_dim,
             p.ro ? p.ro[b] + j : 0);
      put<T>(p, static_cast<const T*>(p.v_new) + vn + h * p.vn_head_stride, static_cast<T*>(p.v_cache) +
             slot * p.vc_batch_stride + at * p.vc_row_stride + h * p.vc_head_stride, p.head_dim_v, 0, 0);
    }
  }
  return KVU_OK;
}
}  // namespace host

extern "C" int kseek_kv_update(const kseek_kvu_params* p, cudaStream_t) {
  if (p == nullptr || p->abi_version != KSEEK_KVU_ABI_VERSION) return KVU_ERR_ABI;
  if (p->seqlens == nullptr || (p->total_new > 0 && (!p->k_new || !p->v_new || !p->k_cache || !p->v_cache)) ||
      (p->rotary_dim > 0 && (!p->cos || !p->sin || !p->ro)) || (p->q && p->rotary_dim > 0 && !p->q_out))
    return KVU_ERR_INVALID;
  switch (p->dtype) {
    case KVU_BF16: return host::run<__nv_bfloat16>(*p);
    case KVU_FP16: return host::run<__half>(*p);
    case KVU_FP8_E4M3: return host::run<__nv_fp8_e4m3>(*p);
    default: return KVU_ERR_INVALID;
  }
}
"""

SEG_HOST_PRELUDE = r"""
// Host-only build of kernels/seqused_segments.cu (kernelseek.attention_hostcost.segments_host_lib): the real
// source, unchanged but for its one launch `k<<<grid, block, smem, stream>>>(args)`, which segments_host_source
// rewrites to HOST_LAUNCH(k, grid, block, smem, stream)(args). The macros below make the kernel a host
// function and HOST_LAUNCH run it once per (block, thread) of the same grid, in order, on host memory
// (CPU tensors); its threads are independent (a grid-stride loop, each b written by one thread), so the
// results are the device's.
#include <cuda_runtime.h>
#include <stdint.h>
namespace host_grid { uint3 block_idx, thread_idx; dim3 block_dim, grid_dim; }
#undef __global__
#define __global__
#undef __launch_bounds__
#define __launch_bounds__(n)
#define blockIdx host_grid::block_idx
#define threadIdx host_grid::thread_idx
#define blockDim host_grid::block_dim
#define gridDim host_grid::grid_dim
#define cudaGetLastError() cudaSuccess
#define HOST_LAUNCH(kernel, grid, block, smem, stream) [=](auto... a) {                        \
    host_grid::grid_dim = dim3(grid);                                                          \
    host_grid::block_dim = dim3(block);                                                        \
    for (unsigned x = 0; x < host_grid::grid_dim.x; ++x)                                       \
      for (unsigned y = 0; y < host_grid::block_dim.x; ++y) {                                  \
        host_grid::block_idx = make_uint3(x, 0, 0);                                            \
        host_grid::thread_idx = make_uint3(y, 0, 0);                                           \
        kernel(a...);                                                                          \
      }                                                                                        \
  }
"""


def segments_host_source() -> str:
    """SEG_HOST_PRELUDE and kernels/seqused_segments.cu with its one launch made a HOST_LAUNCH (a source with
    another number of launches raises: the rewrite would not be the kernel's)."""
    import re
    from . import seqused_segments
    src = seqused_segments.KERNEL.read_text()
    out, n = re.subn(r"(\w+)<<<(.*?)>>>\(", r"HOST_LAUNCH(\1, \2)(", src)
    if n != 1 or src.count("<<<") != 1:
        raise RuntimeError(f"{seqused_segments.KERNEL}: expected one kernel launch, found {src.count('<<<')}")
    return SEG_HOST_PRELUDE + out


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


def _build_host_only(name: str, src_text: str, deps: str, flags: list, cache_dir) -> Path:
    """The .so of a host-only stand-in (built once, cached by the hash of its source and `deps`)."""
    from .build import cache_root, find_nvcc
    key = hashlib.sha256((src_text + deps).encode()).hexdigest()[:16]
    d = Path(cache_dir) if cache_dir else cache_root() / "hostonly"
    so = d / f"{name}-{key}.so"
    if not so.exists():
        d.mkdir(parents=True, exist_ok=True)
        src = d / f"{name}-{key}.cu"
        src.write_text(src_text)
        tmp = so.with_suffix(f".{os.getpid()}.tmp")
        r = subprocess.run([find_nvcc(), "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared", *flags, str(src),
                            "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{src}: host-only library build failed:\n{(r.stdout + r.stderr)[-2000:]}")
        os.replace(tmp, so)
    return so


def host_lib(cache_dir: str | os.PathLike | None = None) -> abi.KernelLib:
    """Build (once, cached by source hash) and load the host-only stand-in library."""
    from .build import REPO_KERNELS
    so = _build_host_only("hostonly", HOST_ONLY_SRC, (REPO_KERNELS / "kseek.h").read_text(), [f"-I{REPO_KERNELS}"],
                          cache_dir)
    return abi.load(so)


def kvu_host_lib(cache_dir: str | os.PathLike | None = None):
    """kseek_kv_update of the host-only stand-in for kernels/kv_update.cu (KVU_HOST_SRC; built once, cached
    by the hash of both sources), a ctypes function as kv_update._lib() gives."""
    import ctypes
    from . import kv_update
    from .build import arch_flags
    so = _build_host_only("kvu-hostonly", KVU_HOST_SRC, kv_update.KERNEL.read_text(),
                          [*arch_flags("sm_90a"), "-O2", "-Xcompiler", "-ffp-contract=off", f"-I{kv_update.KERNEL.parent}"],
                          cache_dir)
    fn = ctypes.CDLL(str(so)).kseek_kv_update
    fn.argtypes, fn.restype = [ctypes.POINTER(kv_update.KvuParams), ctypes.c_void_p], ctypes.c_int
    return fn


def segments_host_lib(cache_dir: str | os.PathLike | None = None):
    """kseek_seqused_segments of the host-only build of kernels/seqused_segments.cu (segments_host_source;
    built once, cached by the hash of that source), a ctypes function as seqused_segments._fn() gives."""
    import ctypes
    so = _build_host_only("seg-hostonly", segments_host_source(), "", ["-O2"], cache_dir)
    fn = ctypes.CDLL(str(so)).kseek_seqused_segments
    fn.argtypes, fn.restype = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    return fn


@contextlib.contextmanager
def kernel_prep_on_cpu(lib: abi.KernelLib):
    """Within: CPU tensors run attention_core._run_kernel (not the reference) against `lib`."""
    key = f"host-only:{lib.path}"
    old_env, old_ref = os.environ.get("KSEEK_ATTENTION_KERNEL"), core._run_reference
    core._LIBS[key] = lib
    os.environ["KSEEK_ATTENTION_KERNEL"] = key
    core._run_reference = lambda c: core._run_kernel(c)   # looked up per call (timers wrap it)
    try:
        yield
    finally:
        core._run_reference = old_ref
        core._LIBS.pop(key, None)
        if old_env is None:
            os.environ.pop("KSEEK_ATTENTION_KERNEL", None)
        else:
            os.environ["KSEEK_ATTENTION_KERNEL"] = old_env


@contextlib.contextmanager
def kv_update_on_cpu(fn):
    """Within: kv_update.update takes CPU tensors and calls `fn` (kvu_host_lib()) as its kernel."""
    from . import kv_update
    with _helper_on_cpu(kv_update, fn):
        yield


@contextlib.contextmanager
def segments_on_cpu(fn):
    """Within: seqused_segments.segments takes CPU tensors and calls `fn` (segments_host_lib()) as its kernel."""
    from . import seqused_segments
    with _helper_on_cpu(seqused_segments, fn):
        yield


@contextlib.contextmanager
def _helper_on_cpu(mod, fn):
    """Within: the helper module `mod` (kv_update, seqused_segments) takes CPU tensors and calls fn."""
    old = list(mod._LIB)
    mod._LIB[:] = [fn]
    mod.DEVICE_TYPES.add("cpu")
    try:
        yield
    finally:
        mod.DEVICE_TYPES.discard("cpu")
        mod._LIB[:] = old


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
