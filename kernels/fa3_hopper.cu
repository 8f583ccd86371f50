// fa3_hopper.cu: FlashAttention-3-style forward for Hopper (sm_90a), implementing kernels/kseek.h.
//
// STATUS: v5c (kernels/NOTES.md has every version's prediction and measurement). Probes, each of
// which #includes this file: kernels/probe/probe_fa3.cu (prefill), probe_decode.cu (Part D),
// probe_fp8.cu (Part F). Design and layouts: kernels/probe/README*.md.
//
// Paths, tried in this order by kseek_fwd:
//   * Part D, split-KV decode (dec::): paged KV (any page size), and dense KV with at most 16 query
//       rows per KV head; bf16/fp16, D = Dv in {64, 128, 256}; seqused_k, leftpad_k, causal/window,
//       softcap, sinks, LSE. mma.sync + cp.async, query heads of a KV head packed into one M tile,
//       split count chosen from the shape and the SM count (num_splits = 0), fp32 partials in the
//       harness's workspace and a combine kernel.
//   * Part 3, prefill (fa3::fwd_kernel<T, D, DV, BN, VAR, DYN>): bf16/fp16 (out dtype = in dtype), no
//       paged KV, (D, Dv) in {(64,64), (96,96) [2 smem chunks, 6 k-steps], (128,128), (192,128), (192,192),
//       (256,256)}; dense or varlen (cu_seqlens_q AND cu_seqlens_k; one stream sync, see
//       varlen_totals); seqused_k, leftpad_k; causal and/or sliding window (bottom-right aligned),
//       fully masked K/V tiles skipped; softcap (tanh.approx.f32); sinks; MHA/GQA/MQA; LSE.
//       A persistent grid (one CTA of 384 threads per SM walks 128-row query tiles, in sections of
//       heads whose K/V fit in 16 MB of L2, longest causal tiles first; round-robin, or from a global
//       tile counter for causal/windowed calls with head dim > 64: DYN): warpgroup 0 produces (one thread issues TMA bulk tensor copies of Q and of K/V
//       tiles into a 2-stage ring of 128B-swizzled shared memory, mbarriers), warpgroups 1 and 2
//       consume 64 rows each (S = Q K^T by wgmma SS, softcap / masks / online softmax in
//       registers, O += P V by wgmma RS), with intra-warpgroup overlap and ping-pong between the
//       two (VAR 2, the default; KSEEK_FA3_VARIANT=0/1 for the simpler schedules). K/V tiles of
//       128 keys (192 at hd64 and hd96 from 2k keys), 112 for D = Dv = 192, 80 for 256.
//       A/B switches: KSEEK_FA3_ORDER=flat,
//       KSEEK_FA3_SECTION_MB, KSEEK_FA3_SCHED=static|dynamic, KSEEK_FA3_BN=64|128|176|192 (A/B: keys per K/V tile).
//   * Part F, fp8 e4m3 prefill (fa3::f8::): q, k, v e4m3 with descales, o bf16; QK^T and PV by
//       fp8 wgmma (V transposed in shared memory by the producer warpgroup).
//   * fallback (naive::, copied from kernels/naive_fwd.cu): everything else (other head dims, odd
//       strides/alignments, varlen under CUDA-graph capture, non-Hopper devices).
//     KSEEK_FA3_FORCE_FALLBACK=1 forces it (A/B checks).
#if __has_include("kseek.h")
#include "kseek.h"
#else
#include "../kseek.h"
#endif

#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's types only: the function is reached
                   // through cudaGetDriverEntryPointByVersion, so no -lcuda and no dlopen here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <algorithm>
#include <atomic>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

// =================================================================================================
// Part 1: the fallback (kernels/naive_fwd.cu's kernel, unchanged apart from the namespace name)
// =================================================================================================
namespace naive {

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return static_cast<float>(x); }

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

template <typename T, typename TO>
__global__ void __launch_bounds__(kThreads) naive_fwd_kernel(const __grid_constant__ kseek_params p, bool vec) {
  __shared__ float q_sh[kMaxDim];        // q row (fp32, descaled), [D]
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
      if (tid < dv) acc0 = fmaf(pt, to_float(vrow[tid]), acc0);
      if (tid + kThreads < dv) acc1 = fmaf(pt, to_float(vrow[tid + kThreads]), acc1);
    }
    __syncthreads();  // the chunk's shared arrays are rewritten next iteration
  }

  const float inv = vd / l;
  if (tid < dv) store(o + tid, acc0 * inv);
  if (tid + kThreads < dv) store(o + tid + kThreads, acc1 * inv);
  if (lse && tid == 0) *lse = m + logf(l);
}

template <typename T, typename TO>
int launch(const kseek_params* p, cudaStream_t stream) {
  // Vector loads need 8-element-aligned key rows: base pointer and every K stride.
  const uintptr_t align = 8 * sizeof(T);
  const bool vec = ((uintptr_t)p->k % align == 0) && p->k_batch_stride % 8 == 0 &&
                   p->k_row_stride % 8 == 0 && p->k_head_stride % 8 == 0;
  const dim3 grid((unsigned)p->seqlen_q, (unsigned)p->heads_q, (unsigned)p->batch);
  naive_fwd_kernel<T, TO><<<grid, kThreads, 0, stream>>>(*p, vec);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}

template <typename T>
int launch_out(const kseek_params* p, cudaStream_t stream) {
  if (p->out_dtype == KSEEK_BF16) return launch<T, __nv_bfloat16>(p, stream);
  if (p->out_dtype == KSEEK_FP16) return launch<T, __half>(p, stream);
  return KSEEK_ERR_UNSUPPORTED;  // fp8 output
}

inline bool bad_dim(int d) { return d <= 0 || d > kMaxDim || d % 8 != 0; }

}  // namespace naive
// =================================================================================================
// Part 2: Hopper building blocks (each one is exercised on its own by probe_wgmma.cu)
// =================================================================================================
namespace fa3 {

constexpr int kBM = 128;            // query rows per CTA (two consumer warpgroups of 64 rows)
// keys per K/V tile: a template parameter of fwd_kernel (BN = 128; 112 for D = Dv = 192, 80 for 256)
constexpr int kStages = 2;          // K/V ring depth
constexpr int kThreads = 384;       // warpgroup 0 = producer, 1..2 = consumers
constexpr int kConsumerWarps = 8;   // arrivals that free one K or V stage (lane 0 of each warp)
// setmaxnreg targets. The CTA holds 384 x 168 registers from launch (__launch_bounds__(384, 1));
// what the producer gives back is all the consumers can take: 128 x (168 - 40) = 256 x (232 - 168).
// (v5 first had 32/240, which asks for 1024 registers more than the pool holds: the consumers'
// setmaxnreg.inc waited forever -- the probe hung on its first run. 24/240 fits but makes ptxas
// spill 8 bytes in the v5 producer.)
#ifdef FA3_REGS_24_240  // A/B build hook (probe only): v4's split; the v5 producer then spills 8 bytes
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
#else
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
#endif

// ---- shared-memory tile layout ------------------------------------------------------------------
// A tile of R rows x D 16-bit elements (Q: R=128 query rows; K, V: R=128 keys) is stored as D/64
// "column chunks"; chunk c holds columns 64c..64c+63 of all R rows, R x 128 bytes, at byte offset
// c*R*128. Inside a chunk, row r occupies bytes r*128..r*128+127 and its 16-byte unit u (columns
// 8u..8u+7 of the chunk) is stored at unit u ^ (r % 8): the TMA SWIZZLE_128B pattern, which is the
// address bits [4:6] XOR [7:9] and therefore needs every chunk to start on a 1024-byte boundary.
// This is also the canonical 128B-swizzle layout wgmma reads through a matrix descriptor
// (8-row x 128-byte swizzle atoms of 1024 bytes).
__host__ __device__ __forceinline__ uint32_t swz_offset(int row, int col, int rows) {
  const int chunk = col >> 6;
  const int inrow = (col & 63) * 2;          // byte inside the 128-byte row of the chunk
  const int unit = (inrow >> 4) ^ (row & 7);
  return (uint32_t)(chunk * rows * 128 + row * 128 + unit * 16 + (inrow & 15));
}

// ---- wgmma accumulator fragment (PTX ISA: "Register Fragments", wgmma .m64nNk16, f32 D) ---------
// Thread t (0..127 of the warpgroup) holds N/2 floats of the 64 x N tile; element i is at
//   row = 16*(t/32) + (t%32)/4 + 8*((i/2)%2),   col = 8*(i/4) + 2*(t%4) + (i%2).
__host__ __device__ __forceinline__ int acc_row(int t, int i) {
  return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1);
}
__host__ __device__ __forceinline__ int acc_col(int t, int i) {
  return 8 * (i >> 2) + 2 * (t & 3) + (i & 1);
}
// The A fragment of wgmma .m64nNk16 with A in registers (4 x .b32 = 8 halves per thread) has
//   a[0] = (row r, cols 2q, 2q+1), a[1] = (r+8, 2q..), a[2] = (r, 8+2q..), a[3] = (r+8, 8+2q..)
// with r = 16*warp + lane/4, q = lane%4, columns relative to the k16 slice; so k-slice kk of a
// 64 x N accumulator is exactly its elements 8kk..8kk+7 taken in pairs (FA2/FA3's identity).

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier (PTX ISA: "Parallel Synchronization and Communication Instructions: mbarrier") ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// arrive (count 1) and raise the expected transaction bytes of the current phase
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// Wait until the phase with the given parity has completed. A fresh barrier is in phase 0, so
// waiting for parity 1 returns at once (how the producer's first pass over the empty ring starts).
// FA3_DEBUG_HANG (the probe defines it) traps after ~2^31 polls instead of hanging forever.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef FA3_DEBUG_HANG
  long long spins = 0;
  while (!mbar_try_wait(bar, parity)) {
    if (++spins > (1ll << 31)) __trap();
  }
#else
  while (!mbar_try_wait(bar, parity)) {
  }
#endif
}

// ---- TMA (PTX ISA: "Data Movement: cp.async.bulk.tensor"; tensor maps: "Tensor Map") ------------
__device__ __forceinline__ void prefetch_tmap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// 4-D tiled load of one box into shared memory, completing `bytes` of transactions on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// 4-D tiled store of one box from shared memory (bulk async group of this thread).
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk stores have read their shared memory (it may be written again).
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// This thread's bulk stores are complete.
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// ---- register rebalancing (PTX ISA: "setmaxnreg") ---------------------------------------------
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

// ---- wgmma (PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions") ----
// Matrix descriptor ("Matrix Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading
// dimension byte offset >> 4, 32-45 stride dimension byte offset >> 4, 49-51 base offset (0: every
// swizzle atom starts on a 1024-byte boundary), 62-63 layout/swizzle (1 = 128B swizzle).
__host__ __device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo_bytes,
                                                       uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
  d |= (uint64_t)((lbo_bytes & 0x3FFFF) >> 4) << 16;
  d |= (uint64_t)((sbo_bytes & 0x3FFFF) >> 4) << 32;
  d |= (uint64_t)1 << 62;
  return d;
}
// K-major operand (Q as A, K as B of S = Q K^T): the rows of the tile are the M (or N) dimension,
// the 16 elements of k-step ks are bytes 32*(ks%4).. of chunk ks/4. Within a swizzle atom wgmma
// applies the XOR on absolute address bits, so a k-step inside the 128-byte row is a plain +32 B
// on the start address. SBO = 1024 (next group of 8 rows); LBO unused for swizzled K-major (1).
// `tile` is the address of row 0 of the operand, `chunk_rows` the row count of its chunks.
__host__ __device__ __forceinline__ uint64_t desc_kmajor(uint32_t tile, int chunk_rows, int ks) {
  return make_desc(tile + (uint32_t)((ks >> 2) * chunk_rows * 128 + (ks & 3) * 32), 16, 1024);
}
// MN-major operand (V as B of O = P V, instruction trans-b = 1): the GEMM's K is the key index
// (tile rows), its N the value dim (tile columns, contiguous). k-step ks = keys 16ks..16ks+15 =
// +16*128 bytes. LBO = byte distance between 64-column chunks (the next 64 N-elements:
// chunk_rows*128), SBO = 1024 (the next 8 keys). (PTX ISA "Strides": for MN-major swizzled
// layouts LBO is the stride from the first swizzle-width of MN to the next, SBO the stride
// between 8-row groups along K.) probe_wgmma.cu test (b) also tries LBO/SBO swapped.
__host__ __device__ __forceinline__ uint64_t desc_mnmajor(uint32_t tile, int chunk_rows, int ks) {
  return make_desc(tile + (uint32_t)(ks * 16 * 128), (uint32_t)(chunk_rows * 128), 1024);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pin accumulator registers after a wait: the wgmma asm "writes" them when issued as far as the
// compiler knows, so without this it could read them before wgmma.wait_group.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// SS: D[64x64] (+)= A[64x16] (smem desc) * B[16x64] (smem desc); A and B K-major (trans 0/0).
#define FA3_WGMMA_SS_N64(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
      : "l"(da), "l"(db), "r"(scale_d))

// SS: D[64x128] (+)= A[64x16] (smem desc) * B[16x128] (smem desc); A and B K-major (trans 0/0).
#define FA3_WGMMA_SS_N128(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(da), "l"(db), "r"(scale_d))

// SS: D[64x176] (+)= A[64x16] * B[16x176] (head dim 128 with 176-key tiles, KSEEK_FA3_BN=176).
#define FA3_WGMMA_SS_N176(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n176k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87}, %88, %89, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]) \
      : "l"(da), "l"(db), "r"(scale_d))

// SS: D[64x192] (+)= A[64x16] * B[16x192] (head dim 64 with 192-key tiles, KSEEK_FA3_BN=192).
#define FA3_WGMMA_SS_N192(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, %96, %97, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]) \
      : "l"(da), "l"(db), "r"(scale_d))

// SS: D[64x80] (+)= A[64x16] (smem desc) * B[16x80] (smem desc); A and B K-major (trans 0/0).
#define FA3_WGMMA_SS_N80(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n80k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39}, %40, %41, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]) \
      : "l"(da), "l"(db), "r"(scale_d))

// SS: D[64x112] (+)= A[64x16] (smem desc) * B[16x112] (smem desc); A and B K-major (trans 0/0).
#define FA3_WGMMA_SS_N112(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n112k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55}, %56, %57, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]) \
      : "l"(da), "l"(db), "r"(scale_d))

// RS: D[64x64] (+)= A[64x16] (4 x b32 registers/thread) * B[16x64] (smem desc, TNB = trans-b).
#define FA3_WGMMA_RS_N64(TY, TNB) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, " TNB ";\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d))

// RS: D[64x32] (+)= A[64x16] * B[16x32] (head dim 96: the second half-chunk of V).
#define FA3_WGMMA_RS_N32(TY, TNB) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, " TNB ";\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d))

// RS: D[64x128] (+)= A[64x16] (4 x b32 registers/thread) * B[16x128] (smem desc, TNB = trans-b).
#define FA3_WGMMA_RS_N128(TY, TNB) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, " TNB ";\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d))


// D (+)= A * B, f32 accumulators; scale_d = 0 overwrites D (first k-step), 1 accumulates.
template <bool F16>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16) FA3_WGMMA_SS_N128("f16");
  else FA3_WGMMA_SS_N128("bf16");
}
template <bool F16>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16) FA3_WGMMA_SS_N64("f16");
  else FA3_WGMMA_SS_N64("bf16");
}
template <bool F16>
__device__ __forceinline__ void wgmma_ss_n80(float (&d)[40], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16) FA3_WGMMA_SS_N80("f16");
  else FA3_WGMMA_SS_N80("bf16");
}
template <bool F16>
__device__ __forceinline__ void wgmma_ss_n112(float (&d)[56], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16) FA3_WGMMA_SS_N112("f16");
  else FA3_WGMMA_SS_N112("bf16");
}
template <bool F16>
__device__ __forceinline__ void wgmma_ss_n176(float (&d)[88], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16) FA3_WGMMA_SS_N176("f16");
  else FA3_WGMMA_SS_N176("bf16");
}
template <bool F16>
__device__ __forceinline__ void wgmma_ss_n192(float (&d)[96], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16) FA3_WGMMA_SS_N192("f16");
  else FA3_WGMMA_SS_N192("bf16");
}
// RS form with B N-major (trans-b = 1): V as stored, [key][dv].
template <bool F16>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t db,
                                            int scale_d) {
  if constexpr (F16) FA3_WGMMA_RS_N128("f16", "1");
  else FA3_WGMMA_RS_N128("bf16", "1");
}
template <bool F16>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t db,
                                            int scale_d) {
  if constexpr (F16) FA3_WGMMA_RS_N64("f16", "1");
  else FA3_WGMMA_RS_N64("bf16", "1");
}
template <bool F16>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[16], const uint32_t (&a)[4], uint64_t db,
                                            int scale_d) {
  if constexpr (F16) FA3_WGMMA_RS_N32("f16", "1");
  else FA3_WGMMA_RS_N32("bf16", "1");
}

