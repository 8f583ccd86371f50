// naive_core.cuh: the naive attention forward (one block per query row), shared by kernels/naive_fwd.cu
// (the whole kernel) and kernels/fa3_hopper/ (its fallback for every call the fast paths refuse).
//
// The algorithm (two passes over the keys, fp32 throughout) is described in naive_fwd.cu's header.
// Entry points: naive::launch_out<T>(p, stream) (T = the input dtype; the output dtype from p) and
// naive::check_params(p) (the ABI's checks of a call, which every kseek_fwd here makes first).
#pragma once
#include "kseek.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

namespace naive {

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;
constexpr int kMaxDimWide = 576;   // naive_wide_kernel: q/k head dim
constexpr int kMaxDimVWide = 512;  // naive_wide_kernel: v head dim

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return static_cast<float>(x); }

// attention_chunk C > 0 (kseek.h): the first key position of the chunk holding position p, by floor
// division (p < 0 lies in a chunk before every key). The chunk's keys are [start, start + C - 1].
// |p| < 2^31 (int32 lengths): 32-bit unsigned divisions (|p| + C - 1 < 2^32), no 64-bit division,
// whose call made naive_wide_kernel spill.
__host__ __device__ __forceinline__ int64_t chunk_start(int64_t p, int c) {
  const uint32_t uc = (uint32_t)c;
  return p >= 0 ? (int64_t)((uint32_t)p / uc) * c : -(int64_t)(((uint32_t)(-p) + uc - 1u) / uc) * c;
}

__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }

// Eight consecutive elements; aligned so one vector load fetches them (16 B for 16-bit types).
template <typename T>
struct alignas(8 * sizeof(T)) Pack8 {
  T x[8];
};

// Dot product of the fp32 q row in shared memory with a key row of D elements (D % 8 == 0).
// `vec` says the key row is 8-element aligned, so it can be read with vector loads.
template <typename T>
__device__ float dot_row(const float* __restrict__ q, const T* __restrict__ k, int D, bool vec) {
  float acc = 0.f;
  for (int d = 0; d < D; d += 8) {
    if (vec) {
      const Pack8<T> pk = *reinterpret_cast<const Pack8<T>*>(k + d);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = fmaf(q[d + e], to_float(pk.x[e]), acc);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = fmaf(q[d + e], to_float(k[d + e]), acc);
    }
  }
  return acc;
}

// Merge two online-softmax states (m = running max, l = sum of exp(s - m)).
__device__ __forceinline__ void merge(float& m, float& l, float m2, float l2) {
  float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;  // both empty
  l = l * expf(m - mn) + l2 * expf(m2 - mn);
  m = mn;
}

struct RowCtx {
  int64_t k_base, v_base;   // element offsets of this sequence's K/V (non-paged), incl. kv head
  int64_t k_head, v_head;   // kv-head offsets (paged: added to the page's slot offset)
  const int32_t* pages;     // this sequence's page table row, or NULL
  int page_size;
  int leftpad;              // logical key j' maps to stored key j = j' + leftpad
};

// Element offsets of logical key jp (0-based, after leftpad) in K and V.
__device__ __forceinline__ void key_offsets(const kseek_params& p, const RowCtx& c, int jp,
                                            int64_t& ko, int64_t& vo) {
  const int64_t j = (int64_t)jp + c.leftpad;
  if (c.pages) {
    const int64_t page = c.pages[j / c.page_size];
    const int64_t slot = j % c.page_size;
    ko = page * p.k_batch_stride + slot * p.k_row_stride + c.k_head;
    vo = page * p.v_batch_stride + slot * p.v_row_stride + c.v_head;
  } else {
    ko = c.k_base + j * p.k_row_stride;
    vo = c.v_base + j * p.v_row_stride;
  }
}

