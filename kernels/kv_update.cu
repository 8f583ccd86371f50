// kv_update.cu: flash_attn_with_kvcache's cache update in one launch (kernelseek/kv_update.py).
//
// New K/V rows are written into the caches in place at positions seqlens[b] + j (cache row
// batch_idx[b] or b, or its page-table row), K rotary-embedded first at positions ro[b] + j; a
// rotated copy of Q is written to q_out (positions ro[b] + i when per_row, else ro[b]); and
// seqused_out[b] = seqlens[b] + (new rows of b). The arithmetic is the torch path's
// (kernelseek/attention_cache.py) operation by operation: cos/sin and x in float32,
// a*c - b*s and a*s + b*c with each product and sum rounded (no FMA contraction), then rounded
// to the element type (nearest even; fp8 e4m3 without saturation, as torch's cast). So the two
// paths agree bit for bit, which tests/gpu/test_kv_update_gpu.py checks.
//
// Layouts, strides in elements, the last dimension contiguous:
//   q       dense [B, Sq, Hq, D] (cu_q NULL) or packed [Tq, Hq, D] (cu_q [B+1])
//   k/v new dense [B, Sn, Hkv, D/Dv] (cu_new NULL) or packed [Tn, Hkv, D/Dv] (cu_new [B+1])
//   caches  dense [Bc, Sk, Hkv, D/Dv] or paged [pages, page_size, Hkv, D/Dv] (page_table)
//   cos/sin [rows, rd/2] (float32, bf16 or fp16), rd = rotary dim (0: no rotary)
// Work: one thread per 8 elements of one (row, head); NeoX rotary pairs dims d and d + rd/2, so
// the thread of the first half does both. A write past the cache's capacity or to a page id
// outside [0, num_pages) is skipped, and cos/sin rows are clamped into range: no access outside
// the tensors given (torch's indexing would stop the process with a device assert instead).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kseek.h"

#define KSEEK_KVU_ABI_VERSION 1

enum { KVU_BF16 = 0, KVU_FP16 = 1, KVU_FP8_E4M3 = 2, KVU_FP32 = 3 };
enum { KVU_OK = 0, KVU_ERR_ABI = 1, KVU_ERR_INVALID = 2, KVU_ERR_CUDA = 3 };
enum { KVU_THEN_UPDATE = 1000 };   // kseek_kv_update_then: KVU_THEN_UPDATE + the update's status

typedef struct {
  int32_t abi_version;            // KSEEK_KVU_ABI_VERSION
  int32_t dtype;                  // element type of q, k/v new and the caches (KVU_BF16/FP16/FP8_E4M3)
  int32_t batch;                  // B
  int32_t heads_q, heads_kv, head_dim, head_dim_v;
  // Q (rotated copy; q NULL or rotary_dim 0: none)
  const void* q; void* q_out;
  const int32_t* cu_q;            // packed q: [B+1]; NULL: dense
  int64_t total_q;                // rows of q: Tq, or B * Sq
  int32_t seqlen_q;               // dense: Sq
  int32_t per_row;                // q position ro[b] + i (1) or ro[b] (0)
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t qo_batch_stride, qo_row_stride, qo_head_stride;
  // new K/V
  const void* k_new; const void* v_new;
  const int32_t* cu_new;          // packed: [B+1]; NULL: dense
  int64_t total_new;              // rows: Tn, or B * Sn
  int32_t seqlen_new;             // dense: Sn
  int64_t kn_batch_stride, kn_row_stride, kn_head_stride;
  int64_t vn_batch_stride, vn_row_stride, vn_head_stride;
  // caches
  void* k_cache; void* v_cache;
  int64_t kc_batch_stride, kc_row_stride, kc_head_stride;   // paged: batch = page
  int64_t vc_batch_stride, vc_row_stride, vc_head_stride;
  int64_t capacity;               // keys a cache row holds (dense Sk; paged pages_per_seq * page_size)
  const int32_t* page_table;      // [*, pages_per_seq] or NULL
  int64_t page_table_stride;
  int32_t page_size, num_pages;
  const int32_t* batch_idx;       // cache row of sequence b, or NULL (b)
  const int32_t* seqlens;         // [B] keys before the append
  int32_t* seqused_out;           // [B] keys after it
  // rotary
  int32_t rotary_dim;             // rd, a multiple of 16 (0: none)
  int32_t interleaved;
  int32_t cs_dtype;               // KVU_FP32 / KVU_BF16 / KVU_FP16
  int32_t cs_rows;
  int64_t cs_row_stride;
  const void* cos; const void* sin;
  const int32_t* ro;              // [B] rotary start positions
} kseek_kvu_params;

namespace {

template <typename T> struct Vec;                         // 8 elements
template <> struct Vec<__nv_bfloat16> { typedef uint4 type; };
template <> struct Vec<__half> { typedef uint4 type; };
template <> struct Vec<__nv_fp8_e4m3> { typedef uint2 type; };

__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_fp8_e4m3 x) { return float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 from_f(float x) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
  return r;
}