// Two floats to one .b32 of two 16-bit values, the lower column in the low half.
template <bool F16>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (F16) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}
// A 64 x N f32 accumulator (N/2 per thread) to the A fragments of N/16 k-steps of m64nXk16.
template <bool F16, int NA>
__device__ __forceinline__ void acc_to_a(const float (&s)[NA], uint32_t (&a)[NA / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < NA / 8; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[kk][j] = pack2<F16>(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One 32-bit word to / from shared memory (the tile index the producer hands to the consumers;
// ordered by the mbarrier arrive (release) and wait (acquire) around it).
__device__ __forceinline__ void st_shared_s32(uint32_t addr, int v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_shared_s32(uint32_t addr) {
  int v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
// 16 zero bytes to shared memory (generic proxy; the caller fences before wgmma reads them).
__device__ __forceinline__ void st_shared_zero16(uint32_t addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(0) : "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// Make this thread's generic-proxy shared-memory writes visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Named barrier over `count` threads (ids 1, 2: one per consumer warpgroup; 0 is __syncthreads).
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// S (+)= Q K^T k-step for an S tile of BN keys (BN/2 floats per thread).
template <bool F16>
__device__ __forceinline__ void wgmma_s(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  wgmma_ss_n128<F16>(d, da, db, scale_d);
}
template <bool F16>
__device__ __forceinline__ void wgmma_s(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  wgmma_ss_n64<F16>(d, da, db, scale_d);
}
template <bool F16>
__device__ __forceinline__ void wgmma_s(float (&d)[40], uint64_t da, uint64_t db, int scale_d) {
  wgmma_ss_n80<F16>(d, da, db, scale_d);
}
template <bool F16>
__device__ __forceinline__ void wgmma_s(float (&d)[56], uint64_t da, uint64_t db, int scale_d) {
  wgmma_ss_n112<F16>(d, da, db, scale_d);
}
template <bool F16>
__device__ __forceinline__ void wgmma_s(float (&d)[88], uint64_t da, uint64_t db, int scale_d) {
  wgmma_ss_n176<F16>(d, da, db, scale_d);
}
template <bool F16>
__device__ __forceinline__ void wgmma_s(float (&d)[96], uint64_t da, uint64_t db, int scale_d) {
  wgmma_ss_n192<F16>(d, da, db, scale_d);
}

// O (+)= P V for one k-step (16 keys) over all DV output columns: N = 128 wgmmas over pairs of
// 64-column V chunks, plus one N = 64 wgmma for an odd last chunk (DV = 64, 192). The 64-column
// chunk c of O is o[32c .. 32c+31] in every thread (acc_col of element 32c+i is 64c + acc_col(i)),
// so a sub-array of o is exactly the accumulator of an N-wide wgmma on those columns.
// `vtile` = V stage address; its chunks are BN*128 bytes apart (the LBO of desc_mnmajor).
template <bool F16, int DV, int BN>
__device__ __forceinline__ void pv_step(float (&o)[DV / 2], const uint32_t (&pa)[4], uint32_t vtile,
                                        int ks) {
  constexpr int NC = DV / 64;
#pragma unroll
  for (int c = 0; c + 2 <= NC; c += 2)
    wgmma_rs_tb<F16>(*reinterpret_cast<float(*)[64]>(&o[32 * c]), pa,
                     desc_mnmajor(vtile + (uint32_t)(c * BN * 128), BN, ks), 1);
  if constexpr (NC % 2 == 1)
    wgmma_rs_tb<F16>(*reinterpret_cast<float(*)[32]>(&o[32 * (NC - 1)]), pa,
                     desc_mnmajor(vtile + (uint32_t)((NC - 1) * BN * 128), BN, ks), 1);
  if constexpr (DV % 64 == 32)  // Dv = 96: columns 64..95 = the first half of chunk NC
    wgmma_rs_tb<F16>(*reinterpret_cast<float(*)[16]>(&o[32 * NC]), pa,
                     desc_mnmajor(vtile + (uint32_t)(NC * BN * 128), BN, ks), 1);
}

// =================================================================================================
// Part 3: the fast kernel
// =================================================================================================
// D = q/k head dim, DV = v head dim (multiples of 32), BN = keys per K/V tile. Shared memory holds
// 64-column chunks (128-byte swizzle atoms): D = 96 takes two, the TMA zero-filling columns 96..127,
// which the GEMMs never read (6 k-steps of S; P V as N = 64 + N = 32, pv_step).
__host__ __device__ constexpr int pad64(int x) { return (x + 63) / 64 * 64; }
template <int D, int DV, int BN>
struct Smem {
  static constexpr int kQBytes = kBM * pad64(D) * 2;
  static constexpr int kKBytes = BN * pad64(D) * 2;   // one stage of K
  static constexpr int kVBytes = BN * pad64(DV) * 2;  // one stage of V
  // Two Q buffers where they fit (hd64, hd96 with 128-key tiles, hd128): the producer loads the next
  // tile's Q as soon as it knows the tile, instead of after the current tile's last S.
  static constexpr int kQBuf =
      2 * kQBytes + kStages * (kKBytes + kVBytes) + 128 + 1024 <= 227 * 1024 ? 2 : 1;
  // O staged for a TMA store (kOBytes: both warpgroups' 64 rows, 64-column chunks), where it fits
  // beside the above: hd64, hd96 with 128-key tiles, hd128 with 128-key tiles (0 elsewhere).
  static constexpr int kOBytes = kBM * pad64(DV) * 2;
  static constexpr int kOStage =
      kQBuf * kQBytes + kStages * (kKBytes + kVBytes) + kOBytes + 128 + 1024 <= 227 * 1024 ? 1 : 0;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBuf * kQBytes;
  static constexpr int kV = kK + kStages * kKBytes;
  static constexpr int kO = kV + kStages * kVBytes;  // chunk c of warpgroup w at kO + (2c + w) * 8 KB
  static constexpr int kBar = kO + kOStage * kOBytes;
  // barriers: q_full, k_full[2], v_full[2], k_empty[2], v_empty[2], q_empty; then the index of
  // the tile whose Q the q_full barrier announces (-1: no more tiles); then q_full, q_empty and
  // the index of the second Q buffer (kQBuf == 2)
  static constexpr int kBarQ = kBar, kBarKF = kBar + 8, kBarVF = kBar + 24, kBarKE = kBar + 40,
                       kBarVE = kBar + 56, kBarQE = kBar + 72, kTileIdx = kBar + 80,
                       kBarQ2 = kBar + 88, kBarQE2 = kBar + 96, kTileIdx2 = kBar + 104;
  static constexpr int kTotal = kBar + 128 + 1024;  // + slack to align the base to 1024 bytes
  static_assert(kQBytes % 1024 == 0 && kKBytes % 1024 == 0 && kVBytes % 1024 == 0,
                "every tile (and chunk) must start on a 1024-byte boundary (swizzle atoms)");
  static_assert(kTotal <= 227 * 1024, "shared memory per block (sm_90: 227 KB opt-in)");
};

struct Args {
  void* o;
  float* lse;
  int64_t o_bs, o_rs, o_hs;
  int64_t lse_bs, lse_hs;
  const int32_t* cu_q;     // varlen (both set) or both NULL
  const int32_t* cu_k;
  const int32_t* seqused;  // per-sequence key end, or NULL
  const int32_t* leftpad;  // per-sequence first key, or NULL
  const float* sinks;      // [Hq] or NULL
  int sq, sk;              // dense: Sq, Sk; varlen: unused (per-sequence from cu_seqlens)
  int group;               // Hq / Hkv
  int wl, wr;              // window (causal folded into wr = 0); < 0 = unbounded; clamped < 2^29
  int dv;                  // true Dv (columns of O stored; DV may be padded)
  int vzero;               // 1: V rows past the sequence's key end may hold anything (zero them)
  int softcap_on;
  float scale_log2;        // multiplies the (possibly capped) score before exp2
  float lse_mul;           // m_run * lse_mul = running max in natural-log units
  float cap_in, cap_out;   // softcap: s = cap_out * tanh(s_raw * cap_in)
  int q_swap, k_swap, v_swap;  // 1: the map's dims are {D, H, S, B} instead of {D, S, H, B}
  int heads, batch;        // Hq, B
  int m_blocks;            // ceil(Sq / kBM) (varlen: of the longest sequence)
  int tiles;               // m_blocks * heads * batch work tiles, spread over a persistent grid
  int sec;                 // (batch, head) pairs per section of the tile order (see tile_at)
  int slot;                // this launch's tile counter: g_sched[slot] (see next_tile)
  int o_tma, o_swap;       // 1: O leaves through the `to` tensor map (dense only); its dim order
};

// Dynamic tile scheduler: CTA c runs tile c first, then asks a global counter for the next one
// when its producer has issued the last K/V load of the current tile, so a CTA that drew short
// causal tiles takes more of them (greedy, longest first: makespan within a few % of the ideal,
// where the static round-robin lost 3-13% on causal rows and up to 82% under the sectioned order,
// NOTES v4). g_sched[slot] = {tiles handed out past the first wave, CTAs finished}; the last CTA
// to finish puts both back to 0, so no per-call memset is needed and graph replays work. The host
// rotates kSchedSlots slots so that launches on different streams do not share a counter.
constexpr int kSchedSlots = 32;
__device__ int g_sched[kSchedSlots][2];
__device__ __forceinline__ int next_tile(const Args& a) {
  return (int)gridDim.x + atomicAdd(&g_sched[a.slot][0], 1);
}
// Called once per CTA by its producer thread after its last next_tile.
__device__ __forceinline__ void sched_done(const Args& a) {
  __threadfence();  // this CTA's counter fetches happen before its "finished" count
  if (atomicAdd(&g_sched[a.slot][1], 1) == (int)gridDim.x - 1) {
    atomicExch(&g_sched[a.slot][0], 0);
    atomicExch(&g_sched[a.slot][1], 0);
  }
}

// One work tile: 128 query rows of one head of one sequence, and the K/V tiles it visits.
struct Tile {
  int m0, h, b, hkv;
  int sq, sk, diag;          // this sequence's query rows, effective key length, bottom-right offset
  int n_min, n_max, n_cnt;   // K/V tiles n_min..n_max-1 hold every key some row may see
  int q_row0, q_coord, k_coord, tb;  // TMA coordinates (varlen: packed rows, batch 0)
};

// Tile `idx` of the persistent schedule. The (batch, head) pairs (head fastest: GQA neighbours
// read the same K/V) are cut into sections of a.sec pairs; inside a section the longest causal
// tiles come first (m_block descending), then the pairs. a.sec = all pairs is one section (the
// order measured in run 061800); smaller sections keep the K/V that the resident CTAs read inside
// the L2 (the default since v5; KSEEK_FA3_ORDER=flat gives one section; NOTES v4, v5).
// Returns false when the tile starts past its sequence's last query row (varlen).
template <int BN>
__device__ __forceinline__ bool tile_at(const Args& a, int idx, Tile& ti) {
  const int hb_all = a.heads * a.batch;
  const int per = a.sec * a.m_blocks;           // tiles in a full section
  const int sec = idx / per;
  const int first = sec * a.sec;                // first pair of this section
  const int n = min(a.sec, hb_all - first);     // pairs in this section (the last may be short)
  const int r0 = idx - sec * per;
  const int m_block = a.m_blocks - 1 - r0 / n;
  const int r = first + (r0 - (r0 / n) * n);
  ti.h = r % a.heads;
  ti.b = r / a.heads;
  ti.hkv = ti.h / a.group;
  ti.m0 = m_block * kBM;
  // this sequence: query rows, key range (same rules as naive::naive_fwd_kernel)
  int sq = a.sq, cap = a.sk, q_row0 = 0, k_row0 = 0;
  if (a.cu_q) {
    q_row0 = a.cu_q[ti.b];
    sq = a.cu_q[ti.b + 1] - q_row0;
    k_row0 = a.cu_k[ti.b];
    cap = a.cu_k[ti.b + 1] - k_row0;
  }
  if (ti.m0 >= sq) return false;
  const int kend = a.seqused ? a.seqused[ti.b] : cap;
  const int lp = a.leftpad ? a.leftpad[ti.b] : 0;
  ti.sq = sq;
  ti.sk = max(0, kend - lp);  // effective key length Sk_b; key j' is stored row lp + j'
  ti.diag = ti.sk - sq;       // key position of query row 0 (bottom-right alignment)
  const int row_last = min(ti.m0 + kBM, sq) - 1;
  int lo = 0, hi = ti.sk - 1;
  if (a.wl >= 0) lo = max(lo, ti.m0 + ti.diag - a.wl);
  if (a.wr >= 0) hi = min(hi, row_last + ti.diag + a.wr);
  ti.n_min = hi >= lo ? lo / BN : 0;
  ti.n_max = hi >= lo ? hi / BN + 1 : 0;
  ti.n_cnt = ti.n_max - ti.n_min;
  ti.q_row0 = q_row0;
  ti.q_coord = q_row0 + ti.m0;
  ti.k_coord = k_row0 + lp;
  ti.tb = a.cu_q ? 0 : ti.b;
  return true;
}

// Tensor-map coordinates of (column, row, head, batch) in the map's dimension order.
__device__ __forceinline__ void tma_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                         int col, int row, int head, int batch, int swap) {
  if (swap) tma_load_4d(dst, map, bar, col, head, row, batch);
  else tma_load_4d(dst, map, bar, col, row, head, batch);
}

// VAR selects the consumer schedule: 0 = serial (v2: S, softmax, P V, one after the other),
// 1 = intra-warpgroup overlap (S of the next tile and P V of this one in flight together),
// 2 = 1 + ping-pong between the two consumer warpgroups (named barriers 3 and 4 hand the tensor
// cores over: one warpgroup issues its GEMMs while the other runs its softmax).
template <typename T, int D, int DV, int BN, int VAR, bool DYN>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap to,
               const __grid_constant__ Args a) {
  constexpr bool F16 = std::is_same<T, __half>::value;
  constexpr int NS = BN / 2;  // S accumulator floats per thread
  using L = Smem<D, DV, BN>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::kQ, sK = base + L::kK, sV = base + L::kV;
  // Q buffer of the qi-th Q load (qi counts them over the CTA's tiles), its barriers, tile index
  // slot and the phase of its barriers (the (qi / kQBuf)-th use of that buffer).
  auto qbuf = [&](int qi) { return L::kQBuf == 2 ? (qi & 1) : 0; };
  auto qphase = [&](int qi) { return (uint32_t)((L::kQBuf == 2 ? qi >> 1 : qi) & 1); };
  auto bar_q = [&](int b) { return base + (b ? L::kBarQ2 : L::kBarQ); };
  auto bar_qe = [&](int b) { return base + (b ? L::kBarQE2 : L::kBarQE); };
  auto tile_slot = [&](int b) { return base + (b ? L::kTileIdx2 : L::kTileIdx); };

  if (threadIdx.x == 0) {
#pragma unroll
    for (int b = 0; b < L::kQBuf; ++b) {
      mbar_init(bar_q(b), 1);
      mbar_init(bar_qe(b), kConsumerWarps);
    }
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(base + L::kBarKF + 8 * s, 1);
      mbar_init(base + L::kBarVF + 8 * s, 1);
      mbar_init(base + L::kBarKE + 8 * s, kConsumerWarps);
      mbar_init(base + L::kBarVE + 8 * s, kConsumerWarps);
    }
    fence_mbar_init();
  }
  __syncthreads();  // the last CTA-wide barrier: the roles below never meet again

  // Persistent: this CTA runs tiles blockIdx.x, blockIdx.x + gridDim.x, ... Producer and consumers
  // walk the same sequence; `kv` counts K/V tiles over all of them (ring stage kv % 2, phase
  // (kv / 2) % 2) and `qi` the Q loads (Q buffer phase qi % 2), so the producer loads the next
  // tile's Q and K/V while the consumers finish the current one.
  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    // ------------------------------------------------------------------ producer warpgroup
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_tmap(&tq);
      prefetch_tmap(&tk);
      prefetch_tmap(&tv);
      int kv = 0, qi = 0;
      for (int idx = blockIdx.x;;) {
        Tile ti;
        if constexpr (DYN) {
          const bool more = idx < a.tiles;
          if (more && !tile_at<BN>(a, idx, ti)) {  // varlen: starts past its sequence's end
            idx = next_tile(a);
            continue;
          }
          // the consumers are done with this buffer's previous Q (and index)
          mbar_wait(bar_qe(qbuf(qi)), qphase(qi) ^ 1);
          st_shared_s32(tile_slot(qbuf(qi)), more ? idx : -1);
          if (!more || ti.n_cnt == 0) {
            mbar_arrive(bar_q(qbuf(qi)));  // no Q to load: the index alone (-1 ends the consumers' loop)
            if (!more) break;
            ++qi;
            idx = next_tile(a);
            continue;
          }
        } else {  // static: tiles blockIdx.x, + gridDim.x, ...; the consumers walk the same list
          if (idx >= a.tiles) break;
          if (!tile_at<BN>(a, idx, ti) || ti.n_cnt == 0) {
            idx += gridDim.x;
            continue;
          }
          mbar_wait(bar_qe(qbuf(qi)), qphase(qi) ^ 1);  // the consumers are done with this buffer
        }
        {
          const int qb = qbuf(qi);
          mbar_arrive_expect_tx(bar_q(qb), L::kQBytes);
#pragma unroll
          for (int c = 0; c < pad64(D) / 64; ++c)
            tma_tile(sQ + qb * L::kQBytes + c * kBM * 128, &tq, bar_q(qb), 64 * c, ti.q_coord, ti.h, ti.tb,
                     a.q_swap);
        }
        ++qi;
        for (int it = 0; it < ti.n_cnt; ++it, ++kv) {
          const int n_block = ti.n_max - 1 - it;
          const int stage = kv & 1;
          const uint32_t ph = (kv >> 1) & 1;
          const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
          mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
          mbar_arrive_expect_tx(kf, L::kKBytes);
#pragma unroll
          for (int c = 0; c < pad64(D) / 64; ++c)
            tma_tile(sK + stage * L::kKBytes + c * BN * 128, &tk, kf, 64 * c, ti.k_coord + n_block * BN,
                     ti.hkv, ti.tb, a.k_swap);
          mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
          mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
          for (int c = 0; c < pad64(DV) / 64; ++c)
            tma_tile(sV + stage * L::kVBytes + c * BN * 128, &tv, vf, 64 * c, ti.k_coord + n_block * BN,
                     ti.hkv, ti.tb, a.v_swap);
        }
        if constexpr (DYN) idx = next_tile(a);
        else idx += gridDim.x;
      }
      if constexpr (DYN) sched_done(a);
    }
  } else {
    // ------------------------------------------------------------------ consumer warpgroups
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1;                 // rows 64cw..64cw+63 of the Q tile
    const int t = threadIdx.x & 127;
    const int lane = t & 31;
    // Ping-pong (VAR 2): a warpgroup takes its turn (bar.sync on barrier 3 + cw, 256 threads)
    // before issuing GEMMs and hands it over (bar.arrive on the other's barrier) after issuing.
    // Both warpgroups take the same turns (same tiles, same K/V tiles); warpgroup 1 hands over
    // once before the first turn (warpgroup 0 starts) and warpgroup 0 takes one extra turn after
    // the last tile, so no arrival is left pending when the CTA exits.
    auto take_turn = [&]() {
      if constexpr (VAR == 2) named_bar_sync(3 + cw, 256);
    };
    auto pass_turn = [&]() {
      if constexpr (VAR == 2) named_bar_arrive(3 + (cw ^ 1), 256);
    };
    if constexpr (VAR == 2) {
      if (cw == 1) named_bar_arrive(3, 256);
    }
    int kv = 0, qi = 0;
    for (int idx = blockIdx.x;;) {
      if constexpr (DYN) {
        mbar_wait(bar_q(qbuf(qi)), qphase(qi));  // the next tile's index (and its Q, when it has keys)
        idx = __shfl_sync(0xffffffffu, ld_shared_s32(tile_slot(qbuf(qi))), 0);  // (all lanes read the same)
        if (idx < 0) break;
      } else if (idx >= a.tiles) {
        break;
      }
      Tile ti;
      if (!tile_at<BN>(a, idx, ti)) {  // static only (the dynamic producer never hands these out)
        idx += gridDim.x;
        continue;
      }
      const int m0 = ti.m0, sq = ti.sq, sk = ti.sk, diag = ti.diag;
      const int n_max = ti.n_max, n_cnt = ti.n_cnt, h = ti.h, b = ti.b, q_row0 = ti.q_row0;
      const int row0 = m0 + 64 * cw + acc_row(t, 0);  // query row of elements i%4 in {0,1}; +8 for {2,3}

      // visible keys of this thread's two rows: klo[r] <= j' <= khi[r]
      int klo[2], khi[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        khi[r] = sk - 1;
        if (a.wr >= 0) khi[r] = min(khi[r], row + diag + a.wr);
        klo[r] = a.wl >= 0 ? row + diag - a.wl : 0;
      }

      float o[DV / 2];
#pragma unroll
      for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
      float m_run[2] = {-INFINITY, -INFINITY};  // running max of the score (raw or capped) per row
      float l_run[2] = {0.f, 0.f};              // this thread's partial sum of exp, per row

      const int qb = qbuf(qi);                  // this tile's Q buffer
      const uint32_t sQw = sQ + qb * L::kQBytes + cw * 64 * 128;  // this warpgroup's 64 rows (8 swizzle atoms)
      float s[NS];                              // S tile (64 x BN over the warpgroup), then P in fp32
      uint32_t pa[NS / 8][4];                   // P as wgmma A fragments (bf16/fp16)
      float corr[2];                            // rescale of O and l for the tile just scored

      // S = Q K^T of tile `it` into s: wait for K, issue, commit (one wgmma group); not waited here.
      auto issue_s = [&](int it) {
        const int g = kv + it;  // position in the K/V ring over all tiles of this CTA
        mbar_wait(base + L::kBarKF + 8 * (g & 1), (g >> 1) & 1);
        const uint32_t kst = sK + (g & 1) * L::kKBytes;
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks)
          wgmma_s<F16>(s, desc_kmajor(sQw, kBM, ks), desc_kmajor(kst, BN, ks), ks > 0 ? 1 : 0);
        wgmma_commit();
      };
      // After S of tile `it` has landed: free its K stage.
      auto release_k = [&](int it) {
        fence_regs(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(base + L::kBarKE + 8 * ((kv + it) & 1));
      };
      // Softcap, masks, online softmax of s (tile `it`): s becomes P in fp32, m_run/l_run advance,
      // corr = the factor O must be multiplied by before P V of this tile is added.
      auto softmax = [&](int it) {
        const int n0 = (n_max - 1 - it) * BN;
        if (a.softcap_on) {  // before masking: garbage/NaN keys past the end are overwritten below
#pragma unroll
          for (int i = 0; i < NS; ++i) s[i] = a.cap_out * tanh_approx(s[i] * a.cap_in);
        }
        // mask: keys past Sk_b, right window (causal), left window; only tiles that need it
        if (n0 + BN > sk || (a.wr >= 0 && n0 + BN - 1 > m0 + diag + a.wr) ||
            (a.wl >= 0 && n0 < m0 + kBM - 1 + diag - a.wl)) {
#pragma unroll
          for (int i = 0; i < NS; ++i) {
            const int col = n0 + acc_col(t, i);
            const int r = (i >> 1) & 1;
            if (col > khi[r] || col < klo[r]) s[i] = -INFINITY;
          }
        }
        // rows r0 = elements {0,1} mod 4, r1 = {2,3} mod 4
        float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
        for (int j = 0; j < NS / 4; ++j) {
          mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
          mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
        }
        float sub[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad share a row
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          sub[r] = mx[r] == -INFINITY ? 0.f : mx[r] * a.scale_log2;  // all masked so far: exp2(-inf)=0
          // max unchanged: exactly 1 (lets rescale_o skip); m_run = -inf: 0 (o, l are 0)
          corr[r] = mx[r] == m_run[r] ? 1.f : ex2(m_run[r] * a.scale_log2 - sub[r]);
          m_run[r] = mx[r];
          l_run[r] *= corr[r];
        }
#pragma unroll
        for (int j = 0; j < NS / 4; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e >> 1;
            s[4 * j + e] = ex2(fmaf(s[4 * j + e], a.scale_log2, -sub[r]));
            l_run[r] += s[4 * j + e];
          }
        }
      };
      // Skipped when no row of the warp changed its max (corr exactly 1): on long rows most
      // tiles, 64-128 FMULs per thread each. The vote is warp-uniform, so is the branch. Not for
      // Dv = 64: there the vote and branch cost more than the 32 FMULs (hd64 -6%, NOTES v5c/v6).
      auto rescale_o = [&]() {
#ifndef FA3_NO_RESCALE_SKIP  // A/B build hook (probe only)
        if constexpr (DV > 64)
          if (__all_sync(0xffffffffu, corr[0] == 1.f && corr[1] == 1.f)) return;
#endif
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          o[4 * j] *= corr[0];
          o[4 * j + 1] *= corr[0];
          o[4 * j + 2] *= corr[1];
          o[4 * j + 3] *= corr[1];
        }
      };
      // O += P V of tile `it` (P in pa): wait for V, zero untrusted V rows, issue, commit.
      auto issue_pv = [&](int it) {
        const int n0 = (n_max - 1 - it) * BN;
        const int g = kv + it;
        const uint32_t vst = sV + (g & 1) * L::kVBytes;
        mbar_wait(base + L::kBarVF + 8 * (g & 1), (g >> 1) & 1);
        if (a.vzero && n0 + BN > sk) {
          // V rows of keys >= Sk_b were loaded from memory we must not trust (next sequence, unused
          // cache slots: possibly NaN/Inf, and 0 * NaN = NaN in the wgmma). Zero them in shared
          // memory; whole 128-byte rows, so the swizzle does not matter. Both consumer warpgroups
          // write the same zeros (benign); each fences and syncs its own 128 threads before its wgmma.
          const int zr = max(0, sk - n0);
          const int units = (BN - zr) * 8;  // 16-byte units per 64-column chunk
#pragma unroll
          for (int c = 0; c < pad64(DV) / 64; ++c)
            for (int u = t; u < units; u += 128)
              st_shared_zero16(vst + (uint32_t)(c * BN * 128 + zr * 128 + u * 16));
          fence_proxy_async_smem();
          named_bar_sync(1 + cw, 128);
        }
        fence_regs(o);   // the rescale of o and the packing of pa happen before wgmma.fence
        fence_regs(pa);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BN / 16; ++ks) pv_step<F16, DV, BN>(o, pa[ks], vst, ks);
        wgmma_commit();
      };
      auto release_v = [&](int it) {
        fence_regs(o);
        __syncwarp();
        if (lane == 0) mbar_arrive(base + L::kBarVE + 8 * ((kv + it) & 1));
      };

      // The Q buffer is free once the last S of this tile has landed (before the last P V).
      auto release_q = [&]() {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar_qe(qb));
      };
      if constexpr (DYN) {
        if (n_cnt == 0) release_q();  // no keys: O = 0, LSE = -inf below
      }
      if (n_cnt > 0) {
        if constexpr (!DYN) mbar_wait(bar_q(qb), qphase(qi));
        if constexpr (VAR >= 1) {
          // Intra-warpgroup overlap (FlashAttention-3): S of tile it+1 and P V of tile it are in
          // flight together; the softmax of tile it+1 runs on the CUDA cores while P V of tile it
          // runs on the tensor cores. O is rescaled once P V of tile it has landed.
          take_turn();
          issue_s(0);
          pass_turn();
          wgmma_wait<0>();
          release_k(0);
          softmax(0);  // o = 0: no rescale
          acc_to_a<F16>(s, pa);
          for (int it = 1; it < n_cnt; ++it) {
            take_turn();
            issue_s(it);
            issue_pv(it - 1);
            pass_turn();
            wgmma_wait<1>();  // S of tile it (the older group) has landed; P V may still run
            release_k(it);
            softmax(it);
            wgmma_wait<0>();
            fence_regs(pa);   // pa was read by the P V wgmma until here: keep it from being reused
            release_v(it - 1);
            rescale_o();
            acc_to_a<F16>(s, pa);
          }
          release_q();
          take_turn();
          issue_pv(n_cnt - 1);
          pass_turn();
          wgmma_wait<0>();
          release_v(n_cnt - 1);
        } else {
          for (int it = 0; it < n_cnt; ++it) {
            issue_s(it);
            wgmma_wait<0>();
            release_k(it);
            if (it == n_cnt - 1) release_q();
            softmax(it);
            rescale_o();
            acc_to_a<F16>(s, pa);
            issue_pv(it);
            wgmma_wait<0>();
            release_v(it);
          }
        }
      }

      if (DYN || n_cnt > 0) {
        ++qi;
        kv += n_cnt;
      }

      // ---- epilogue: O / l, LSE; sinks join the denominator; rows without keys: 0 and -inf ----
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
      }
      T* obase = (T*)a.o + (a.cu_q ? (int64_t)q_row0 * a.o_rs : (int64_t)b * a.o_bs) + (int64_t)h * a.o_hs;
      float* lbase = a.lse ? a.lse + (a.cu_q ? (int64_t)q_row0 : (int64_t)b * a.lse_bs) + (int64_t)h * a.lse_hs
                           : nullptr;
      const float sink = a.sinks ? a.sinks[h] : 0.f;
      float inv[2] = {0.f, 0.f};  // 1 / denominator per row; 0 for rows without keys (and past Sq)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row < sq) {
          float lse = -INFINITY;
          if (l_run[r] > 0.f) {  // at least one visible key (its exp is 1)
            const float m_nat = m_run[r] * a.lse_mul;  // running max in natural-log units
            if (a.sinks) {
              const float mn = fmaxf(m_nat, sink);
              const float e = expf(m_nat - mn);
              const float den = l_run[r] * e + expf(sink - mn);
              inv[r] = e / den;
              lse = mn + logf(den);
            } else {
              inv[r] = 1.f / l_run[r];
              lse = m_nat + logf(l_run[r]);
            }
          }
          if (lbase && (t & 3) == 0) lbase[row] = lse;
        }
      }
      bool o_done = false;
      if constexpr (L::kOStage) {
        // O through shared memory and one TMA store per 64-column chunk (dense layouts only: a
        // varlen tile's rows past its sequence belong to the next one, and the box would write
        // them). Rows past Sq and columns past Dv fall outside the map and are not written.
        if (a.o_tma) {
          if (t == 0) bulk_wait_read();  // this warpgroup's previous store has left shared memory
          named_bar_sync(1 + cw, 128);
          const int rl0 = acc_row(t, 0);  // row within this warpgroup's 64
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int rl = rl0 + 8 * r;
#pragma unroll
            for (int j = 0; j < DV / 8; ++j) {
              const uint32_t addr = base + L::kO + (uint32_t)((2 * (j >> 3) + cw) * 8192 + rl * 128 +
                                                              (((j & 7) ^ (rl & 7)) << 4) + 4 * (t & 3));
              st_shared_u32(addr, pack2<F16>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]));
            }
          }
          fence_proxy_async_smem();
          named_bar_sync(1 + cw, 128);
          if (t == 0) {
#pragma unroll
            for (int c = 0; c < pad64(DV) / 64; ++c) {
              const uint32_t src = base + L::kO + (uint32_t)((2 * c + cw) * 8192);
              const int row = ti.q_coord + 64 * cw;
              if (a.o_swap) tma_store_4d(&to, src, 64 * c, h, row, ti.tb);
              else tma_store_4d(&to, src, 64 * c, row, h, ti.tb);
            }
            bulk_commit();
          }
          o_done = true;
        }
      }
      if (!o_done) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row0 + 8 * r;
          if (row < sq) {
            T* orow = obase + (int64_t)row * a.o_rs + 2 * (t & 3);
#pragma unroll
            for (int j = 0; j < DV / 8; ++j)
              if (8 * j < a.dv)  // (a.dv == DV on every instantiation; kept as a guard)
                *reinterpret_cast<uint32_t*>(orow + 8 * j) =
                    pack2<F16>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
          }
        }
      }
      if constexpr (!DYN) idx += gridDim.x;
    }  // tiles
    if constexpr (L::kOStage) {
      if (a.o_tma && t == 0) bulk_wait();  // the last O store has completed
    }
    if constexpr (VAR == 2) {
      if (cw == 0) named_bar_sync(3, 256);  // absorb warpgroup 1's last hand-over
    }
  }
}

}  // namespace fa3
// =================================================================================================
// Part 4: host side -- tensor maps, the fast-path test, dispatch
// =================================================================================================
namespace fa3 {

typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                  const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                  const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point (cudart resolves it inside
// libcuda, which the runtime has loaded anyway): no -lcuda, no dlopen/dlsym in this library.
inline EncodeTiledFn encode_fn() {
  static EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return nullptr;
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// Set by kseek_fwd: 1 = the last call launched the fast kernel, 0 = the fallback (probe/tests).
inline int g_last_path = -1;

// Tensor map of a [B, S, H, Dtot] 16-bit tensor (strides in elements; the last dim contiguous)
// whose box is 64 columns x `rows` rows of one head and batch: dims {Dtot, S, H, B}, or, when the
// driver refuses that order, {Dtot, H, S, B} (*swap = 1). A stride of a size-1 dim never
// multiplies a nonzero coordinate, so it is replaced by a harmless valid one. Returns false when
// the driver refuses both (the caller falls back).
inline bool make_map(CUtensorMap* map, bool f16, const void* ptr, int64_t dtot, int64_t s,
                     int64_t h, int64_t bsz, int64_t rs, int64_t hs, int64_t bs, int rows,
                     int* swap) {
  EncodeTiledFn enc = encode_fn();
  if (!enc) return false;
  const int64_t big = ((dtot * s * h * bsz + 7) / 8) * 8;  // a valid, 16-byte-multiple stride
  if (s == 1) rs = big;
  if (h == 1) hs = big;
  if (bsz == 1) bs = big;
  if (rs <= 0 || hs <= 0 || bs <= 0 || rs % 8 || hs % 8 || bs % 8) return false;
  if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return false;
  const CUtensorMapDataType dt = f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  for (int order = 0; order < 2; ++order) {
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4];
    dims[0] = (cuuint64_t)dtot;
    dims[3] = (cuuint64_t)bsz;
    strides[2] = (cuuint64_t)(bs * 2);
    box[0] = 64;
    box[3] = 1;
    if (order == 0) {
      dims[1] = (cuuint64_t)s; dims[2] = (cuuint64_t)h;
      strides[0] = (cuuint64_t)(rs * 2); strides[1] = (cuuint64_t)(hs * 2);
      box[1] = (cuuint32_t)rows; box[2] = 1;
    } else {
      dims[1] = (cuuint64_t)h; dims[2] = (cuuint64_t)s;
      strides[0] = (cuuint64_t)(hs * 2); strides[1] = (cuuint64_t)(rs * 2);
      box[1] = 1; box[2] = (cuuint32_t)rows;
    }
    const CUresult r = enc(map, dt, 4, const_cast<void*>(ptr), dims, strides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS) {
      *swap = order;
      return true;
    }
  }
  return false;
}

inline bool device_is_sm90() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  static int cache[64] = {0};  // 0 unknown, 1 yes, 2 no
  if (dev >= 0 && dev < 64 && cache[dev]) return cache[dev] == 1;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  const bool ok = major == 9 && minor == 0;
  if (dev >= 0 && dev < 64) cache[dev] = ok ? 1 : 2;
  return ok;
}

inline bool force_fallback() {
  static const bool f = [] {
    const char* e = getenv("KSEEK_FA3_FORCE_FALLBACK");
    return e && e[0] && e[0] != '0';
  }();
  return f;
}

// Does the fast kernel cover this call? (Inputs already validated by kseek_fwd.)
inline bool shape_ok(int d, int dv) {
  if (d == dv) return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
  return d == 192 && dv == 128;
}

inline bool fast_ok(const kseek_params* p) {
  if (force_fallback()) return false;
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return false;
  if (p->out_dtype != p->dtype) return false;
  if (!shape_ok(p->head_dim, p->head_dim_v)) return false;
  if (p->page_table) return false;
  if ((p->cu_seqlens_q == nullptr) != (p->cu_seqlens_k == nullptr)) return false;  // half varlen
  if (!isfinite(p->softcap)) return false;
  if (!(p->scale > 0.f) || !isfinite(p->scale)) return false;
  if (p->softcap > 0.f && !isfinite(p->scale / p->softcap)) return false;
  if (p->seqlen_k <= 0 || p->seqlen_q <= 0) return false;
  if (p->seqlen_q >= (1 << 28) || p->seqlen_k >= (1 << 28)) return false;  // int math in the kernel
  // o is written two elements (4 bytes) at a time
  if ((reinterpret_cast<uintptr_t>(p->o) & 3) != 0) return false;
  if ((p->o_row_stride | p->o_head_stride) & 1) return false;
  if (!p->cu_seqlens_q && (p->o_batch_stride & 1)) return false;
  return device_is_sm90();
}

// Varlen: the tensor maps need the packed row counts total_q = cu_seqlens_q[B] and
// total_k = cu_seqlens_k[B], which live in device memory. A map whose row extent is larger than
// the allocation (e.g. the bound B * seqlen) would let TMA read past the allocation (TMA only
// zero-fills past the MAP's extent), so it is not safe; we read the two totals instead:
// two 4-byte cudaMemcpyAsync on `stream` + cudaStreamSynchronize(stream). HOST COST: the call
// blocks until all earlier work on the stream has finished (~10-30 us plus that wait), and it
// cannot run under CUDA-graph capture (checked: a capturing stream takes the fallback).
// Better (v3): patch the row extent on device with tensormap.replace (no sync).
inline bool varlen_totals(const kseek_params* p, cudaStream_t stream, int64_t* tq, int64_t* tk) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (st != cudaStreamCaptureStatusNone) return false;
  int32_t v[2] = {0, 0};
  if (cudaMemcpyAsync(&v[0], p->cu_seqlens_q + p->batch, sizeof(int32_t), cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess ||
      cudaMemcpyAsync(&v[1], p->cu_seqlens_k + p->batch, sizeof(int32_t), cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *tq = v[0];
  *tk = v[1];
  // < 2^28: per-sequence lengths (<= totals) keep the kernel's int math row + diag + window in range
  return v[0] > 0 && v[1] > 0 && v[0] < (1 << 28) && v[1] < (1 << 28);
}

// Window bounds for the kernel: causal = right window 0; any negative = unbounded; a window of
// 2^29 or more covers every key of sequences shorter than 2^28 (so it is unbounded too, and the
// kernel's int arithmetic row + diag +- w cannot overflow).
inline int clamp_window(int w) { return (w < 0 || w >= (1 << 29)) ? -1 : w; }

// Streaming multiprocessors of the current device (cached per device; 0 on error).
inline int sm_count() {
  static int cache[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (dev >= 0 && dev < 64 && cache[dev]) return cache[dev];
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev >= 0 && dev < 64) cache[dev] = n;
  return n;
}

// The Args fields shared by the bf16/fp16 (Part 3) and fp8 (Part F) launches: outputs, sequence
// metadata, window, softcap and the softmax multipliers (scores kept in log2 units).
inline void fill_args(const kseek_params* p, bool varlen, Args& a) {
  a.o = p->o;
  a.lse = p->lse;
  a.o_bs = p->o_batch_stride;
  a.o_rs = p->o_row_stride;
  a.o_hs = p->o_head_stride;
  a.lse_bs = p->lse_batch_stride;
  a.lse_hs = p->lse_head_stride;
  a.cu_q = p->cu_seqlens_q;
  a.cu_k = p->cu_seqlens_k;
  a.seqused = p->seqused_k;
  a.leftpad = p->leftpad_k;
  a.sinks = p->sinks;
  a.sq = p->seqlen_q;
  a.sk = p->seqlen_k;
  a.group = p->heads_q / p->heads_kv;
  a.wl = clamp_window(p->window_left);
  a.wr = p->causal ? 0 : clamp_window(p->window_right);
  a.dv = p->head_dim_v;
  // Keys past a sequence's end inside the map are real memory (next sequence, unused cache slots,
  // keys of leftpad'ed tails) that may hold NaN/Inf: zero those V rows in shared memory. Without
  // varlen/seqused/leftpad, rows past Sk are outside the map and TMA zero-fills them.
  a.vzero = (varlen || p->seqused_k || p->leftpad_k) ? 1 : 0;
  const float kLog2e = 1.4426950408889634f;
  if (p->softcap > 0.f) {
    a.softcap_on = 1;
    a.cap_in = p->scale / p->softcap;
    a.cap_out = p->softcap * kLog2e;  // capped scores are kept in log2 units
    a.scale_log2 = 1.f;
    a.lse_mul = 0.6931471805599453f;
  } else {
    a.softcap_on = 0;
    a.cap_in = a.cap_out = 0.f;
    a.scale_log2 = p->scale * kLog2e;
    a.lse_mul = p->scale;
  }
}

// (batch, head) pairs per section of the persistent tile order (tile_at): sections whose K/V
// (keys x (D + Dv) x 2 bytes per KV head) fit in KSEEK_FA3_SECTION_MB (default 16) of the 50 MB
// L2, whole GQA groups each. KSEEK_FA3_ORDER=flat: one section (query tile outermost over all
// pairs, v3/v4's default) for A/B runs.
inline int section_pairs(const kseek_params* p, int d, int dv) {
  const int all = p->heads_q * p->batch;
  const char* e = getenv("KSEEK_FA3_ORDER");
  if (e && strcmp(e, "flat") == 0) return all;
  const int group = p->heads_q / p->heads_kv;
  const double kv_bytes = (double)p->seqlen_k * (d + dv) * 2.0;  // one KV head of one sequence
  const char* mb = getenv("KSEEK_FA3_SECTION_MB");
  const double mbv = mb ? atof(mb) : 16.0;
  const double budget = (mbv > 0.0 ? mbv : 16.0) * (1 << 20);
  int kv_heads = (int)(budget / (kv_bytes > 1.0 ? kv_bytes : 1.0));
  if (kv_heads < 1) kv_heads = 1;
  const double pairs = (double)kv_heads * group;
  return pairs >= all ? all : (int)pairs;
}

// The consumer schedule (fwd_kernel's VAR): 2 (measured fastest on every probe shape, NOTES v3);
// KSEEK_FA3_VARIANT=0/1/2 overrides it for A/B runs.
inline int variant() {
  const char* e = getenv("KSEEK_FA3_VARIANT");
  return (e && e[0] >= '0' && e[0] <= '2' && !e[1]) ? e[0] - '0' : 2;
}

// The tile schedule (fwd_kernel's DYN). Dynamic (a global tile counter) where tile costs differ --
// causal or windowed attention -- and the head dim is above 64: there it beat the static
// round-robin by 5-12% (NOTES v5). Static otherwise: equal tiles need no balancing, and the
// dynamic kernel's tile loop ends on a value read from shared memory, which ptxas cannot prove
// warp-uniform, so its K/V loop computes descriptors and barrier addresses per thread (+59
// instructions per iteration at hd128; 5-15% slower on non-causal and hd64 rows, NOTES v5).
// KSEEK_FA3_SCHED=static|dynamic overrides (VAR 2 only; VAR 0/1 are always static).
inline bool dynamic_schedule(const kseek_params* p) {
  const char* e = getenv("KSEEK_FA3_SCHED");
  if (e && strcmp(e, "static") == 0) return false;
  if (e && strcmp(e, "dynamic") == 0) return true;
  const bool ragged = p->causal || p->window_left >= 0 || p->window_right >= 0;
  return ragged && p->head_dim > 64;  // hd96 static: row 16 lost 17% (run 075315, as D=128)
}

// KSEEK_FA3_BN: keys per K/V tile for A/B runs (64: v4's tiles at hd192/256; 128 or 192 at hd64;
// 192 at hd96; 176 at hd128, FlashAttention-3's non-causal choice); unset = the default.
inline int bn_forced() {
  const char* e = getenv("KSEEK_FA3_BN");
  return e ? atoi(e) : 0;
}

// O through shared memory and a TMA store where the staging fits (v12); KSEEK_FA3_OSTORE=direct
// keeps the direct global stores everywhere, for A/B runs.
inline bool o_store_tma() {
  const char* e = getenv("KSEEK_FA3_OSTORE");
  return !(e && strcmp(e, "direct") == 0);
}

// Launch one instantiation (the >48 KB dynamic shared memory opt-in once per device).
template <typename T, int D, int DV, int BN, int VAR, bool DYN>
int start(const dim3& grid, cudaStream_t stream, const CUtensorMap& tq, const CUtensorMap& tk,
          const CUtensorMap& tv, const CUtensorMap& to, const Args& a) {
  constexpr int smem = Smem<D, DV, BN>::kTotal;
  static int attr_done[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  if (dev < 0 || dev >= 64 || !attr_done[dev]) {
    if (cudaFuncSetAttribute(fwd_kernel<T, D, DV, BN, VAR, DYN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    if (dev >= 0 && dev < 64) attr_done[dev] = 1;
  }
  fwd_kernel<T, D, DV, BN, VAR, DYN><<<grid, kThreads, smem, stream>>>(tq, tk, tv, to, a);
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return KSEEK_OK;
  // A launch-configuration error (e.g. not enough shared memory) leaves no sticky state: retry
  // on the fallback. Anything else is reported.
  if (e == cudaErrorInvalidConfiguration || e == cudaErrorInvalidValue ||
      e == cudaErrorNoKernelImageForDevice || e == cudaErrorLaunchOutOfResources)
    return -1;
  return KSEEK_ERR_CUDA;
}

template <typename T, int D, int DV, int BN>
int launch(const kseek_params* p, cudaStream_t stream, int64_t rows_q, int64_t rows_k) {
  constexpr bool F16 = std::is_same<T, __half>::value;
  CUtensorMap tq, tk, tv;
  Args a;
  const bool varlen = p->cu_seqlens_q != nullptr;
  const int64_t nb = varlen ? 1 : p->batch;  // varlen: one packed "batch" of total rows
  // (host cost: three cuTensorMapEncodeTiled calls per kseek_fwd, a few microseconds; cacheable)
  // The maps use the TRUE head dims (96: the second 64-column box is zero-filled past column 96).
  if (!make_map(&tq, F16, p->q, p->head_dim, rows_q, p->heads_q, nb, p->q_row_stride,
                p->q_head_stride, p->q_batch_stride, kBM, &a.q_swap) ||
      !make_map(&tk, F16, p->k, p->head_dim, rows_k, p->heads_kv, nb, p->k_row_stride,
                p->k_head_stride, p->k_batch_stride, BN, &a.k_swap) ||
      !make_map(&tv, F16, p->v, p->head_dim_v, rows_k, p->heads_kv, nb, p->v_row_stride,
                p->v_head_stride, p->v_batch_stride, BN, &a.v_swap))
    return -1;  // not for the fast path
  fill_args(p, varlen, a);
  // O's map (64-row boxes, one per consumer warpgroup): dense layouts where the staging fits
  CUtensorMap to;
  memset(&to, 0, sizeof(to));
  a.o_tma = 0;
  a.o_swap = 0;
  if (Smem<D, DV, BN>::kOStage && !varlen && o_store_tma())
    a.o_tma = make_map(&to, F16, p->o, p->head_dim_v, rows_q, p->heads_q, nb, p->o_row_stride,
                       p->o_head_stride, p->o_batch_stride, 64, &a.o_swap) ? 1 : 0;

  a.heads = p->heads_q;
  a.batch = p->batch;
  a.m_blocks = (p->seqlen_q + kBM - 1) / kBM;
  const int64_t tiles = (int64_t)a.m_blocks * p->heads_q * p->batch;
  if (tiles <= 0 || tiles >= (int64_t)1 << 31) return -1;
  a.tiles = (int)tiles;
  a.sec = section_pairs(p, D, DV);
  static std::atomic<unsigned> launches{0};  // rotates the scheduler's counter slots
  a.slot = (int)(launches.fetch_add(1, std::memory_order_relaxed) % kSchedSlots);
  const int sms = sm_count();
  if (sms <= 0) return -1;
  const dim3 grid((unsigned)(tiles < sms ? tiles : sms));  // persistent: one CTA per SM at most
  const int var = variant();
  if (var == 2 && dynamic_schedule(p)) return start<T, D, DV, BN, 2, true>(grid, stream, tq, tk, tv, to, a);
  if constexpr (BN != 64 && BN != 128) {
    return start<T, D, DV, BN, 2, false>(grid, stream, tq, tk, tv, to, a);  // wide tiles: VAR 2 only
  } else {
    switch (var) {
      case 0: return start<T, D, DV, BN, 0, false>(grid, stream, tq, tk, tv, to, a);
      case 1:  // not built for Dv = 256: it spills there (12 bytes since v5); runs VAR 2 instead
        if constexpr (DV < 256) return start<T, D, DV, BN, 1, false>(grid, stream, tq, tk, tv, to, a);
        [[fallthrough]];
      default: return start<T, D, DV, BN, 2, false>(grid, stream, tq, tk, tv, to, a);
    }
  }
}

template <typename T>
int dispatch(const kseek_params* p, cudaStream_t stream, int64_t rq, int64_t rk) {
  const int d = p->head_dim, dv = p->head_dim_v;
  const int bn = bn_forced();
  // hd64: 192-key tiles from 2k keys on (half the per-tile softmax bookkeeping per key; rows 2/3
  // -4%/-6% time, row 1 (1k causal) +10%: run 085537, NOTES v6).
  if (d == 64)
    return (bn ? bn == 192 : p->seqlen_k >= 2048) ? launch<T, 64, 64, 192>(p, stream, rq, rk)
                                                  : launch<T, 64, 64, 128>(p, stream, rq, rk);
  if (d == 96)  // 2 chunks, 6 k-steps (Smem); 192-key tiles as at hd64 (row 16 -3.3%, run 090222)
    return (bn ? bn == 192 : p->seqlen_k >= 2048) ? launch<T, 96, 96, 192>(p, stream, rq, rk)
                                                  : launch<T, 96, 96, 128>(p, stream, rq, rk);
  if (d == 128)
    return bn == 176 ? launch<T, 128, 128, 176>(p, stream, rq, rk) : launch<T, 128, 128, 128>(p, stream, rq, rk);
  if (d == 192 && dv == 128) return launch<T, 192, 128, 128>(p, stream, rq, rk);
  // Dv >= 192: 112 / 80 keys per K/V tile (FlashAttention-3's choice for these head dims: the
  // most that fits in shared memory with two stages), KSEEK_FA3_BN=64 for v4's 64 (A/B runs).
  const bool bn64 = bn == 64;
  if (d == 192) return bn64 ? launch<T, 192, 192, 64>(p, stream, rq, rk) : launch<T, 192, 192, 112>(p, stream, rq, rk);
  if (d == 256) return bn64 ? launch<T, 256, 256, 64>(p, stream, rq, rk) : launch<T, 256, 256, 80>(p, stream, rq, rk);
  return -1;
}

inline int fwd(const kseek_params* p, cudaStream_t stream) {
  if (!fast_ok(p)) return -1;
  int64_t rq = p->seqlen_q, rk = p->seqlen_k;
  if (p->cu_seqlens_q && !varlen_totals(p, stream, &rq, &rk)) return -1;
  return p->dtype == KSEEK_FP16 ? dispatch<__half>(p, stream, rq, rk)
                                : dispatch<__nv_bfloat16>(p, stream, rq, rk);
}

}  // namespace fa3

// =================================================================================================
// Part F: fp8 e4m3 fast path (q, k, v e4m3 with per (batch, KV head) descales, o bf16)
// =================================================================================================
// Self-contained: uses Parts 2 and 4 (mbarrier/TMA/wgmma helpers, acc_row/acc_col, pack2, ex2,
// tanh_approx, encode_fn, device_is_sm90, force_fallback, varlen_totals, clamp_window, shape_ok,
// Args) and changes none of them. Entry point: fa3::f8::fwd (called from kseek_fwd when fa3::fwd
// declined). Design notes: kernels/wip/README_fp8.md.
//
//   * Shared memory tiles of 1-byte elements: a tile of R rows x C bytes is C/CW chunks of R x CW
//     bytes (CW = 128: 128B swizzle, one swizzle atom = 8 rows x 128 B; CW = 64: 64B swizzle,
//     atom 8 rows x 64 B), chunk c at c*R*CW; 16-byte unit u of row r stored at unit
//     u ^ (r % 8) (CW = 128) or u ^ ((r / 2) % 4) (CW = 64): TMA's SWIZZLE_128B / SWIZZLE_64B on
//     a box of CW bytes, and the canonical K-major swizzled layout wgmma reads.
//   * S = Q K^T: wgmma m64n{BN}k32 .e4m3.e4m3 SS, Q and K K-major as loaded (rows = M / N, the
//     head dim = K). One k-step = 32 bytes of a row.
//   * O += P V: fp8 wgmma takes K-major B only, so V ([key][dv] as loaded) is transposed in shared
//     memory by the producer warpgroup (ldmatrix.trans + prmt + stmatrix) into Vt [dv][key slot],
//     one chunk of BN bytes per row (CW = BN), read by wgmma m64nNk32 RS with P (e4m3) in
//     registers. The key order inside each 32-key k-step of Vt is permuted (see vt_key) so that
//     the S accumulator converts to the fp8 A fragment without any shuffle.
//   * Descales: q_descale*k_descale folded into the softmax multipliers (per CTA), v_descale into
//     the epilogue.
namespace fa3 {
namespace f8 {

constexpr int kProducerBar = 3;  // named barrier of the producer warpgroup (1, 2: consumers)
// setmaxnreg targets: the producer warpgroup transposes V (all 128 threads), so it gets 40 registers
// instead of 24; the pool at launch is 168 x 384, so consumers get 232 (128*40 + 256*232 = 64512).
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;

// ---- layouts -----------------------------------------------------------------------------------
// Byte offset of (row, col) in a tile of `rows` rows stored in chunks of cw (64 or 128) bytes.
__host__ __device__ __forceinline__ uint32_t swz8(int row, int col, int rows, int cw) {
  const int chunk = col / cw;
  const int in = col & (cw - 1);
  const int x = cw == 128 ? (row & 7) : ((row >> 1) & 3);
  return (uint32_t)(chunk * rows * cw + row * cw + (((in >> 4) ^ x) << 4) + (in & 15));
}

// Key (0..31, relative to the k-step) whose value sits in slot `slot` of a 32-slot k-step of Vt,
// and, equally, the S column that the fp8 A fragment's element `slot` carries (acc_to_a8).
// Slots 4q..4q+3 of each 16-slot half hold keys 2q, 2q+1, 2q+8, 2q+9 of that half: exactly the
// S columns thread q of a quad owns in the f32 accumulator (cols 8j + 2q + {0,1}, j = 0, 1).
__host__ __device__ __forceinline__ int vt_key(int slot) {
  const int half = slot & 16, q = (slot >> 2) & 3, i = slot & 3;
  return half + 2 * q + (i & 1) + 8 * (i >> 1);
}

// ---- wgmma descriptors for 1-byte K-major operands (PTX ISA "Matrix Descriptor Format") --------
// start >> 4 in bits 0-13; LBO (unused for swizzled K-major: a k-step never leaves the swizzle
// row) = 16 B; SBO = 8 rows * cw (next 8-row group); base offset 0 (every chunk is 1024-aligned);
// bits 62-63: 1 = 128B swizzle, 2 = 64B swizzle.
__host__ __device__ __forceinline__ uint64_t desc8(uint32_t saddr, int cw) {
  uint64_t d = (uint64_t)((saddr & 0x3FFFF) >> 4);
  d |= (uint64_t)1 << 16;
  d |= (uint64_t)((8 * cw) >> 4) << 32;
  d |= (uint64_t)(cw == 128 ? 1 : 2) << 62;
  return d;
}
// k-step ks (bytes 32ks..32ks+31 of every row) of a K-major tile of `rows` rows in cw chunks.
// Inside a swizzle row the step is a plain +32 on the start address (the XOR uses address bits).
__host__ __device__ __forceinline__ uint64_t desc8_k(uint32_t tile, int rows, int ks, int cw) {
  const int kb = 32 * ks;
  return desc8(tile + (uint32_t)((kb / cw) * rows * cw + (kb % cw)), cw);
}

// ---- fp8 wgmma (m64nNk32, f32 += e4m3 * e4m3; fp8 has no transpose immediates) ----------------
#define F8_D8(o) "+f"(d[(o)]), "+f"(d[(o) + 1]), "+f"(d[(o) + 2]), "+f"(d[(o) + 3]), \
                 "+f"(d[(o) + 4]), "+f"(d[(o) + 5]), "+f"(d[(o) + 6]), "+f"(d[(o) + 7])
#define F8_D32(o) F8_D8(o), F8_D8((o) + 8), F8_D8((o) + 16), F8_D8((o) + 24)
#define F8_R32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21," \
               "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define F8_R64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21," \
               "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41," \
               "%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61," \
               "%62,%63}"

// SS: D[64 x 128] (+)= A[64 x 32] (desc) * B[32 x 128] (desc, K-major)
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " F8_R64 ", %64, %65, p, 1, 1;\n}\n"
               : F8_D32(0), F8_D32(32)
               : "l"(da), "l"(db), "r"(scale_d));
}
// SS: D[64 x 64] (+)= A[64 x 32] * B[32 x 64]
__device__ __forceinline__ void wgmma_ss(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " F8_R32 ", %32, %33, p, 1, 1;\n}\n"
               : F8_D32(0)
               : "l"(da), "l"(db), "r"(scale_d));
}
// RS: D[64 x 128] += A[64 x 32] (4 x b32 = 16 e4m3 per thread) * B[32 x 128] (desc, K-major)
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " F8_R64
               ", {%64,%65,%66,%67}, %68, 1, 1, 1;\n"
               : F8_D32(0), F8_D32(32)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// RS: D[64 x 64] += A[64 x 32] * B[32 x 64]
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " F8_R32
               ", {%32,%33,%34,%35}, %36, 1, 1, 1;\n"
               : F8_D32(0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
#undef F8_D8
#undef F8_D32
#undef F8_R32
#undef F8_R64

// ---- P (f32 accumulator) -> fp8 A fragments ----------------------------------------------------
// Four floats to one .b32 of four e4m3 (x0 in the low byte). cvt ... e4m3x2.f32 d, a, b puts a in
// the upper byte and b in the lower one. P is in [0, 1]: satfinite never clips it.
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
  return r;
}
// The fp8 A fragment of wgmma m64nNk32 (like mma.m16n8k32's per warp): a[0] = row r, k 4q..4q+3;
// a[1] = row r+8, k 4q..4q+3; a[2] = row r, k 16+4q..; a[3] = row r+8, k 16+4q.. (r = 16*warp +
// lane/4, q = lane%4, low byte = lowest k). With the slot -> key order of vt_key, k-step kk of a
// 64 x N S accumulator is its elements 16kk..16kk+15 in this order (no data leaves the thread).
template <int NS>
__device__ __forceinline__ void acc_to_a8(const float (&s)[NS], uint32_t (&a)[NS / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < NS / 16; ++kk) {
    const float* x = &s[16 * kk];
    a[kk][0] = pack_e4m3x4(x[0], x[1], x[4], x[5]);
    a[kk][1] = pack_e4m3x4(x[2], x[3], x[6], x[7]);
    a[kk][2] = pack_e4m3x4(x[8], x[9], x[12], x[13]);
    a[kk][3] = pack_e4m3x4(x[10], x[11], x[14], x[15]);
  }
}

// ---- V transpose in shared memory (producer warpgroup) -----------------------------------------
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                              uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void stsm_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
// A register from ldmatrix.trans holds keys k (bytes 0, 1) and k + 1 (bytes 2, 3); zero the
// bytes of keys >= zr (rows past the sequence's end: may be NaN, and 0 * NaN = NaN in the MMA).
__device__ __forceinline__ uint32_t mask_keys(uint32_t r, int k, int zr) {
  return k >= zr ? 0u : (k + 1 >= zr ? (r & 0xFFFFu) : r);
}

// One warp's share of transposing a raw V tile (BN keys x DV bytes, chunks of CW bytes) into Vt
// (DV rows x BN key slots, one chunk of BN bytes). Work unit: 32 keys x 16 dv.
//   ldmatrix.x4.trans, matrix m = keys 32g+8m..+7 x dv 16h..16h+15 (lane t gives the row of key
//     32g+t): lane (p = t/4, q = t%4) gets r_m = {V[k][2p], V[k][2p+1], V[k+1][2p], V[k+1][2p+1]}
//     (dv relative to 16h, k = 32g + 8m + 2q);
//   prmt: w0 = {r0.b0, r0.b2, r1.b0, r1.b2} = Vt[16h+2p][slots 32g+4q..+3] (keys 2q, 2q+1, 2q+8,
//     2q+9: vt_key), w1 = same for row 16h+2p+1 (bytes 1, 3), w2/w3 = the same from r2/r3 for
//     slots 32g+16+4q..;
//   stmatrix.x4 (no trans): matrix j's row p is Vt row 16h + 2p + ((j&1) ^ (p>=4)), slots
//     32g + 16(j>>1)..+15 (lane t supplies the address of row t%8 of matrix t/8). Rows p >= 4 take
//     the odd row in matrices 0/2 (the prmt selectors swap w0/w1 for lanes 16..31) so that the 8
//     rows of one matrix fall in 8 different 16-byte bank groups of the swizzled Vt (with rows
//     16h+2p only, rows p and p+4 would share a group: a 2-way bank conflict on every store).
// zr < BN: keys zr..BN-1 are written as zeros.
template <int DV, int BN, int CW>
__device__ __forceinline__ void transpose_v(uint32_t raw, uint32_t vt, int warp, int lane, int zr) {
  constexpr int HB = DV / 16;
  constexpr int NBLK = (BN / 32) * HB;
  static_assert(NBLK % 4 == 0, "blocks split evenly over the 4 producer warps");
  const int q2 = 2 * (lane & 3);
  const int srow = 2 * (lane & 7) + (((lane >> 3) & 1) ^ ((lane >> 2) & 1));  // stmatrix row in 16 dv rows
  const int sslot = 16 * (lane >> 4);                                        // stmatrix slot in 32 slots
  const uint32_t sel_e = lane < 16 ? 0x6420u : 0x7531u;  // register for matrices 0/2: even row (p < 4)
  const uint32_t sel_o = lane < 16 ? 0x7531u : 0x6420u;  // matrices 1/3: odd row (p < 4)
#pragma unroll 1  // the producer has 40 registers: keep one block's state live at a time
  for (int i = 0; i < NBLK / 4; ++i) {
    const int blk = warp + 4 * i;
    const int g = blk / HB, h = blk - g * HB;
    uint32_t r0, r1, r2, r3;
    ldsm_x4_trans(raw + swz8(32 * g + lane, 16 * h, BN, CW), r0, r1, r2, r3);
    if (zr < BN) {
      const int k = 32 * g + q2;
      r0 = mask_keys(r0, k, zr);
      r1 = mask_keys(r1, k + 8, zr);
      r2 = mask_keys(r2, k + 16, zr);
      r3 = mask_keys(r3, k + 24, zr);
    }
    stsm_x4(vt + swz8(16 * h + srow, 32 * g + sslot, DV, BN), prmt(r0, r1, sel_e), prmt(r0, r1, sel_o),
            prmt(r2, r3, sel_e), prmt(r2, r3, sel_o));
  }
}

// O (+)= P V for one 32-key k-step: N = 128 pieces over 128-row groups of Vt, plus an N = 64 piece
// (DV = 64, 192). O columns 128c.. are o[64c..64c+63] (acc_col: 8 columns per 4 elements).
template <int DV, int BN>
__device__ __forceinline__ void pv_step(float (&o)[DV / 2], const uint32_t (&pa)[4], uint32_t vt, int ks) {
  constexpr int NC = DV / 128;
#pragma unroll
  for (int c = 0; c < NC; ++c)
    wgmma_rs(*reinterpret_cast<float(*)[64]>(&o[64 * c]), pa, desc8(vt + (uint32_t)(c * 128 * BN + 32 * ks), BN));
  if constexpr (DV % 128 == 64)
    wgmma_rs(*reinterpret_cast<float(*)[32]>(&o[64 * NC]), pa, desc8(vt + (uint32_t)(NC * 128 * BN + 32 * ks), BN));
}

// ---- the kernel ----------------------------------------------------------------------------------
template <int D, int DV, int BN>
struct Smem {
  static constexpr int kQBytes = kBM * D;
  static constexpr int kKBytes = BN * D;    // one stage of K
  static constexpr int kVBytes = BN * DV;   // one stage of raw V (TMA)
  static constexpr int kVtBytes = DV * BN;  // one stage of transposed V (wgmma B)
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV = kK + kStages * kKBytes;
  static constexpr int kVt = kV + kStages * kVBytes;
  static constexpr int kBar = kVt + kStages * kVtBytes;
  // barriers: q_full, k_full[2], v_full[2] (raw V landed), k_empty[2], vt_full[2], vt_empty[2]
  static constexpr int kBarQ = kBar, kBarKF = kBar + 8, kBarVF = kBar + 24, kBarKE = kBar + 40,
                       kBarTF = kBar + 56, kBarTE = kBar + 72;
  static constexpr int kTotal = kBar + 128 + 1024;
  static_assert(kQBytes % 1024 == 0 && kKBytes % 1024 == 0 && kVBytes % 1024 == 0 && kVtBytes % 1024 == 0,
                "every tile and chunk starts on a 1024-byte boundary");
  static_assert(kTotal <= 227 * 1024, "shared memory per block");
};

struct Descales {
  const float* q;  // [B, Hkv] at b * bs + hkv, or NULL (= 1)
  const float* k;
  const float* v;
  int64_t bs;
};

// This CTA's sequence and key-tile range (same rules as fa3::fwd_kernel). Computed separately by
// each role after setmaxnreg (from global loads after __syncthreads, so the compiler cannot share
// them across the split): values live across setmaxnreg.dec would have to fit the producer's
// register budget, and ptxas spilled them when they were computed once before the split.
struct Seq {
  int sq, q_row0, k_row0, sk, diag, n_max, n_cnt;
};
template <int BN>
__device__ __forceinline__ Seq seq_range(const Args& a, int b, int m0) {
  Seq s;
  int cap = a.sk;
  s.sq = a.sq;
  s.q_row0 = s.k_row0 = 0;
  if (a.cu_q) {
    s.q_row0 = a.cu_q[b];
    s.sq = a.cu_q[b + 1] - s.q_row0;
    s.k_row0 = a.cu_k[b];
    cap = a.cu_k[b + 1] - s.k_row0;
  }
  const int kend = a.seqused ? a.seqused[b] : cap;
  const int lp = a.leftpad ? a.leftpad[b] : 0;
  s.k_row0 += lp;                  // TMA row coordinate of key j' = 0
  s.sk = max(0, kend - lp);        // effective key length Sk_b
  s.diag = s.sk - s.sq;            // key position of query row 0 (bottom-right alignment)
  const int row_last = min(m0 + kBM, s.sq) - 1;
  int lo = 0, hi = s.sk - 1;
  if (a.wl >= 0) lo = max(lo, m0 + s.diag - a.wl);
  if (a.wr >= 0) hi = min(hi, row_last + s.diag + a.wr);
  s.n_max = hi >= lo ? hi / BN + 1 : 0;
  s.n_cnt = hi >= lo ? s.n_max - lo / BN : 0;
  return s;
}

// D = padded q/k head dim, DV = padded v head dim (multiples of 64), BN = keys per tile (128, or
// 64 for DV >= 192), CW = chunk width of Q, K and raw V (128 when D and DV are multiples of 128,
// else 64). Same CTA shape, roles and masking rules as fa3::fwd_kernel.
template <int D, int DV, int BN, int CW>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ Args a,
               const __grid_constant__ Descales ds) {
  static_assert(D % CW == 0 && DV % CW == 0 && (CW == 64 || CW == 128), "chunking");
  static_assert(BN == 64 || BN == 128, "Vt rows are one swizzle chunk of BN bytes");
  constexpr int NS = BN / 2;
  using L = Smem<D, DV, BN>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::kQ, sK = base + L::kK, sV = base + L::kV, sVt = base + L::kVt;
  const uint32_t bar_q = base + L::kBarQ;

  const int m_block = (int)(gridDim.x - 1 - blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int m0 = m_block * kBM;
  // Varlen: this sequence may be shorter than the max (uniform over the CTA, before any barrier).
  if (m0 >= (a.cu_q ? a.cu_q[b + 1] - a.cu_q[b] : a.sq)) return;

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(base + L::kBarKF + 8 * s, 1);
      mbar_init(base + L::kBarVF + 8 * s, 1);
      mbar_init(base + L::kBarKE + 8 * s, kConsumerWarps);
      mbar_init(base + L::kBarTF + 8 * s, 128);  // every producer thread, after its stmatrix + fence
      mbar_init(base + L::kBarTE + 8 * s, kConsumerWarps);
    }
    fence_mbar_init();
  }
  __syncthreads();

  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    // ---------------------------------------------- producer warpgroup: TMA (thread 0) + V transpose
    setmaxnreg_dec<kProducerRegs>();
    const Seq S = seq_range<BN>(a, b, m0);
    if (S.n_cnt > 0) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      const int hkv = h / a.group, tb = a.cu_q ? 0 : b;
      if (threadIdx.x == 0) {
        prefetch_tmap(&tq);
        prefetch_tmap(&tk);
        prefetch_tmap(&tv);
        mbar_arrive_expect_tx(bar_q, L::kQBytes);
#pragma unroll
        for (int c = 0; c < D / CW; ++c) tma_tile(sQ + c * kBM * CW, &tq, bar_q, CW * c, S.q_row0 + m0, h, tb, a.q_swap);
      }
      // Tile j (K and raw V) is loaded one iteration ahead of its transpose. Raw V stage j&1 was
      // last read by the transpose of tile j-2, which every producer thread finished before the
      // named barrier that ends iteration j-2 (so no empty barrier is needed for raw V).
      for (int it = -1; it < S.n_cnt; ++it) {
        const int j = it + 1;
        if (threadIdx.x == 0 && j < S.n_cnt) {
          const int n_block = S.n_max - 1 - j;
          const int stage = j & 1;
          const uint32_t ph = (j >> 1) & 1;
          const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
          mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
          mbar_arrive_expect_tx(kf, L::kKBytes);
#pragma unroll
          for (int c = 0; c < D / CW; ++c)
            tma_tile(sK + stage * L::kKBytes + c * BN * CW, &tk, kf, CW * c, S.k_row0 + n_block * BN, hkv, tb,
                     a.k_swap);
          mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
          for (int c = 0; c < DV / CW; ++c)
            tma_tile(sV + stage * L::kVBytes + c * BN * CW, &tv, vf, CW * c, S.k_row0 + n_block * BN, hkv, tb,
                     a.v_swap);
        }
        if (it < 0) continue;
        const int stage = it & 1;
        const uint32_t ph = (it >> 1) & 1;
        const int n0 = (S.n_max - 1 - it) * BN;
        mbar_wait(base + L::kBarVF + 8 * stage, ph);      // raw V landed
        mbar_wait(base + L::kBarTE + 8 * stage, ph ^ 1);  // consumers done with Vt[stage]
        const int zr = (a.vzero && n0 + BN > S.sk) ? max(0, S.sk - n0) : BN;
        __syncwarp();  // ldmatrix/stmatrix are .sync.aligned: warp 0 reconverges after thread 0's TMA work
        transpose_v<DV, BN, CW>(sV + stage * L::kVBytes, sVt + stage * L::kVtBytes, warp, lane, zr);
        fence_proxy_async_smem();  // generic-proxy stmatrix writes -> visible to wgmma (async proxy)
        mbar_arrive(base + L::kBarTF + 8 * stage);
        named_bar_sync(kProducerBar, 128);  // raw V[stage] fully read before thread 0 refills it
      }
    }
  } else {
    // ---------------------------------------------- consumer warpgroups
    setmaxnreg_inc<kConsumerRegs>();
    const Seq S = seq_range<BN>(a, b, m0);
    const int hkv = h / a.group;
    const int sk = S.sk, sq = S.sq, diag = S.diag, n_max = S.n_max, n_cnt = S.n_cnt, q_row0 = S.q_row0;
    const int cw = wg - 1;
    const int t = threadIdx.x & 127;
    const int lane = t & 31;
    const int row0 = m0 + 64 * cw + acc_row(t, 0);

    // descales (per batch and KV head): q*k folded into the softmax multipliers when it is positive
    // and finite; otherwise (zero, negative, inf/NaN) applied to the raw scores instead.
    const int64_t di = (int64_t)b * ds.bs + hkv;
    const float qk = (ds.q ? ds.q[di] : 1.f) * (ds.k ? ds.k[di] : 1.f);
    const float vdesc = ds.v ? ds.v[di] : 1.f;
    const bool fold = qk > 0.f && qk < INFINITY;
    float scale_log2 = a.scale_log2, lse_mul = a.lse_mul, cap_in = a.cap_in;
    if (fold) {
      if (a.softcap_on) cap_in *= qk;
      else {
        scale_log2 *= qk;
        lse_mul *= qk;
      }
    }

    int klo[2], khi[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      khi[r] = sk - 1;
      if (a.wr >= 0) khi[r] = min(khi[r], row + diag + a.wr);
      klo[r] = a.wl >= 0 ? row + diag - a.wl : 0;
    }

    float o[DV / 2];
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY};
    float l_run[2] = {0.f, 0.f};

    if (n_cnt > 0) mbar_wait(bar_q, 0);
    const uint32_t sQw = sQ + cw * 64 * CW;  // this warpgroup's 64 rows inside each chunk
    for (int it = 0; it < n_cnt; ++it) {
      const int n0 = (n_max - 1 - it) * BN;
      const int stage = it & 1;
      const uint32_t ph = (it >> 1) & 1;

      // ---- S = Q K^T (64 x BN per warpgroup), fp8 ----
      float s[NS];
      mbar_wait(base + L::kBarKF + 8 * stage, ph);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < D / 32; ++ks)
        wgmma_ss(s, desc8_k(sQw, kBM, ks, CW), desc8_k(sK + stage * L::kKBytes, BN, ks, CW), ks > 0 ? 1 : 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(s);
      __syncwarp();
      if (lane == 0) mbar_arrive(base + L::kBarKE + 8 * stage);

      if (!fold) {
#pragma unroll
        for (int i = 0; i < NS; ++i) s[i] *= qk;
      }
      if (a.softcap_on) {
#pragma unroll
        for (int i = 0; i < NS; ++i) s[i] = a.cap_out * tanh_approx(s[i] * cap_in);
      }
      if (n0 + BN > sk || (a.wr >= 0 && n0 + BN - 1 > m0 + diag + a.wr) ||
          (a.wl >= 0 && n0 < m0 + kBM - 1 + diag - a.wl)) {
#pragma unroll
        for (int i = 0; i < NS; ++i) {
          const int col = n0 + acc_col(t, i);
          const int r = (i >> 1) & 1;
          if (col > khi[r] || col < klo[r]) s[i] = -INFINITY;
        }
      }

      // ---- online softmax ----
      float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
      for (int j = 0; j < NS / 4; ++j) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      }
      float sub[2], corr[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        sub[r] = mx[r] == -INFINITY ? 0.f : mx[r] * scale_log2;
        corr[r] = ex2(m_run[r] * scale_log2 - sub[r]);
        m_run[r] = mx[r];
        l_run[r] *= corr[r];
      }
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) {
        o[4 * j] *= corr[0];
        o[4 * j + 1] *= corr[0];
        o[4 * j + 2] *= corr[1];
        o[4 * j + 3] *= corr[1];
      }
