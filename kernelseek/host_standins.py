"""Host-only stand-ins for the CUDA libraries, so the CUDA path's host code runs on CPU tensors (no GPU).

    lib = host_lib()                                   # a kseek.h library whose kseek_fwd launches nothing
    with kernel_prep_on_cpu(lib): o, lse = call()      # CPU tensors take the CUDA path's host code
    with kv_update_on_cpu(kvu_host_lib()): ...         # and kv_update.update too (the update runs on the host)
    with segments_on_cpu(segments_host_lib()): ...     # and seqused_segments.segments (the real kernel's body)
    with qv_on_cpu(qv_host_lib()): ...                 # and qv_attention's route (kseek_qv_fwd launches nothing)

On CPU tensors attention_core answers with the float64 reference. `kernel_prep_on_cpu` makes them take
attention_core._run_kernel instead (the Inputs, the _Call, the outputs, the library lookup, abi.Launch with
make_params, the ctypes call) against `host_lib()`: a real library built from kseek.h by nvcc whose kseek_fwd
checks the params' ABI version and workspace and returns KSEEK_OK without launching. `kvu_host_lib()` and
`segments_host_lib()` are host builds of kernels/kv_update.cu and kernels/seqused_segments.cu that do the
kernels' work on host memory, so kv_update and seqused_segments give the device's results on CPU tensors.
`qv_host_lib()` stands in for kernels/qv_fwd (its kseek_qv_fwd checks the params and launches nothing).
Why: the unit tests (fast path, seqused_q segments, host syncs) and attention_hostcost's measurement run the
real host code, ctypes calls included, on a machine without a GPU. Each library is built once by nvcc and
cached by the hash of its source.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from pathlib import Path

from . import abi
from . import attention_core as core

HOST_ONLY_SRC = r"""
#include "kseek.h"
// Host-only stand-in for a kernel library (kernelseek.host_standins): the params are read as
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
// Host-only stand-in for kernels/kv_update.cu (kernelseek.host_standins.kvu_host_lib): the real
// source is compiled for its struct, ABI version and status codes (its own entry is renamed and never
// called: it launches), and kseek_kv_update runs the kernel's per-element work in a loop on the host,
// over host memory (CPU tensors), with the kernel's arithmetic (float32, each product and sum rounded,
// round to nearest even). So a call on CPU tensors updates the cache as the GPU does.
#define kseek_kv_update kseek_kv_update_on_device
#define kseek_kv_update_then kseek_kv_update_then_on_device
#include "kv_update.cu"
#undef kseek_kv_update
#undef kseek_kv_update_then

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

extern "C" int kseek_kv_update_then(const kseek_kvu_params* p, kseek_fwd_fn fwd, const kseek_params* fwd_params,
                                    cudaStream_t stream) {
  return update_then<kseek_kv_update>(p, fwd, fwd_params, stream);
}
"""

SEG_HOST_PRELUDE = r"""
// Host-only build of kernels/seqused_segments.cu (kernelseek.host_standins.segments_host_lib): the real
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


QV_HOST_SRC = r"""
#include "kseek.h"
// Host-only stand-in for kernels/qv_fwd (kernelseek.host_standins.qv_host_lib): its C ABI, the params read
// as the real entry reads them first, nothing launched; the workspace it asks for depends on the shapes only
// and, as the real one's, is 0 for a call the long-sequence kernel takes whole (> 64 rows per KV head, dense).
extern "C" int kseek_qv_abi(void) { return 1; }
extern "C" size_t kseek_qv_workspace_bytes(const kseek_params* p) {
  const int64_t rows = (int64_t)p->seqlen_q * (p->heads_q / (p->heads_kv > 0 ? p->heads_kv : 1));
  return rows > 64 && p->cu_seqlens_q == NULL ? 0 : 64 + 4 * (size_t)p->batch;
}
extern "C" int kseek_qv_fwd(const kseek_params* p, const void* qv, int64_t, int64_t, int64_t, cudaStream_t) {
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (p->q == NULL || p->k == NULL || p->v == NULL || p->o == NULL || p->lse == NULL) return KSEEK_ERR_INVALID;
  const size_t need = kseek_qv_workspace_bytes(p);
  if (need && (p->workspace == NULL || p->workspace_bytes < need)) return KSEEK_ERR_WORKSPACE;
  return KSEEK_OK;
}
extern "C" int kseek_qv_last_splits(void) { return 1; }
extern "C" int kseek_qv_set_big_kernel(int) { return 2; }
"""


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
    dll = ctypes.CDLL(str(so))
    fn = dll.kseek_kv_update
    fn.argtypes, fn.restype = [ctypes.POINTER(kv_update.KvuParams), ctypes.c_void_p], ctypes.c_int
    kv_update.register_then(fn, dll)      # its kseek_kv_update_then, for the fast path's append hits
    return fn


def segments_host_lib(cache_dir: str | os.PathLike | None = None):
    """kseek_seqused_segments of the host-only build of kernels/seqused_segments.cu (segments_host_source;
    built once, cached by the hash of that source), a ctypes function as seqused_segments._fn() gives."""
    import ctypes
    so = _build_host_only("seg-hostonly", segments_host_source(), "", ["-O2"], cache_dir)
    fn = ctypes.CDLL(str(so)).kseek_seqused_segments
    fn.argtypes, fn.restype = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    return fn


def qv_host_lib(cache_dir: str | os.PathLike | None = None) -> tuple:
    """(kseek_qv_fwd, kseek_qv_workspace_bytes, kseek_qv_last_splits, kseek_qv_set_big_kernel) of the host-only
    stand-in for kernels/qv_fwd (QV_HOST_SRC), typed as qv_attention._lib() gives them."""
    import ctypes
    from ctypes import c_int64, c_void_p
    from .build import REPO_KERNELS
    so = _build_host_only("qv-hostonly", QV_HOST_SRC, (REPO_KERNELS / "kseek.h").read_text(), [f"-I{REPO_KERNELS}"],
                          cache_dir)
    dll = ctypes.CDLL(str(so))
    fwd, ws, splits, big = dll.kseek_qv_fwd, dll.kseek_qv_workspace_bytes, dll.kseek_qv_last_splits, dll.kseek_qv_set_big_kernel
    fwd.argtypes = [ctypes.POINTER(abi.KseekParams), c_void_p, c_int64, c_int64, c_int64, c_void_p]
    fwd.restype = ctypes.c_int
    ws.argtypes, ws.restype = [ctypes.POINTER(abi.KseekParams)], ctypes.c_size_t
    splits.argtypes, splits.restype = [], ctypes.c_int
    big.argtypes, big.restype = [ctypes.c_int], ctypes.c_int
    return fwd, ws, splits, big


@contextlib.contextmanager
def qv_on_cpu(fns: tuple):
    """Within: qv_attention takes CPU tensors and calls `fns` (qv_host_lib(), or wrappers of it) as its library."""
    from . import qv_attention
    old = list(qv_attention._LIB)
    qv_attention._LIB[:] = [fns]
    qv_attention.CPU_OK = True
    try:
        yield
    finally:
        qv_attention.CPU_OK = False
        qv_attention._LIB[:] = old


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