__device__ __forceinline__ float cs_at(const kseek_kvu_params& p, const void* base, int row, int i) {
  row = row < 0 ? 0 : (row >= p.cs_rows ? p.cs_rows - 1 : row);
  const int64_t off = int64_t(row) * p.cs_row_stride + i;
  if (p.cs_dtype == KVU_FP32) return static_cast<const float*>(base)[off];
  if (p.cs_dtype == KVU_BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[off]);
  return __half2float(static_cast<const __half*>(base)[off]);
}

// Sequence of packed row t: the largest b with cu[b] <= t (cu[0] = 0, nondecreasing).
__device__ __forceinline__ int seq_of(const int32_t* cu, int batch, int64_t t) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (int64_t(cu[mid]) <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// One 8-element vector at dim d0 of a row: src -> dst, rotated at position pos when d0 < rd.
template <typename T>
__device__ void rotate_vec(const kseek_kvu_params& p, const T* src, T* dst, int d0, int pos, bool rotate) {
  typedef typename Vec<T>::type V;
  const int rd = rotate ? p.rotary_dim : 0;
  V raw = *reinterpret_cast<const V*>(src + d0);
  if (d0 >= rd) { *reinterpret_cast<V*>(dst + d0) = raw; return; }
  T x[8];
  *reinterpret_cast<V*>(x) = raw;
  if (p.interleaved) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float c = cs_at(p, p.cos, pos, d0 / 2 + i), s = cs_at(p, p.sin, pos, d0 / 2 + i);
      const float a = to_f(x[2 * i]), b = to_f(x[2 * i + 1]);
      x[2 * i] = from_f<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
      x[2 * i + 1] = from_f<T>(__fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
    }
    *reinterpret_cast<V*>(dst + d0) = *reinterpret_cast<V*>(x);
    return;
  }
  const int half = rd / 2;
  if (d0 >= half) return;                                  // written by the thread of d0 - half
  T y[8];
  *reinterpret_cast<V*>(y) = *reinterpret_cast<const V*>(src + d0 + half);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float c = cs_at(p, p.cos, pos, d0 + i), s = cs_at(p, p.sin, pos, d0 + i);
    const float a = to_f(x[i]), b = to_f(y[i]);
    x[i] = from_f<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    y[i] = from_f<T>(__fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
  }
  *reinterpret_cast<V*>(dst + d0) = *reinterpret_cast<V*>(x);
  *reinterpret_cast<V*>(dst + d0 + half) = *reinterpret_cast<V*>(y);
}

template <typename T>
__global__ void __launch_bounds__(256) kv_update_kernel(const kseek_kvu_params p, int64_t n_q, int64_t n_k,
                                                        int64_t n_v) {
  const int64_t work = n_q + n_k + n_v, total = work > p.batch ? work : p.batch;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    if (w < p.batch && p.seqused_out != nullptr) {       // new key counts: one thread per sequence
      const int64_t n = p.cu_new ? int64_t(p.cu_new[w + 1] - p.cu_new[w]) : int64_t(p.seqlen_new);
      p.seqused_out[w] = int32_t(int64_t(p.seqlens[w]) + n);
    }
    if (w >= work) continue;
    if (w < n_q) {                                         // Q: rotated copy
      const int vecs = p.head_dim / 8;
      const int64_t t = w / (int64_t(p.heads_q) * vecs);
      const int h = int((w / vecs) % p.heads_q), d0 = int(w % vecs) * 8;
      int b, i;
      if (p.cu_q) { b = seq_of(p.cu_q, p.batch, t); i = int(t - p.cu_q[b]); }
      else { b = int(t / p.seqlen_q); i = int(t % p.seqlen_q); }
      const int64_t so = p.cu_q ? t * p.q_row_stride : b * p.q_batch_stride + int64_t(i) * p.q_row_stride;
      const int64_t doff = p.cu_q ? t * p.qo_row_stride : b * p.qo_batch_stride + int64_t(i) * p.qo_row_stride;
      const T* src = static_cast<const T*>(p.q) + so + int64_t(h) * p.q_head_stride;
      T* dst = static_cast<T*>(p.q_out) + doff + int64_t(h) * p.qo_head_stride;
      rotate_vec<T>(p, src, dst, d0, p.ro[b] + (p.per_row ? i : 0), true);
      continue;
    }
    const bool is_k = w < n_q + n_k;
    const int64_t u = is_k ? w - n_q : w - n_q - n_k;
    const int dim = is_k ? p.head_dim : p.head_dim_v, vecs = dim / 8;
    const int64_t t = u / (int64_t(p.heads_kv) * vecs);
    const int h = int((u / vecs) % p.heads_kv), d0 = int(u % vecs) * 8;
    int b, j;
    if (p.cu_new) { b = seq_of(p.cu_new, p.batch, t); j = int(t - p.cu_new[b]); }
    else { b = int(t / p.seqlen_new); j = int(t % p.seqlen_new); }
    const int64_t pos = int64_t(p.seqlens[b]) + j;
    if (pos < 0 || pos >= p.capacity) continue;
    const int64_t src_row = p.batch_idx ? p.batch_idx[b] : b;
    int64_t base;
    const int64_t bs = is_k ? p.kc_batch_stride : p.vc_batch_stride, rs = is_k ? p.kc_row_stride : p.vc_row_stride;
    if (p.page_table) {
      const int32_t page = p.page_table[src_row * p.page_table_stride + pos / p.page_size];
      if (page < 0 || page >= p.num_pages) continue;
      base = int64_t(page) * bs + (pos % p.page_size) * rs;
    } else {
      base = src_row * bs + pos * rs;
    }
    const int64_t nbs = is_k ? p.kn_batch_stride : p.vn_batch_stride, nrs = is_k ? p.kn_row_stride : p.vn_row_stride;
    const int64_t soff = p.cu_new ? t * nrs : b * nbs + int64_t(j) * nrs;
    const T* src = static_cast<const T*>(is_k ? p.k_new : p.v_new) + soff +
                   int64_t(h) * (is_k ? p.kn_head_stride : p.vn_head_stride);
    T* dst = static_cast<T*>(is_k ? p.k_cache : p.v_cache) + base + int64_t(h) * (is_k ? p.kc_head_stride : p.vc_head_stride);
    rotate_vec<T>(p, src, dst, d0, p.ro ? p.ro[b] + j : 0, is_k && p.rotary_dim > 0);
  }
}