#pragma unroll
      for (int j = 0; j < NS / 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          s[4 * j + e] = ex2(fmaf(s[4 * j + e], scale_log2, -sub[r]));
          l_run[r] += s[4 * j + e];
        }
      }
      uint32_t pa[BN / 32][4];
      acc_to_a8(s, pa);

      // ---- O += P V (Vt from the producer's transpose) ----
      const uint32_t vts = sVt + stage * L::kVtBytes;
      mbar_wait(base + L::kBarTF + 8 * stage, ph);
      fence_regs(o);
      fence_regs(pa);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < BN / 32; ++ks) pv_step<DV, BN>(o, pa[ks], vts, ks);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(base + L::kBarTE + 8 * stage);
    }

    // ---- epilogue (as fa3::fwd_kernel; v_descale folded into 1/l) ----
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    __nv_bfloat16* obase = (__nv_bfloat16*)a.o + (a.cu_q ? (int64_t)q_row0 * a.o_rs : (int64_t)b * a.o_bs) +
                           (int64_t)h * a.o_hs;
    float* lbase = a.lse ? a.lse + (a.cu_q ? (int64_t)q_row0 : (int64_t)b * a.lse_bs) + (int64_t)h * a.lse_hs
                         : nullptr;
    const float sink = a.sinks ? a.sinks[h] : 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row < sq) {
        float inv = 0.f, lse = -INFINITY;
        if (l_run[r] > 0.f) {
          const float m_nat = m_run[r] * lse_mul;
          if (a.sinks) {
            const float mn = fmaxf(m_nat, sink);
            const float e = expf(m_nat - mn);
            const float den = l_run[r] * e + expf(sink - mn);
            inv = vdesc * e / den;
            lse = mn + logf(den);
          } else {
            inv = vdesc / l_run[r];
            lse = m_nat + logf(l_run[r]);
          }
        }
        __nv_bfloat16* orow = obase + (int64_t)row * a.o_rs + 2 * (t & 3);
#pragma unroll
        for (int j = 0; j < DV / 8; ++j)
          if (8 * j < a.dv)
            *reinterpret_cast<uint32_t*>(orow + 8 * j) = pack2<false>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
        if (lbase && (t & 3) == 0) lbase[row] = lse;
      }
    }
  }
}

