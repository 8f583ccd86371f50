// fa3_hopper.cu: FlashAttention-3-style forward for Hopper (sm_90a), implementing kernels/kseek.h.
//
// STATUS: v2, tested on the H200 (2026-11-30): kernels/probe/probe_fa3.cu ALL PASS (building blocks
// and 37 end-to-end configurations), harness --check-only correct on smoke, optest and hopper.
// Design, layouts and what changed from v1: kernels/probe/README.md; measurements: kernels/NOTES.md.
//
// Two paths in one file:
//   * fast path (fa3::fwd_kernel<T, D, DV, BN>): bf16/fp16 (out dtype = in dtype), no paged KV,
//       head dims (D, Dv) in {(64,64), (96,96) [padded to 128], (128,128), (192,128), (192,192),
//       (256,256)}; dense or varlen (cu_seqlens_q AND cu_seqlens_k; costs one stream sync, see
//       varlen_totals); seqused_k and leftpad_k (per-sequence key range); causal and/or sliding
//       window (bottom-right aligned), fully masked K/V tiles skipped; softcap (tanh.approx.f32);
//       sinks; MHA/GQA/MQA; LSE.
//     One CTA of 384 threads per (128-row Q tile, query head, sequence): warpgroup 0 = producer (one
//     thread issues TMA bulk tensor copies of Q once and of K/V tiles of BN keys (128, or 64 for
//     Dv >= 192) into a 2-stage ring of 128B-swizzled shared memory), warpgroups 1 and 2 = consumers
//     (64 query rows each): S = Q K^T by wgmma SS, softcap / masks / online softmax in registers,
//     O += P V by wgmma RS (V N-major), O and LSE stored from registers.
//   * fallback (naive::, copied from kernels/naive_fwd.cu): everything else (paged, fp8, other head
//     dims, odd strides/alignments, varlen under CUDA-graph capture, non-Hopper devices).
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
#include <stdlib.h>
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
// keys per K/V tile: a template parameter of fwd_kernel (BN = 128, or 64 when Dv >= 192)
constexpr int kStages = 2;          // K/V ring depth
constexpr int kThreads = 384;       // warpgroup 0 = producer, 1..2 = consumers
constexpr int kConsumerWarps = 8;   // arrivals that free one K or V stage (lane 0 of each warp)
constexpr int kProducerRegs = 24;   // setmaxnreg targets: 128*24 + 256*240 = 64512 <= 65536
constexpr int kConsumerRegs = 240;

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

// 16 zero bytes to shared memory (generic proxy; the caller fences before wgmma reads them).
__device__ __forceinline__ void st_shared_zero16(uint32_t addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(0) : "memory");
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
}