template <typename T>
int launch(const kseek_kvu_params& p, cudaStream_t stream) {
  const int64_t n_q = (p.q && p.rotary_dim > 0) ? p.total_q * p.heads_q * (p.head_dim / 8) : 0;
  const int64_t n_k = p.total_new * p.heads_kv * (p.head_dim / 8);
  const int64_t n_v = p.total_new * p.heads_kv * (p.head_dim_v / 8);
  int64_t total = n_q + n_k + n_v;
  if (total < p.batch) total = p.batch;                    // the seqused_out threads
  if (total == 0) return KVU_OK;
  const int threads = 256;
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > 132 * 16) blocks = 132 * 16;                // grid-stride beyond ~16 blocks per SM
  kv_update_kernel<T><<<unsigned(blocks), threads, 0, stream>>>(p, n_q, n_k, n_v);
  return cudaGetLastError() == cudaSuccess ? KVU_OK : KVU_ERR_CUDA;
}

}  // namespace

extern "C" int kseek_kv_update(const kseek_kvu_params* p, cudaStream_t stream) {
  if (p == nullptr || p->abi_version != KSEEK_KVU_ABI_VERSION) return KVU_ERR_ABI;
  if (p->batch < 0 || p->head_dim % 8 || p->head_dim_v % 8 || p->rotary_dim % 16 || p->rotary_dim > p->head_dim ||
      p->seqlens == nullptr || (p->total_new > 0 && (p->k_new == nullptr || p->v_new == nullptr ||
      p->k_cache == nullptr || p->v_cache == nullptr)) || (p->cu_new == nullptr && p->total_new > 0 && p->seqlen_new <= 0) ||
      (p->rotary_dim > 0 && (p->cos == nullptr || p->sin == nullptr || p->ro == nullptr || p->cs_rows <= 0)) ||
      (p->q != nullptr && p->rotary_dim > 0 && (p->q_out == nullptr || (p->cu_q == nullptr && p->seqlen_q <= 0))) ||
      (p->page_table != nullptr && p->page_size <= 0))
    return KVU_ERR_INVALID;
  switch (p->dtype) {
    case KVU_BF16: return launch<__nv_bfloat16>(*p, stream);
    case KVU_FP16: return launch<__half>(*p, stream);
    case KVU_FP8_E4M3: return launch<__nv_fp8_e4m3>(*p, stream);
    default: return KVU_ERR_INVALID;
  }
}

extern "C" int kseek_kv_update_abi(void) { return KSEEK_KVU_ABI_VERSION; }

// An append pair in one foreign call (kernelseek.attention_fastpath's hits): the update, then the attention
// library's kseek_fwd (`fwd`, by address) on the same stream. Returns fwd's kseek_status, or KVU_THEN_UPDATE
// + the update's status when the update refused (fwd is then not called). The Python caller saves a second
// ctypes call and its stream lookup per call. (A template on the update so that the host-only stand-in,
// kernelseek/host_standins.py, pairs its own update with the same logic.)
typedef int (*kseek_fwd_fn)(const kseek_params*, cudaStream_t);
template <int (*Update)(const kseek_kvu_params*, cudaStream_t)>
int update_then(const kseek_kvu_params* p, kseek_fwd_fn fwd, const kseek_params* fwd_params, cudaStream_t stream) {
  if (fwd == nullptr || fwd_params == nullptr) return KVU_THEN_UPDATE + KVU_ERR_INVALID;
  const int rc = Update(p, stream);
  return rc != KVU_OK ? KVU_THEN_UPDATE + rc : fwd(fwd_params, stream);
}

extern "C" int kseek_kv_update_then(const kseek_kvu_params* p, kseek_fwd_fn fwd, const kseek_params* fwd_params,
                                    cudaStream_t stream) {
  return update_then<kseek_kv_update>(p, fwd, fwd_params, stream);
}