// ---- host side -------------------------------------------------------------------------------------
// Tensor map of a [B, S, H, Dtot] 1-byte tensor (strides in elements = bytes) with a box of cw
// bytes x `rows` rows of one head and batch, swizzle 128B (cw 128) or 64B (cw 64); dims
// {Dtot, S, H, B}, or {Dtot, H, S, B} (*swap = 1) when the driver refuses the first order.
inline bool make_map(CUtensorMap* map, const void* ptr, int64_t dtot, int64_t s, int64_t h, int64_t bsz,
                     int64_t rs, int64_t hs, int64_t bs, int rows, int cw, int* swap) {
  EncodeTiledFn enc = encode_fn();
  if (!enc) return false;
  const int64_t big = ((dtot * s * h * bsz + 15) / 16) * 16;  // a valid, 16-byte-multiple stride
  if (s == 1) rs = big;
  if (h == 1) hs = big;
  if (bsz == 1) bs = big;
  if (rs <= 0 || hs <= 0 || bs <= 0 || rs % 16 || hs % 16 || bs % 16) return false;
  if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return false;
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  const CUtensorMapSwizzle sw = cw == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  for (int order = 0; order < 2; ++order) {
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4];
    dims[0] = (cuuint64_t)dtot;
    dims[3] = (cuuint64_t)bsz;
    strides[2] = (cuuint64_t)bs;
    box[0] = (cuuint32_t)cw;
    box[3] = 1;
    if (order == 0) {
      dims[1] = (cuuint64_t)s; dims[2] = (cuuint64_t)h;
      strides[0] = (cuuint64_t)rs; strides[1] = (cuuint64_t)hs;
      box[1] = (cuuint32_t)rows; box[2] = 1;
    } else {
      dims[1] = (cuuint64_t)h; dims[2] = (cuuint64_t)s;
      strides[0] = (cuuint64_t)hs; strides[1] = (cuuint64_t)rs;
      box[1] = 1; box[2] = (cuuint32_t)rows;
    }
    const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(ptr), dims, strides, box,
                           estr, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS) {
      *swap = order;
      return true;
    }
  }
  return false;
}