// One query row of one head: the whole algorithm. kDim bounds the q/k head dim (the q row lives in
// shared memory), kAcc * kThreads the v head dim (kAcc output dims per thread).
template <typename T, typename TO, int kDim, int kAcc>
__device__ __forceinline__ void fwd_row(const kseek_params& p, bool vec) {
  __shared__ float q_sh[kDim];           // q row (fp32, descaled), [D]
  __shared__ float p_sh[kThreads];       // exp(s - m) of the current key chunk
  __shared__ int64_t voff_sh[kThreads];  // V element offsets of the current key chunk
  __shared__ float red_m[kThreads / 32], red_l[kThreads / 32];

  const int tid = threadIdx.x;
  const int i = blockIdx.x;   // query row within its sequence
  const int h = blockIdx.y;   // query head
  const int b = blockIdx.z;   // sequence
  const int hkv = h / (p.heads_q / p.heads_kv);

  // ---- this sequence's query rows and keys ------------------------------------------------
  int64_t q_row0 = 0;       // first packed row (varlen) of this sequence
  int sq = p.seqlen_q;
  if (p.cu_seqlens_q) {
    q_row0 = p.cu_seqlens_q[b];
    sq = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  }
  if (i >= sq) return;  // varlen: this sequence is shorter than the max

  int64_t k_row0 = 0;       // first packed key row (varlen, non-paged)
  int cap = p.seqlen_k;     // stored keys of this sequence
  if (p.cu_seqlens_k) {
    k_row0 = p.cu_seqlens_k[b];
    cap = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
  }
  const int end = p.seqused_k ? p.seqused_k[b] : cap;
  const int lp = p.leftpad_k ? p.leftpad_k[b] : 0;
  const int sk = max(0, end - lp);  // effective key length Sk_b

  RowCtx c;
  c.leftpad = lp;
  c.page_size = p.page_size;
  c.k_head = (int64_t)hkv * p.k_head_stride;
  c.v_head = (int64_t)hkv * p.v_head_stride;
  c.pages = p.page_table ? p.page_table + (int64_t)b * p.page_table_stride : nullptr;
  if (p.cu_seqlens_k) {
    c.k_base = k_row0 * p.k_row_stride + c.k_head;
    c.v_base = k_row0 * p.v_row_stride + c.v_head;
  } else {
    c.k_base = (int64_t)b * p.k_batch_stride + c.k_head;
    c.v_base = (int64_t)b * p.v_batch_stride + c.v_head;
  }

  // ---- visible keys: bottom-right aligned window, causal = right window 0 ---------------------
  int wl = p.window_left, wr = p.window_right;
  if (p.causal) wr = 0;
  const int64_t diag = (int64_t)i + sk - sq;  // key position of this query row
  int64_t lo64 = 0, hi64 = (int64_t)sk - 1;
  if (wl >= 0) lo64 = max(lo64, diag - wl);
  if (wr >= 0) hi64 = min(hi64, diag + wr);
  if (p.attention_chunk > 0) {  // chunked local attention: the query's own chunk only
    const int64_t c0 = chunk_start(diag, p.attention_chunk);
    lo64 = max(lo64, c0);
    hi64 = min(hi64, c0 + p.attention_chunk - 1);
  }
  const int lo = (int)lo64;
  const int hi = (int)max(hi64, lo64 - 1);  // hi < lo: no visible key

  // ---- output locations ---------------------------------------------------------------------
  TO* o;
  int64_t q_off;
  float* lse = nullptr;
  if (p.cu_seqlens_q) {
    q_off = (q_row0 + i) * p.q_row_stride + (int64_t)h * p.q_head_stride;
    o = (TO*)p.o + (q_row0 + i) * p.o_row_stride + (int64_t)h * p.o_head_stride;
    if (p.lse) lse = p.lse + (int64_t)h * p.lse_head_stride + q_row0 + i;
  } else {
    q_off = (int64_t)b * p.q_batch_stride + (int64_t)i * p.q_row_stride + (int64_t)h * p.q_head_stride;
    o = (TO*)p.o + (int64_t)b * p.o_batch_stride + (int64_t)i * p.o_row_stride + (int64_t)h * p.o_head_stride;
    if (p.lse) lse = p.lse + (int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride + i;
  }

  if (hi < lo) {  // no visible key: zeros and -inf, sinks or not
    for (int d = tid; d < p.head_dim_v; d += kThreads) store(o + d, 0.f);
    if (lse && tid == 0) *lse = -INFINITY;
    return;
  }

  // ---- q row to shared memory (fp8: descaled) -----------------------------------------------
  const int64_t ds = (int64_t)b * p.descale_batch_stride + hkv;
  const float qd = p.q_descale ? p.q_descale[ds] : 1.f;
  const float kd = p.k_descale ? p.k_descale[ds] : 1.f;
  const float vd = p.v_descale ? p.v_descale[ds] : 1.f;
  const T* q = (const T*)p.q + q_off;
  for (int d = tid; d < p.head_dim; d += kThreads) q_sh[d] = to_float(q[d]) * qd;
  __syncthreads();

  const T* K = (const T*)p.k;
  const T* V = (const T*)p.v;
  const float score_mul = p.scale * kd;
  const bool capped = p.softcap > 0.f;
  auto score = [&](int jp, int64_t& vo) {
    int64_t ko;
    key_offsets(p, c, jp, ko, vo);
    float s = dot_row(q_sh, K + ko, p.head_dim, vec) * score_mul;
    if (capped) s = p.softcap * tanhf(s / p.softcap);
    return s;
  };

  // ---- pass 1: row max and denominator ------------------------------------------------------
  float m = -INFINITY, l = 0.f;
  for (int jp = lo + tid; jp <= hi; jp += kThreads) {
    int64_t vo;
    const float s = score(jp, vo);
    merge(m, l, s, 1.f);
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
    merge(m, l, m2, l2);
  }
  if ((tid & 31) == 0) { red_m[tid >> 5] = m; red_l[tid >> 5] = l; }
  __syncthreads();
  m = red_m[0];
  l = red_l[0];
  for (int w = 1; w < kThreads / 32; ++w) merge(m, l, red_m[w], red_l[w]);
  // m is finite: at least one key is visible. A sink joins the max (stability) and the sum.
  if (p.sinks) {
    const float sink = p.sinks[h];
    const float mn = fmaxf(m, sink);
    l = l * expf(m - mn) + expf(sink - mn);
    m = mn;
  }

  // ---- pass 2: o = sum_j exp(s_j - m) v_j / l ---------------------------------------------------
  float acc0 = 0.f, acc1 = 0.f;  // output dims tid and tid + 128
  float acc[kAcc];               // kAcc > 2 (wide): output dims tid, tid + 128, ...
#pragma unroll
  for (int e = 0; e < kAcc; ++e) acc[e] = 0.f;
  const int dv = p.head_dim_v;
  for (int c0 = lo; c0 <= hi; c0 += kThreads) {
    const int n = min(kThreads, hi - c0 + 1);
    if (tid < n) {
      int64_t vo;
      const float s = score(c0 + tid, vo);
      p_sh[tid] = expf(s - m);
      voff_sh[tid] = vo;
    }
    __syncthreads();
    for (int t = 0; t < n; ++t) {
      const T* vrow = V + voff_sh[t];
      const float pt = p_sh[t];
      if constexpr (kAcc == 2) {  // the 256-wide kernel, written as v12 (its SASS is pinned)
        if (tid < dv) acc0 = fmaf(pt, to_float(vrow[tid]), acc0);
        if (tid + kThreads < dv) acc1 = fmaf(pt, to_float(vrow[tid + kThreads]), acc1);
      } else {
#pragma unroll
        for (int e = 0; e < kAcc; ++e)
          if (tid + e * kThreads < dv) acc[e] = fmaf(pt, to_float(vrow[tid + e * kThreads]), acc[e]);
      }
    }
    __syncthreads();  // the chunk's shared arrays are rewritten next iteration
  }

  const float inv = vd / l;
  if constexpr (kAcc == 2) {
    if (tid < dv) store(o + tid, acc0 * inv);
    if (tid + kThreads < dv) store(o + tid + kThreads, acc1 * inv);
  } else {
#pragma unroll
    for (int e = 0; e < kAcc; ++e)
      if (tid + e * kThreads < dv) store(o + tid + e * kThreads, acc[e] * inv);
  }
  if (lse && tid == 0) *lse = m + logf(l);
}

template <typename T, typename TO>
__global__ void __launch_bounds__(kThreads) naive_fwd_kernel(const __grid_constant__ kseek_params p, bool vec) {
  fwd_row<T, TO, kMaxDim, 2>(p, vec);
}

// Head dims past 256 (q/k up to kMaxDimWide, v up to kMaxDimVWide): FlashAttention-3's qv case
// ([q, qv] . [k, v] has D + Dv = 576 at D = 64, Dv = 512). 16-bit inputs only, as FA3.
template <typename T, typename TO>
__global__ void __launch_bounds__(kThreads) naive_wide_kernel(const __grid_constant__ kseek_params p, bool vec) {
  fwd_row<T, TO, kMaxDimWide, kMaxDimVWide / kThreads>(p, vec);
}

template <typename T, typename TO>
int launch(const kseek_params* p, cudaStream_t stream) {
  // Vector loads need 8-element-aligned key rows: base pointer and every K stride.
  const uintptr_t align = 8 * sizeof(T);
  const bool vec = ((uintptr_t)p->k % align == 0) && p->k_batch_stride % 8 == 0 &&
                   p->k_row_stride % 8 == 0 && p->k_head_stride % 8 == 0;
  const dim3 grid((unsigned)p->seqlen_q, (unsigned)p->heads_q, (unsigned)p->batch);
  if (p->head_dim > kMaxDim || p->head_dim_v > kMaxDim) {
    if constexpr (sizeof(T) == 2) {
      naive_wide_kernel<T, TO><<<grid, kThreads, 0, stream>>>(*p, vec);
    } else {
      return KSEEK_ERR_UNSUPPORTED;  // fp8 with a head dim past 256 (FA3 refuses it too)
    }
  } else {
    naive_fwd_kernel<T, TO><<<grid, kThreads, 0, stream>>>(*p, vec);
  }
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}

template <typename T>
int launch_out(const kseek_params* p, cudaStream_t stream) {
  if (p->out_dtype == KSEEK_BF16) return launch<T, __nv_bfloat16>(p, stream);
  if (p->out_dtype == KSEEK_FP16) return launch<T, __half>(p, stream);
  return KSEEK_ERR_UNSUPPORTED;  // fp8 output
}

inline bool bad_dim(int d, int most) { return d <= 0 || d > most || d % 8 != 0; }

// The checks a kseek_fwd makes before any work (kseek.h): KSEEK_OK when the call may go on (it may
// still have no rows: seqlen_q == 0), else the status to return.
inline int check_params(const kseek_params* p) {
  if (!p) return KSEEK_ERR_INVALID;
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (p->dtype < KSEEK_BF16 || p->dtype > KSEEK_FP8_E4M3) return KSEEK_ERR_INVALID;
  if (p->out_dtype < KSEEK_BF16 || p->out_dtype > KSEEK_FP8_E4M3) return KSEEK_ERR_INVALID;
  if (p->batch <= 0 || p->seqlen_q < 0 || p->seqlen_k < 0) return KSEEK_ERR_INVALID;
  if (p->heads_q <= 0 || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return KSEEK_ERR_INVALID;
  if (bad_dim(p->head_dim, kMaxDimWide) || bad_dim(p->head_dim_v, kMaxDimVWide)) return KSEEK_ERR_INVALID;
  if (!p->q || !p->k || !p->v || !p->o) return KSEEK_ERR_INVALID;
  if (p->page_table && (p->page_size <= 0 || p->page_table_stride <= 0)) return KSEEK_ERR_INVALID;
  if (p->attention_chunk < 0) return KSEEK_ERR_INVALID;
  if (p->heads_q > 65535 || p->batch > 65535) return KSEEK_ERR_UNSUPPORTED;  // grid y/z limits
  return KSEEK_OK;
}

}  // namespace naive