// =================================================================================================
// Part 3: the fast kernel
// =================================================================================================
// D = padded q/k head dim (a multiple of 64; D = 96 runs as 128 with the TMA zero-filling columns
// 96..127), DV = padded v head dim, BN = keys per K/V tile.
template <int D, int DV, int BN>
struct Smem {
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kKBytes = BN * D * 2;   // one stage of K
  static constexpr int kVBytes = BN * DV * 2;  // one stage of V
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV = kK + kStages * kKBytes;
  static constexpr int kBar = kV + kStages * kVBytes;
  // barriers: q_full, k_full[2], v_full[2], k_empty[2], v_empty[2]
  static constexpr int kBarQ = kBar, kBarKF = kBar + 8, kBarVF = kBar + 24, kBarKE = kBar + 40,
                       kBarVE = kBar + 56;
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
};

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
template <typename T, int D, int DV, int BN, int VAR>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ Args a) {
  constexpr bool F16 = std::is_same<T, __half>::value;
  constexpr int NS = BN / 2;  // S accumulator floats per thread
  using L = Smem<D, DV, BN>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::kQ, sK = base + L::kK, sV = base + L::kV;
  const uint32_t bar_q = base + L::kBarQ;

  const int m_block = (int)(gridDim.x - 1 - blockIdx.x);  // longest causal tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int hkv = h / a.group;
  const int m0 = m_block * kBM;

  // ---- this sequence: query rows, key range (same rules as naive::naive_fwd_kernel) ------------
  int sq = a.sq, cap = a.sk, q_row0 = 0, k_row0 = 0;
  if (a.cu_q) {
    q_row0 = a.cu_q[b];
    sq = a.cu_q[b + 1] - q_row0;
    k_row0 = a.cu_k[b];
    cap = a.cu_k[b + 1] - k_row0;
  }
  if (m0 >= sq) return;  // varlen: this sequence is shorter (uniform over the CTA, before barriers)
  const int kend = a.seqused ? a.seqused[b] : cap;
  const int lp = a.leftpad ? a.leftpad[b] : 0;
  const int sk = max(0, kend - lp);  // effective key length Sk_b; key j' is stored row lp + j'
  const int diag = sk - sq;          // key position of query row 0 (bottom-right alignment)
  const int row_last = min(m0 + kBM, sq) - 1;

  // K/V tiles n_min..n_max-1 hold every key some row of this tile may see; visited last first.
  int lo = 0, hi = sk - 1;
  if (a.wl >= 0) lo = max(lo, m0 + diag - a.wl);
  if (a.wr >= 0) hi = min(hi, row_last + diag + a.wr);
  const int n_min = hi >= lo ? lo / BN : 0;
  const int n_max = hi >= lo ? hi / BN + 1 : 0;
  const int n_cnt = n_max - n_min;

  const int q_coord = q_row0 + m0;     // TMA row coordinates (varlen: packed rows, batch 0)
  const int k_coord = k_row0 + lp;
  const int tb = a.cu_q ? 0 : b;

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
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

  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    // ------------------------------------------------------------------ producer warpgroup
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0 && n_cnt > 0) {
      prefetch_tmap(&tq);
      prefetch_tmap(&tk);
      prefetch_tmap(&tv);
      mbar_arrive_expect_tx(bar_q, L::kQBytes);
#pragma unroll
      for (int c = 0; c < D / 64; ++c)
        tma_tile(sQ + c * kBM * 128, &tq, bar_q, 64 * c, q_coord, h, tb, a.q_swap);
      for (int it = 0; it < n_cnt; ++it) {
        const int n_block = n_max - 1 - it;
        const int stage = it & 1;
        const uint32_t ph = (it >> 1) & 1;
        const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
        mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
        mbar_arrive_expect_tx(kf, L::kKBytes);
#pragma unroll
        for (int c = 0; c < D / 64; ++c)
          tma_tile(sK + stage * L::kKBytes + c * BN * 128, &tk, kf, 64 * c, k_coord + n_block * BN,
                   hkv, tb, a.k_swap);
        mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
        mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
        for (int c = 0; c < DV / 64; ++c)
          tma_tile(sV + stage * L::kVBytes + c * BN * 128, &tv, vf, 64 * c, k_coord + n_block * BN,
                   hkv, tb, a.v_swap);
      }
    }
  } else {
    // ------------------------------------------------------------------ consumer warpgroups
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1;                 // rows 64cw..64cw+63 of the Q tile
    const int t = threadIdx.x & 127;
    const int lane = t & 31;
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

    const uint32_t sQw = sQ + cw * 64 * 128;  // this warpgroup's 64 rows (8 swizzle atoms)
    float s[NS];                              // S tile (64 x BN over the warpgroup), then P in fp32
    uint32_t pa[NS / 8][4];                   // P as wgmma A fragments (bf16/fp16)
    float corr[2];                            // rescale of O and l for the tile just scored

    // S = Q K^T of tile `it` into s: wait for K, issue, commit (one wgmma group); not waited here.
    auto issue_s = [&](int it) {
      mbar_wait(base + L::kBarKF + 8 * (it & 1), (it >> 1) & 1);
      const uint32_t kst = sK + (it & 1) * L::kKBytes;
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
      if (lane == 0) mbar_arrive(base + L::kBarKE + 8 * (it & 1));
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
        corr[r] = ex2(m_run[r] * a.scale_log2 - sub[r]);           // m_run = -inf: 0 (o, l are 0)
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
    auto rescale_o = [&]() {
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
      const uint32_t vst = sV + (it & 1) * L::kVBytes;
      mbar_wait(base + L::kBarVF + 8 * (it & 1), (it >> 1) & 1);
      if (a.vzero && n0 + BN > sk) {
        // V rows of keys >= Sk_b were loaded from memory we must not trust (next sequence, unused
        // cache slots: possibly NaN/Inf, and 0 * NaN = NaN in the wgmma). Zero them in shared
        // memory; whole 128-byte rows, so the swizzle does not matter. Both consumer warpgroups
        // write the same zeros (benign); each fences and syncs its own 128 threads before its wgmma.
        const int zr = max(0, sk - n0);
        const int units = (BN - zr) * 8;  // 16-byte units per 64-column chunk
#pragma unroll
        for (int c = 0; c < DV / 64; ++c)
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
      if (lane == 0) mbar_arrive(base + L::kBarVE + 8 * (it & 1));
    };

    // Ping-pong (VAR 2): a warpgroup takes its turn (bar.sync on barrier 3 + cw, 256 threads)
    // before issuing GEMMs and hands it over (bar.arrive on the other's barrier) after issuing.
    // Both warpgroups visit the same n_cnt tiles and take n_cnt + 1 turns; warpgroup 1 hands over
    // first (so warpgroup 0 starts) and skips its last hand-over, so no arrival is left pending.
    int turns = 0;
    auto take_turn = [&]() {
      if constexpr (VAR == 2) named_bar_sync(3 + cw, 256);
    };
    auto pass_turn = [&]() {
      if constexpr (VAR == 2) {
        ++turns;
        if (!(cw == 1 && turns == n_cnt + 1)) named_bar_arrive(3 + (cw ^ 1), 256);
      }
    };
    if (n_cnt > 0) {
      mbar_wait(bar_q, 0);
      if constexpr (VAR == 2) {
        if (cw == 1) named_bar_arrive(3, 256);
      }
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
          softmax(it);
          rescale_o();
          acc_to_a<F16>(s, pa);
          issue_pv(it);
          wgmma_wait<0>();
          release_v(it);
        }
      }
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
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row < sq) {
        float inv = 0.f, lse = -INFINITY;
        if (l_run[r] > 0.f) {  // at least one visible key (its exp is 1)
          const float m_nat = m_run[r] * a.lse_mul;  // running max in natural-log units
          if (a.sinks) {
            const float mn = fmaxf(m_nat, sink);
            const float e = expf(m_nat - mn);
            const float den = l_run[r] * e + expf(sink - mn);
            inv = e / den;
            lse = mn + logf(den);
          } else {
            inv = 1.f / l_run[r];
            lse = m_nat + logf(l_run[r]);
          }
        }
        T* orow = obase + (int64_t)row * a.o_rs + 2 * (t & 3);
#pragma unroll
        for (int j = 0; j < DV / 8; ++j)
          if (8 * j < a.dv)  // padded Dv (96 as 128): columns >= dv are not stored
            *reinterpret_cast<uint32_t*>(orow + 8 * j) =
                pack2<F16>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
        if (lbase && (t & 3) == 0) lbase[row] = lse;
      }
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

// The consumer schedule (fwd_kernel's VAR): 2 (measured fastest on every probe shape, NOTES v3);
// KSEEK_FA3_VARIANT=0/1/2 overrides it for A/B runs.
inline int variant() {
  const char* e = getenv("KSEEK_FA3_VARIANT");
  return (e && e[0] >= '0' && e[0] <= '2' && !e[1]) ? e[0] - '0' : 2;
}

// Launch one instantiation (the >48 KB dynamic shared memory opt-in once per device).
template <typename T, int D, int DV, int BN, int VAR>
int start(const dim3& grid, cudaStream_t stream, const CUtensorMap& tq, const CUtensorMap& tk,
          const CUtensorMap& tv, const Args& a) {
  constexpr int smem = Smem<D, DV, BN>::kTotal;
  static int attr_done[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  if (dev < 0 || dev >= 64 || !attr_done[dev]) {
    if (cudaFuncSetAttribute(fwd_kernel<T, D, DV, BN, VAR>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    if (dev >= 0 && dev < 64) attr_done[dev] = 1;
  }
  fwd_kernel<T, D, DV, BN, VAR><<<grid, kThreads, smem, stream>>>(tq, tk, tv, a);
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

  const dim3 grid((unsigned)((p->seqlen_q + kBM - 1) / kBM), (unsigned)p->heads_q, (unsigned)p->batch);
  switch (variant()) {
    case 0: return start<T, D, DV, BN, 0>(grid, stream, tq, tk, tv, a);
    case 1: return start<T, D, DV, BN, 1>(grid, stream, tq, tk, tv, a);
    default: return start<T, D, DV, BN, 2>(grid, stream, tq, tk, tv, a);
  }
}

template <typename T>
int dispatch(const kseek_params* p, cudaStream_t stream, int64_t rq, int64_t rk) {
  const int d = p->head_dim, dv = p->head_dim_v;
  if (d == 64) return launch<T, 64, 64, 128>(p, stream, rq, rk);
  if (d == 96 || d == 128) return launch<T, 128, 128, 128>(p, stream, rq, rk);  // 96: padded
  if (d == 192 && dv == 128) return launch<T, 192, 128, 128>(p, stream, rq, rk);
  if (d == 192) return launch<T, 192, 192, 64>(p, stream, rq, rk);
  if (d == 256) return launch<T, 256, 256, 64>(p, stream, rq, rk);
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
// ABI
// =================================================================================================
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

  const int r = fa3::fwd(p, stream);
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
  (void)p;
  return 0;
}

extern "C" const char* kseek_name(void) { return "fa3_hopper"; }