// Does the fp8 kernel cover this call? Same rules as fa3::fast_ok apart from the dtypes (and TMA's
// 16-byte stride rule is checked by make_map: strides multiples of 16 elements).
inline bool fast_ok(const kseek_params* p) {
  if (force_fallback()) return false;
  if (p->dtype != KSEEK_FP8_E4M3 || p->out_dtype != KSEEK_BF16) return false;
  if (!shape_ok(p->head_dim, p->head_dim_v)) return false;
  if (p->page_table) return false;
  if ((p->cu_seqlens_q == nullptr) != (p->cu_seqlens_k == nullptr)) return false;
  if (!isfinite(p->softcap)) return false;
  if (!(p->scale > 0.f) || !isfinite(p->scale)) return false;
  if (p->softcap > 0.f && !isfinite(p->scale / p->softcap)) return false;
  if (p->seqlen_k <= 0 || p->seqlen_q <= 0) return false;
  if (p->seqlen_q >= (1 << 28) || p->seqlen_k >= (1 << 28)) return false;
  if ((reinterpret_cast<uintptr_t>(p->o) & 3) != 0) return false;
  if ((p->o_row_stride | p->o_head_stride) & 1) return false;
  if (!p->cu_seqlens_q && (p->o_batch_stride & 1)) return false;
  return device_is_sm90();
}

template <int D, int DV, int BN, int CW>
int launch(const kseek_params* p, cudaStream_t stream, int64_t rows_q, int64_t rows_k) {
  CUtensorMap tq, tk, tv;
  Args a;
  const bool varlen = p->cu_seqlens_q != nullptr;
  const int64_t nb = varlen ? 1 : p->batch;
  if (!make_map(&tq, p->q, p->head_dim, rows_q, p->heads_q, nb, p->q_row_stride, p->q_head_stride,
                p->q_batch_stride, kBM, CW, &a.q_swap) ||
      !make_map(&tk, p->k, p->head_dim, rows_k, p->heads_kv, nb, p->k_row_stride, p->k_head_stride,
                p->k_batch_stride, BN, CW, &a.k_swap) ||
      !make_map(&tv, p->v, p->head_dim_v, rows_k, p->heads_kv, nb, p->v_row_stride, p->v_head_stride,
                p->v_batch_stride, BN, CW, &a.v_swap))
    return -1;
  fill_args(p, varlen, a);
  Descales ds;
  ds.q = p->q_descale;
  ds.k = p->k_descale;
  ds.v = p->v_descale;
  ds.bs = p->descale_batch_stride;

  constexpr int smem = Smem<D, DV, BN>::kTotal;
  static int attr_done[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  if (dev < 0 || dev >= 64 || !attr_done[dev]) {
    if (cudaFuncSetAttribute(fwd_kernel<D, DV, BN, CW>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
        cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    if (dev >= 0 && dev < 64) attr_done[dev] = 1;
  }
  const dim3 grid((unsigned)((p->seqlen_q + kBM - 1) / kBM), (unsigned)p->heads_q, (unsigned)p->batch);
  fwd_kernel<D, DV, BN, CW><<<grid, kThreads, smem, stream>>>(tq, tk, tv, a, ds);
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return KSEEK_OK;
  if (e == cudaErrorInvalidConfiguration || e == cudaErrorInvalidValue ||
      e == cudaErrorNoKernelImageForDevice || e == cudaErrorLaunchOutOfResources)
    return -1;
  return KSEEK_ERR_CUDA;
}

// Instantiations: CW = 128 needs D and DV multiples of 128 (and unpadded: a 128-byte box over a
// 96-byte row would exceed the tensor's row). D = 96 runs as 128 with 64-byte chunks, the second
// one zero-filled by TMA past byte 96 (as the bf16 path does with its second 64-element box).
inline int dispatch(const kseek_params* p, cudaStream_t stream, int64_t rq, int64_t rk) {
  const int d = p->head_dim, dv = p->head_dim_v;
  if (d == 64) return launch<64, 64, 128, 64>(p, stream, rq, rk);
  if (d == 96) return launch<128, 128, 128, 64>(p, stream, rq, rk);
  if (d == 128) return launch<128, 128, 128, 128>(p, stream, rq, rk);
  if (d == 192 && dv == 128) return launch<192, 128, 128, 64>(p, stream, rq, rk);
  if (d == 192) return launch<192, 192, 64, 64>(p, stream, rq, rk);
  if (d == 256) return launch<256, 256, 64, 128>(p, stream, rq, rk);
  return -1;
}

// -1: not for this path (the caller falls back); else a kseek_status.
inline int fwd(const kseek_params* p, cudaStream_t stream) {
  if (!fast_ok(p)) return -1;
  int64_t rq = p->seqlen_q, rk = p->seqlen_k;
  if (p->cu_seqlens_q && !varlen_totals(p, stream, &rq, &rk)) return -1;
  return dispatch(p, stream, rq, rk);
}

}  // namespace f8
}  // namespace fa3

// =================================================================================================
// Part D: split-KV decode for paged and dense KV caches (mma.sync, cp.async; written as
// kernels/wip/decode_splitkv.cu and tested there by probe_decode.cu on the H200). One CTA of 4 warps
// per (batch, KV head, split, 16-row query tile): the G query heads of a KV head times the Sq rows
// form the M rows of an m16 MMA tile; each warp streams every 4th 16-key chunk through its own
// cp.async ring; several splits write fp32 partials to the workspace and a combine kernel merges
// them. Design, split heuristic and workspace layout: kernels/probe/README_decode.md.
// =================================================================================================
namespace dec {

// ------------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------------
constexpr int kWarps = 4;          // warps per CTA, each with its own key slice and cp.async ring
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 16;          // keys per warp stage (one k16 step of P V, two n8 tiles of S)
constexpr int kRows = 16;          // query rows per CTA (one m16 tile)
constexpr int kMaxRows = 64;       // Sq * G limit (up to 4 query tiles per KV head)
constexpr int kMaxSplits = 256;

template <int D>
struct Cfg {
  static_assert(D == 64 || D == 128 || D == 256, "head dim");
  static constexpr int kStages = (D == 64) ? 4 : 3;       // ring depth per warp
  static constexpr int kRowB = D * 2;                     // bytes of one K/V/Q row in smem
  static constexpr int kChunks = D / 8;                   // 16-byte chunks per row
  static constexpr int kTile = kKeys * kRowB;             // one K (or V) tile of a stage
  static constexpr int kStage = 2 * kTile;                // K tile then V tile
  static constexpr int kRing = kWarps * kStages * kStage; // all warps' rings
  static constexpr int kQ = kRows * kRowB;                // the Q tile
  static constexpr int kOPad = D + 4;                     // floats per row of the merge buffer
  static constexpr int kMerge = kWarps * kRows * kOPad * 4;
  static_assert(kMerge <= kRing, "merge buffer reuses the ring");
  static constexpr int kOffQ = kRing;
  static constexpr int kOffStat = kOffQ + kQ;             // m[kWarps][16], l[kWarps][16]
  static constexpr int kSmem = kOffStat + 2 * kWarps * kRows * 4;
  static constexpr bool kQReg = D <= 128;                 // Q fragments held in registers
};

// Kernel arguments (by value).
struct Args {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  float* ws_o;      // [nsplit][R][D] fp32 partial O (normalized), R = B * Hkv * M
  float* ws_lse;    // [nsplit][R] partial LSE (natural log), -inf when the split saw no key
  const int32_t* seqused;
  const int32_t* leftpad;
  const int32_t* pt;
  const float* sinks;
  int64_t q_bs, q_rs, q_hs;
  int64_t k_bs, k_rs, k_hs;   // paged: k_bs is the page stride
  int64_t v_bs, v_rs, v_hs;
  int64_t o_bs, o_rs, o_hs;
  int64_t lse_bs, lse_hs;
  int pt_stride, ps, ps_shift, paged;   // ps_shift = log2(ps) when ps is a power of two, else -1
  int B, Hkv, G, sq, sk, M, mtiles, nsplit, R;
  int wl, wr;                           // -1 = unbounded; causal already folded into wr = 0
  int softcap_on;
  float scale_log2;                     // no softcap: scale*log2(e); softcap: scale/softcap
  float cap_log2;                       // softcap*log2(e)
};

// ------------------------------------------------------------------------------------------------
// Device helpers (PTX)
// ------------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy, L1 bypassed; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D(16x8 fp32) += A(16x16) * B(16x8), A row-major, B column-major.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, __half>::value) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// Byte offset of 16-byte chunk c of row r in a swizzled tile (rows of D*2 bytes, D*2 % 128 == 0):
// the low three bits of the chunk index are XORed with r % 8, so the 8 rows an ldmatrix reads at
// one logical chunk fall into 8 different 16-byte bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return (uint32_t)(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

// Visible key range (positions after leftpad, inclusive) of query row i; lo > hi when empty.
__device__ __forceinline__ int row_lo(const Args& a, int i, int sk) {
  return a.wl >= 0 ? max(0, i + sk - a.sq - a.wl) : 0;
}
__device__ __forceinline__ int row_hi(const Args& a, int i, int sk) {
  return a.wr >= 0 ? min(sk - 1, i + sk - a.sq + a.wr) : sk - 1;
}

// ------------------------------------------------------------------------------------------------
// Main kernel
// ------------------------------------------------------------------------------------------------
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) splitkv_kernel(const Args a) {
  using C = Cfg<D>;
  constexpr int S = C::kStages;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);

  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int g = lane >> 2, q4 = lane & 3;

  // blockIdx.x = ((b * nsplit + split) * Hkv + h) * mtiles + mt: the query tiles and KV heads of
  // one (sequence, split) are neighbours, so they run together and share pages / L2 lines.
  int bid = blockIdx.x;
  const int mt = bid % a.mtiles;
  bid /= a.mtiles;
  const int h = bid % a.Hkv;
  bid /= a.Hkv;
  const int sp = bid % a.nsplit;
  const int b = bid / a.nsplit;

  const int m0 = mt * kRows;
  const int mv = min(kRows, a.M - m0);  // valid rows of this tile (>= 1)

  // ---- Q tile: global -> registers now, -> swizzled smem below (rows past M are zero) ----------
  constexpr int kQPer = (kRows * C::kChunks + kThreads - 1) / kThreads;
  uint4 qv[kQPer];
#pragma unroll
  for (int u = 0; u < kQPer; ++u) {
    const int idx = tid + u * kThreads;
    const int r = idx / C::kChunks, c = idx % C::kChunks;
    qv[u] = make_uint4(0u, 0u, 0u, 0u);
    if (idx < kRows * C::kChunks && r < mv) {
      const int m = m0 + r;
      const int i = m / a.G, hq = h * a.G + m % a.G;
      const T* src = (const T*)a.q + (int64_t)b * a.q_bs + (int64_t)i * a.q_rs + (int64_t)hq * a.q_hs + c * 8;
      qv[u] = __ldg(reinterpret_cast<const uint4*>(src));
    }
  }

  // ---- this sequence's keys, the tile's visible key range and this split's share of it -------
  const int lp = a.leftpad ? __ldg(a.leftpad + b) : 0;
  const int end = a.seqused ? __ldg(a.seqused + b) : a.sk;
  const int sk = max(0, end - lp);
  const int i_first = m0 / a.G, i_last = (m0 + mv - 1) / a.G;
  const int ulo = row_lo(a, i_first, sk), uhi = row_hi(a, i_last, sk);  // union of the rows' ranges
  const int nch = uhi >= ulo ? (uhi - ulo + kKeys) / kKeys : 0;         // 16-key chunks
  const int cps = (nch + a.nsplit - 1) / a.nsplit;                       // chunks per split
  const int c0 = min(nch, sp * cps), c1 = min(nch, c0 + cps);
  const int ks = ulo + c0 * kKeys;                                       // split's keys [ks, ke)
  const int ke = c1 > c0 ? min(uhi + 1, ulo + c1 * kKeys) : ks;
  const int nchl = c1 - c0;
  const int nst = nchl > w ? (nchl - w + kWarps - 1) / kWarps : 0;       // this warp's stages

  // Per-thread rows g and g + 8 of the tile: visible keys clamped to the split.
  int rlo[2], rhi[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int r = g + 8 * rr;
    if (r < mv) {
      const int i = (m0 + r) / a.G;
      rlo[rr] = max(row_lo(a, i, sk), ks);
      rhi[rr] = min(row_hi(a, i, sk), ke - 1);
    } else {
      rlo[rr] = 1;
      rhi[rr] = 0;
    }
  }

  // ---- loader: lane owns rows (lane>>3) + 4k (k = 0..3) of each 16-key stage and, in each, the
  // 16-byte chunks == lane%8 (mod 8): one instruction moves 4 rows x 128 contiguous bytes. --------
  const T* kg = (const T*)a.k;
  const T* vg = (const T*)a.v;
  const int64_t khead = (int64_t)h * a.k_hs + (lane & 7) * 8;
  const int64_t vhead = (int64_t)h * a.v_hs + (lane & 7) * 8;
  const int32_t* ptrow = a.paged ? a.pt + (int64_t)b * a.pt_stride : nullptr;
  const uint32_t ring = sbase + (uint32_t)(w * S * C::kStage);

  // Page (or batch) index and slot of the 4 rows of warp stage t; slot -1 = no key (zero fill).
  auto locate = [&](int t, int (&pg)[4], int (&sl)[4]) {
    const int kb = ks + (t * kWarps + w) * kKeys;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int j = kb + (lane >> 3) + 4 * k;
      pg[k] = 0;
      sl[k] = -1;
      if (t < nst && j < ke) {
        const int jj = j + lp;
        if (a.paged) {
          const int pidx = a.ps_shift >= 0 ? (jj >> a.ps_shift) : jj / a.ps;
          pg[k] = __ldg(ptrow + pidx);
          sl[k] = jj - pidx * a.ps;
        } else {
          pg[k] = b;
          sl[k] = jj;
        }
      }
    }
  };
  auto issue = [&](int slot, const int (&pg)[4], const int (&sl)[4]) {
    const uint32_t kt = ring + (uint32_t)(slot * C::kStage);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int r = (lane >> 3) + 4 * k;
      const bool ok = sl[k] >= 0;
      const T* ksrc = kg;
      const T* vsrc = vg;
      if (ok) {
        ksrc = kg + ((int64_t)pg[k] * a.k_bs + (int64_t)sl[k] * a.k_rs + khead);
        vsrc = vg + ((int64_t)pg[k] * a.v_bs + (int64_t)sl[k] * a.v_rs + vhead);
      }
      const uint32_t dst = kt + swz<D>(r, lane & 7);
      const int nb = ok ? 16 : 0;
#pragma unroll
      for (int j = 0; j < C::kChunks / 8; ++j) {
        cp_async16(dst + j * 128, ksrc + j * 64, nb);
        cp_async16(dst + C::kTile + j * 128, vsrc + j * 64, nb);
      }
    }
  };

  // Prologue: locate stages 0..S-1 (independent loads), issue 0..S-2.
  int pg[4], sl[4];
  {
    int ppg[S - 1][4], psl[S - 1][4];
#pragma unroll
    for (int t = 0; t < S - 1; ++t) locate(t, ppg[t], psl[t]);
    locate(S - 1, pg, sl);
#pragma unroll
    for (int t = 0; t < S - 1; ++t) {
      if (t < nst) issue(t, ppg[t], psl[t]);
      cp_async_commit();
    }
  }

  // Q to smem (swizzled), then fragments.
  const uint32_t qs = sbase + C::kOffQ;
#pragma unroll
  for (int u = 0; u < kQPer; ++u) {
    const int idx = tid + u * kThreads;
    if (idx < kRows * C::kChunks) {
      const int r = idx / C::kChunks, c = idx % C::kChunks;
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(qs + swz<D>(r, c)), "r"(qv[u].x),
                   "r"(qv[u].y), "r"(qv[u].z), "r"(qv[u].w)
                   : "memory");
    }
  }
  __syncthreads();

  // ldmatrix lane addressing (x4): A (Q) and V^T use row (lane&7) + 8*((lane>>3)&1), chunk +
  // (lane>>4); K uses row (lane&7) + 8*(lane>>4), chunk + ((lane>>3)&1).
  const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_ch = lane >> 4;
  const int k_row = (lane & 7) + 8 * (lane >> 4), k_ch = (lane >> 3) & 1;

  uint32_t qf[C::kQReg ? D / 16 : 1][4];
  if constexpr (C::kQReg) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(qf[kk], qs + swz<D>(a_row, 2 * kk + a_ch));
  }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mrun[2] = {-INFINITY, -INFINITY};
  float lsum[2] = {0.f, 0.f};

  int rd = 0, wrs = S - 1;  // ring slots: read (stage t), write (stage t + S - 1)
  for (int t = 0; t < nst; ++t) {
    __syncwarp();  // every lane is done reading slot wrs (consumed at t - 1)
    if (t + S - 1 < nst) issue(wrs, pg, sl);
    cp_async_commit();
    locate(t + S, pg, sl);  // page ids for the next issue; latency hidden behind this stage
    cp_async_wait<S - 1>();
    __syncwarp();  // the stage's rows from every lane are visible

    const uint32_t kt = ring + (uint32_t)(rd * C::kStage);
    const uint32_t vt = kt + C::kTile;

    // S = Q K^T for 16 keys: two n8 tiles
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + swz<D>(k_row, 2 * kk + k_ch));
      if constexpr (C::kQReg) {
        mma16816<T>(s[0], qf[kk], kb[0], kb[1]);
        mma16816<T>(s[1], qf[kk], kb[2], kb[3]);
      } else {
        uint32_t qa[4];
        ldsm_x4(qa, qs + swz<D>(a_row, 2 * kk + a_ch));
        mma16816<T>(s[0], qa, kb[0], kb[1]);
        mma16816<T>(s[1], qa, kb[2], kb[3]);
      }
    }

    // scores in log2 units, masked; online softmax
    const int key0 = ks + (t * kWarps + w) * kKeys + 2 * q4;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = e >> 1;
        const int key = key0 + 8 * n + (e & 1);
        float x = s[n][e];
        x = a.softcap_on ? a.cap_log2 * tanhf(x * a.scale_log2) : x * a.scale_log2;
        x = (key >= rlo[rr] && key <= rhi[rr]) ? x : -INFINITY;
        s[n][e] = x;
        mx[rr] = fmaxf(mx[rr], x);
      }
    }
    float alpha[2], mref[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
      const float mnew = fmaxf(mrun[rr], mx[rr]);
      mref[rr] = mnew == -INFINITY ? 0.f : mnew;  // no key yet: keep exp2 arguments finite
      alpha[rr] = ex2(mrun[rr] - mref[rr]);       // 0 when mrun was -inf
      mrun[rr] = mnew;
    }
    float ps[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = e >> 1;
        s[n][e] = ex2(s[n][e] - mref[rr]);
        ps[rr] += s[n][e];
      }
    }
    lsum[0] = lsum[0] * alpha[0] + ps[0];
    lsum[1] = lsum[1] * alpha[1] + ps[1];
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }
    }

    // P (16 x 16 keys) as the A fragment: n tile 0 = keys 0-7, n tile 1 = keys 8-15
    uint32_t pa[4];
    pa[0] = pack2<T>(s[0][0], s[0][1]);
    pa[1] = pack2<T>(s[0][2], s[0][3]);
    pa[2] = pack2<T>(s[1][0], s[1][1]);
    pa[3] = pack2<T>(s[1][2], s[1][3]);

    // O += P V: V^T fragments by ldmatrix.trans, two n8 tiles of Dv per x4
#pragma unroll
    for (int n2 = 0; n2 < D / 16; ++n2) {
      uint32_t vb[4];
      ldsm_x4_t(vb, vt + swz<D>(a_row, 2 * n2 + a_ch));
      mma16816<T>(o[2 * n2], pa, vb[0], vb[1]);
      mma16816<T>(o[2 * n2 + 1], pa, vb[2], vb[3]);
    }

    rd = (rd + 1 == S) ? 0 : rd + 1;
    wrs = (wrs + 1 == S) ? 0 : wrs + 1;
  }

  // Let a dependent (combine) grid start launching; it waits for this grid's completion anyway.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // ---- merge the warps' states through shared memory ------------------------------------------
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    lsum[rr] += __shfl_xor_sync(0xffffffffu, lsum[rr], 1);
    lsum[rr] += __shfl_xor_sync(0xffffffffu, lsum[rr], 2);
  }
  cp_async_wait<0>();
  __syncthreads();  // rings are no longer read: reuse them for the merge buffer

  float* so = reinterpret_cast<float*>(smem);
  float* st_m = reinterpret_cast<float*>(smem + C::kOffStat);
  float* st_l = st_m + kWarps * kRows;
  if (q4 == 0) {
    st_m[w * kRows + g] = mrun[0];
    st_m[w * kRows + g + 8] = mrun[1];
    st_l[w * kRows + g] = lsum[0];
    st_l[w * kRows + g + 8] = lsum[1];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<float2*>(&so[(w * kRows + g) * C::kOPad + 8 * n + 2 * q4]) = make_float2(o[n][0], o[n][1]);
    *reinterpret_cast<float2*>(&so[(w * kRows + g + 8) * C::kOPad + 8 * n + 2 * q4]) = make_float2(o[n][2], o[n][3]);
  }
  __syncthreads();

  constexpr float kLn2 = 0.6931471805599453f;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kQuads = D / 4;  // 4 output elements per work item
  for (int idx = tid; idx < mv * kQuads; idx += kThreads) {
    const int r = idx / kQuads, d = (idx % kQuads) * 4;
    float mw[kWarps], mm = -INFINITY;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww) {
      mw[ww] = st_m[ww * kRows + r];
      mm = fmaxf(mm, mw[ww]);
    }
    const float mref = mm == -INFINITY ? 0.f : mm;
    float L = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww) {
      const float f = ex2(mw[ww] - mref);
      L += st_l[ww * kRows + r] * f;
      const float4 x = *reinterpret_cast<const float4*>(&so[(ww * kRows + r) * C::kOPad + d]);
      acc.x += f * x.x;
      acc.y += f * x.y;
      acc.z += f * x.z;
      acc.w += f * x.w;
    }
    const int m = m0 + r;
    const int i = m / a.G, hq = h * a.G + m % a.G;
    if (a.nsplit == 1) {
      float inv = 0.f, lse = -INFINITY;
      if (L > 0.f) {
        if (a.sinks) {
          const float s2 = __ldg(a.sinks + hq) * kLog2e;
          const float mt2 = fmaxf(mm, s2);
          const float sc = ex2(mm - mt2);
          const float den = L * sc + ex2(s2 - mt2);
          inv = sc / den;
          lse = (mt2 + __log2f(den)) * kLn2;
        } else {
          inv = 1.f / L;
          lse = (mm + __log2f(L)) * kLn2;
        }
      }
      T* dst = (T*)a.o + (int64_t)b * a.o_bs + (int64_t)i * a.o_rs + (int64_t)hq * a.o_hs + d;
      reinterpret_cast<uint32_t*>(dst)[0] = pack2<T>(acc.x * inv, acc.y * inv);
      reinterpret_cast<uint32_t*>(dst)[1] = pack2<T>(acc.z * inv, acc.w * inv);
      if (a.lse && d == 0) a.lse[(int64_t)b * a.lse_bs + (int64_t)hq * a.lse_hs + i] = lse;
    } else {
      const int64_t row = (int64_t)sp * a.R + ((int64_t)b * a.Hkv + h) * a.M + m;
      const float inv = L > 0.f ? 1.f / L : 0.f;
      *reinterpret_cast<float4*>(a.ws_o + row * D + d) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (d == 0) a.ws_lse[row] = L > 0.f ? (mm + __log2f(L)) * kLn2 : -INFINITY;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Combine kernel: one warp per output row (b, h, m); lane owns D/32 consecutive elements.
// ------------------------------------------------------------------------------------------------
template <typename T, int D>
__global__ void __launch_bounds__(128) combine_kernel(const Args a) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the main grid's writes are visible
  constexpr int E = D / 32;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (row >= a.R) return;
  const int m = row % a.M;
  const int bh = row / a.M;
  const int h = bh % a.Hkv, b = bh / a.Hkv;
  const int i = m / a.G, hq = h * a.G + m % a.G;
  const int ns = a.nsplit;

  float mx = -INFINITY;
  for (int s = lane; s < ns; s += 32) mx = fmaxf(mx, a.ws_lse[(int64_t)s * a.R + row]);
#pragma unroll
  for (int off = 16; off; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));

  T* dst = (T*)a.o + (int64_t)b * a.o_bs + (int64_t)i * a.o_rs + (int64_t)hq * a.o_hs + lane * E;
  float acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.f;
  float lse = -INFINITY;
  if (mx != -INFINITY) {  // the row saw at least one key in some split
    const float sink = a.sinks ? __ldg(a.sinks + hq) : -INFINITY;
    const float mtot = fmaxf(mx, sink);
    float sum = 0.f;
    for (int s = lane; s < ns; s += 32) sum += expf(a.ws_lse[(int64_t)s * a.R + row] - mtot);
#pragma unroll
    for (int off = 16; off; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (a.sinks) sum += expf(sink - mtot);
    lse = mtot + logf(sum);
    for (int s = 0; s < ns; ++s) {
      const float ls = a.ws_lse[(int64_t)s * a.R + row];
      if (ls == -INFINITY) continue;  // empty split (its O is 0)
      const float wgt = expf(ls - lse);
      const float* src = a.ws_o + ((int64_t)s * a.R + row) * D + lane * E;
#pragma unroll
      for (int e = 0; e < E; e += 2) {
        const float2 x = *reinterpret_cast<const float2*>(src + e);
        acc[e] += wgt * x.x;
        acc[e + 1] += wgt * x.y;
      }
    }
  }
#pragma unroll
  for (int e = 0; e < E; e += 2) reinterpret_cast<uint32_t*>(dst)[e / 2] = pack2<T>(acc[e], acc[e + 1]);
  if (a.lse && lane == 0) a.lse[(int64_t)b * a.lse_bs + (int64_t)hq * a.lse_hs + i] = lse;
}

// ------------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------------
constexpr int kMaxDev = 64;

inline int current_device() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

// True when the device has compute capability 9.0 (cached per device; a failed query says false).
inline bool device_ok(int dev) {
  static int cache[kMaxDev] = {0};  // 0 unknown, 1 yes, 2 no
  if (dev < 0) return false;
  if (dev < kMaxDev && cache[dev]) return cache[dev] == 1;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const bool ok = major == 9 && minor == 0;
  if (dev < kMaxDev) cache[dev] = ok ? 1 : 2;
  return ok;
}

inline int sm_count(int dev) {
  static int cache[kMaxDev] = {0};
  if (dev >= 0 && dev < kMaxDev && cache[dev]) return cache[dev];
  int n = 0;
  if (dev < 0 || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return 132;  // H100/H200 SXM
  }
  if (dev < kMaxDev) cache[dev] = n;
  return n;
}

// Opt in to > 48 KB of dynamic shared memory and read the CTAs per SM, once per device and
// instantiation. Returns CTAs per SM, or 0 on failure.
template <typename T, int D>
inline int prepare(int dev) {
  static int occ[kMaxDev] = {0};
  if (dev >= 0 && dev < kMaxDev && occ[dev]) return occ[dev];
  if (dev < 0) return 0;
  if (cudaFuncSetAttribute(splitkv_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Cfg<D>::kSmem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, splitkv_kernel<T, D>, kThreads, Cfg<D>::kSmem) !=
          cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 0;
  }
  if (dev < kMaxDev) occ[dev] = n;
  return n;
}

inline int ctas_per_sm(const kseek_params* p, int dev) {
  const bool f16 = p->dtype == KSEEK_FP16;
  switch (p->head_dim) {
    case 64: return f16 ? prepare<__half, 64>(dev) : prepare<__nv_bfloat16, 64>(dev);
    case 128: return f16 ? prepare<__half, 128>(dev) : prepare<__nv_bfloat16, 128>(dev);
    default: return f16 ? prepare<__half, 256>(dev) : prepare<__nv_bfloat16, 256>(dev);
  }
}

inline int clamp_window(int w) { return (w < 0 || w >= (1 << 29)) ? -1 : w; }

inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

inline bool supported(const kseek_params* p) {
  if (!p || p->abi_version != KSEEK_ABI_VERSION) return false;
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return false;
  if (p->out_dtype != p->dtype) return false;
  if (p->head_dim != p->head_dim_v) return false;
  if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256) return false;
  if (p->cu_seqlens_q || p->cu_seqlens_k) return false;
  if (p->batch <= 0 || p->heads_kv <= 0 || p->heads_q <= 0 || p->heads_q % p->heads_kv) return false;
  if (p->seqlen_q < 0 || p->seqlen_k < 0 || p->seqlen_q >= (1 << 28) || p->seqlen_k >= (1 << 28)) return false;
  const int64_t rows = (int64_t)p->seqlen_q * (p->heads_q / p->heads_kv);
  if (rows > kMaxRows) return false;
  if (!p->q || !p->k || !p->v || !p->o) return false;
  if (!(p->scale == p->scale) || isinf(p->scale)) return false;
  if (!(p->softcap >= 0.f) || isinf(p->softcap)) return false;
  if (p->softcap > 0.f && isinf(p->scale / p->softcap)) return false;
  // 16-byte loads of q/k/v rows; o written as element pairs
  if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v)) return false;
  if ((p->q_batch_stride | p->q_row_stride | p->q_head_stride) & 7) return false;
  if ((p->k_batch_stride | p->k_row_stride | p->k_head_stride) & 7) return false;
  if ((p->v_batch_stride | p->v_row_stride | p->v_head_stride) & 7) return false;
  if ((reinterpret_cast<uintptr_t>(p->o) & 3) || ((p->o_batch_stride | p->o_row_stride | p->o_head_stride) & 1))
    return false;
  if (p->page_table && (p->page_size <= 0 || p->page_table_stride <= 0)) return false;
  if ((int64_t)p->batch * p->heads_kv * ((rows + kRows - 1) / kRows) * kMaxSplits >= (int64_t)1 << 31) return false;
  return device_ok(current_device());
}

// Split count: explicit num_splits is honoured (clamped to [1, 256]); 0 = a wave-quantized cost
// model over the CTA slots of the GPU (see README_decode.md).
inline int choose_splits(const kseek_params* p) {
  if (p->num_splits > 0) return p->num_splits < kMaxSplits ? p->num_splits : kMaxSplits;
  const int dev = current_device();
  const int g = p->heads_q / p->heads_kv;
  const int rows = p->seqlen_q * g;
  const int mtiles = (rows + kRows - 1) / kRows;
  const int64_t ctas = (int64_t)p->batch * p->heads_kv * (mtiles > 0 ? mtiles : 1);
  int occ = ctas_per_sm(p, dev);
  if (occ <= 0) occ = 1;
  const int64_t slots = (int64_t)sm_count(dev) * occ;
  // keys a CTA range can cover (upper bound; seqused_k is on the device)
  int64_t keys = p->seqlen_k;
  const int wl = clamp_window(p->window_left);
  const int wr = p->causal ? 0 : clamp_window(p->window_right);
  if (wl >= 0) keys = std::min<int64_t>(keys, (int64_t)wl + (wr >= 0 ? wr : p->seqlen_k) + p->seqlen_q + kKeys);
  const int64_t chunks = (keys + kKeys - 1) / kKeys;
  if (chunks <= kWarps) return 1;
  const double key_bytes = 4.0 * p->head_dim;                           // K + V, 16-bit
  const double fixed = 32768.0;                                        // per-CTA start-up, bytes
  const double comb = 65536.0;                                         // second launch, bytes/slot
  const int64_t smax = std::min<int64_t>(128, chunks / kWarps);
  int best = 1;
  double best_t = 0.0;
  for (int64_t s = 1; s <= smax; ++s) {
    const int64_t per = (chunks + s - 1) / s;                          // chunks per split
    const int64_t waves = (ctas * s + slots - 1) / slots;
    double t = (double)waves * ((double)per * kKeys * key_bytes + fixed);
    if (s > 1) t += comb + 2.0 * (double)(s * ctas * kRows) * p->head_dim * 4.0 / (double)slots;
    if (s == 1 || t < best_t * 0.999) {
      best = (int)s;
      best_t = t;
    }
  }
  return best;
}

inline size_t ws_lse_offset(int64_t ns, int64_t R, int d) {
  return (size_t)((ns * R * d * 4 + 255) / 256 * 256);
}
inline size_t ws_bytes_for(int64_t ns, int64_t R, int d) {
  return ns <= 1 ? 0 : ws_lse_offset(ns, R, d) + (size_t)(ns * R * 4);
}

inline size_t workspace_bytes(const kseek_params* p) {
  if (!supported(p) || p->seqlen_q == 0) return 0;
  const int64_t R = (int64_t)p->batch * p->heads_kv * p->seqlen_q * (p->heads_q / p->heads_kv);
  return ws_bytes_for(choose_splits(p), R, p->head_dim);
}

template <typename T, int D>
int launch(const kseek_params* p, int ns, cudaStream_t stream) {
  const int dev = current_device();
  if (prepare<T, D>(dev) <= 0) return KSEEK_ERR_CUDA;
  Args a;
  a.q = p->q;
  a.k = p->k;
  a.v = p->v;
  a.o = p->o;
  a.lse = p->lse;
  a.seqused = p->seqused_k;
  a.leftpad = p->leftpad_k;
  a.pt = p->page_table;
  a.sinks = p->sinks;
  a.q_bs = p->q_batch_stride;
  a.q_rs = p->q_row_stride;
  a.q_hs = p->q_head_stride;
  a.k_bs = p->k_batch_stride;
  a.k_rs = p->k_row_stride;
  a.k_hs = p->k_head_stride;
  a.v_bs = p->v_batch_stride;
  a.v_rs = p->v_row_stride;
  a.v_hs = p->v_head_stride;
  a.o_bs = p->o_batch_stride;
  a.o_rs = p->o_row_stride;
  a.o_hs = p->o_head_stride;
  a.lse_bs = p->lse_batch_stride;
  a.lse_hs = p->lse_head_stride;
  a.paged = p->page_table != nullptr;
  a.pt_stride = a.paged ? p->page_table_stride : 0;
  a.ps = a.paged ? p->page_size : 1;
  a.ps_shift = -1;
  if (a.paged && (a.ps & (a.ps - 1)) == 0) {
    int sh = 0;
    while ((1 << sh) < a.ps) ++sh;
    a.ps_shift = sh;
  }
  a.B = p->batch;
  a.Hkv = p->heads_kv;
  a.G = p->heads_q / p->heads_kv;
  a.sq = p->seqlen_q;
  a.sk = p->seqlen_k;
  a.M = p->seqlen_q * a.G;
  a.mtiles = (a.M + kRows - 1) / kRows;
  a.R = a.B * a.Hkv * a.M;
  a.wl = clamp_window(p->window_left);
  a.wr = p->causal ? 0 : clamp_window(p->window_right);
  const float kLog2e = 1.4426950408889634f;
  if (p->softcap > 0.f) {
    a.softcap_on = 1;
    a.scale_log2 = p->scale / p->softcap;
    a.cap_log2 = p->softcap * kLog2e;
  } else {
    a.softcap_on = 0;
    a.scale_log2 = p->scale * kLog2e;
    a.cap_log2 = 0.f;
  }
  // the workspace decides how many splits can be stored; too small -> fewer splits (>= 1)
  if (reinterpret_cast<uintptr_t>(p->workspace) & 15) ns = 1;  // float4 stores need 16-byte alignment
  while (ns > 1 && (p->workspace == nullptr || ws_bytes_for(ns, a.R, D) > p->workspace_bytes)) --ns;
  a.nsplit = ns;
  a.ws_o = ns > 1 ? reinterpret_cast<float*>(p->workspace) : nullptr;
  a.ws_lse = ns > 1 ? reinterpret_cast<float*>(static_cast<char*>(p->workspace) + ws_lse_offset(ns, a.R, D))
                    : nullptr;

  const int64_t nblk = (int64_t)a.B * a.Hkv * ns * a.mtiles;
  splitkv_kernel<T, D><<<(unsigned)nblk, kThreads, Cfg<D>::kSmem, stream>>>(a);
  if (cudaGetLastError() != cudaSuccess) return KSEEK_ERR_CUDA;
  if (ns == 1) return KSEEK_OK;

  // combine, launched with programmatic stream serialization (its launch overlaps the main
  // grid's tail; griddepcontrol.wait inside orders the reads); plain launch if refused
  const unsigned cblk = (unsigned)((a.R + 3) / 4);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(cblk);
  cfg.blockDim = dim3(128);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, combine_kernel<T, D>, a) != cudaSuccess) {
    cudaGetLastError();
    combine_kernel<T, D><<<cblk, 128, 0, stream>>>(a);
    if (cudaGetLastError() != cudaSuccess) return KSEEK_ERR_CUDA;
  }
  return KSEEK_OK;
}

inline int run(const kseek_params* p, cudaStream_t stream) {
  if (!p) return KSEEK_ERR_INVALID;
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (!supported(p)) return KSEEK_ERR_UNSUPPORTED;
  if (p->seqlen_q == 0) return KSEEK_OK;
  const int ns = choose_splits(p);
  const bool f16 = p->dtype == KSEEK_FP16;
  switch (p->head_dim) {
    case 64: return f16 ? launch<__half, 64>(p, ns, stream) : launch<__nv_bfloat16, 64>(p, ns, stream);
    case 128: return f16 ? launch<__half, 128>(p, ns, stream) : launch<__nv_bfloat16, 128>(p, ns, stream);
    default: return f16 ? launch<__half, 256>(p, ns, stream) : launch<__nv_bfloat16, 256>(p, ns, stream);
  }
}

}  // namespace dec

// =================================================================================================
// ABI
// =================================================================================================
// Which calls go to Part D: every paged call it supports, and dense calls with at most 16 query
// rows per KV head (Sq * Hq / Hkv), where one m16 tile holds all of them.
static bool use_decode(const kseek_params* p) {
  if (fa3::force_fallback() || !dec::supported(p)) return false;
  if (p->page_table) return true;
  return (int64_t)p->seqlen_q * (p->heads_q / p->heads_kv) <= 16;
}

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  if (!p) return KSEEK_ERR_INVALID;
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (p->dtype < KSEEK_BF16 || p->dtype > KSEEK_FP8_E4M3) return KSEEK_ERR_INVALID;
  if (p->out_dtype < KSEEK_BF16 || p->out_dtype > KSEEK_FP8_E4M3) return KSEEK_ERR_INVALID;
  if (p->batch <= 0 || p->seqlen_q < 0 || p->seqlen_k < 0) return KSEEK_ERR_INVALID;
  if (p->heads_q <= 0 || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return KSEEK_ERR_INVALID;
  if (naive::bad_dim(p->head_dim) || naive::bad_dim(p->head_dim_v)) return KSEEK_ERR_INVALID;
  if (!p->q || !p->k || !p->v || !p->o) return KSEEK_ERR_INVALID;
  if (p->page_table && (p->page_size <= 0 || p->page_table_stride <= 0)) return KSEEK_ERR_INVALID;
  if (p->heads_q > 65535 || p->batch > 65535) return KSEEK_ERR_UNSUPPORTED;  // grid y/z limits
  if (p->seqlen_q == 0) return KSEEK_OK;  // nothing to compute

  if (use_decode(p)) {  // Part D: paged KV, or dense decode (a few query rows per KV head)
    fa3::g_last_path = 1;
    return dec::run(p, stream);
  }
  int r = fa3::fwd(p, stream);             // Part 3: bf16/fp16 prefill
  if (r < 0) r = fa3::f8::fwd(p, stream);  // Part F: fp8 e4m3 (-1 for anything it does not take)
  if (r >= 0) {
    fa3::g_last_path = 1;
    return r;
  }
  fa3::g_last_path = 0;
  switch (p->dtype) {
    case KSEEK_BF16: return naive::launch_out<__nv_bfloat16>(p, stream);
    case KSEEK_FP16: return naive::launch_out<__half>(p, stream);
    default: return naive::launch_out<__nv_fp8_e4m3>(p, stream);
  }
}

extern "C" size_t kseek_workspace_bytes(const kseek_params* p) {
  return (p && p->abi_version == KSEEK_ABI_VERSION && use_decode(p)) ? dec::workspace_bytes(p) : 0;
}

extern "C" const char* kseek_name(void) { return "fa3_hopper"; }
