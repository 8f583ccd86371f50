// qv_common.cuh: what both qv kernels share (kernels/qv_fwd/qv_fwd.cu says what the kernel computes):
// the launch arguments, the mma.sync / ldmatrix / cp.async wrappers, one sequence's geometry, the
// visible-key range of a query row (kseek.h's masks) and where a row's o / lse go.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "../kseek.h"
#include "../naive_core.cuh"

#define KSEEK_QV_ABI_VERSION 1

namespace qv {

constexpr int kD = 64;            // q / k head dim
constexpr int kN = 32;            // keys per block
constexpr int kSmallRows = 64;    // rows per KV head up to which a sequence runs the split kRG = 1 kernel
constexpr int kMaxSplits = 64;
constexpr int kSPad = 40;         // floats per row of a partial-S tile (32 + 8: conflict-free float2 stores)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

enum Role { kAll = 0, kSmall = 1, kBig = 2 };

struct Args {
  const void* qv;
  int64_t qv_bs, qv_rs, qv_hs;    // qv strides (elements); batch stride unused for packed q
  int G;                          // query heads per KV head
  int msmall;                     // rows per (sequence, KV head) in the workspace (split launches)
  int role;
  int nsplit;                     // key splits (1: write o / lse directly)
  int kps;                        // keys per split
  float* ws_o;                    // [nsplit][B * Hkv * msmall][Dv]
  float* ws_lse;                  // [nsplit][B * Hkv * msmall]
  int compact;                    // qv_ws.cuh, varlen: blockIdx.x walks the long sequences' tiles (find_tile)
};


// ---- primitives (PTX ISA: mma.sync m16n8k16, ldmatrix, cp.async) ------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm4t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

__device__ __forceinline__ void bar_named(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n)); }

// Byte offset of 16-byte chunk c of row r in a row-major tile of row_b bytes: the chunk index XOR
// (r & 7) within its group of 8, so ldmatrix's 8 row addresses hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c, int row_b) { return r * row_b + ((c ^ (r & 7)) << 4); }

// ---- one sequence's geometry -------------------------------------------------------------------------
struct Seq {
  int64_t q_row0;   // first packed row (varlen q), else 0
  int sq;           // query rows
  int64_t k_row0;   // first packed key row (varlen k), else 0
  int sk;           // effective keys (after seqused_k, leftpad)
  int lp;           // leftpad
};

__device__ __forceinline__ Seq seq_of(const kseek_params& p, int b) {
  Seq s;
  s.q_row0 = 0;
  s.sq = p.seqlen_q;
  if (p.cu_seqlens_q) {
    s.q_row0 = p.cu_seqlens_q[b];
    s.sq = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  }
  s.k_row0 = 0;
  int cap = p.seqlen_k;
  if (p.cu_seqlens_k) {
    s.k_row0 = p.cu_seqlens_k[b];
    cap = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
  }
  const int end = p.seqused_k ? p.seqused_k[b] : cap;
  s.lp = p.leftpad_k ? p.leftpad_k[b] : 0;
  s.sk = max(0, end - s.lp);
  return s;
}

using naive::chunk_start;   // kernels/naive_core.cuh: floor-division chunk start (kseek.h ABI 3)

// Visible keys [lo, hi] of query position i (kseek.h: bottom-right aligned window, causal = right 0,
// attention_chunk). Both ends are non-decreasing in i, so a tile's keys are [lo(first), hi(last)].
__device__ __forceinline__ void row_range(const kseek_params& p, const Seq& s, int i, int& lo, int& hi) {
  int wl = p.window_left, wr = p.window_right;
  if (p.causal) wr = 0;
  const int64_t diag = (int64_t)i + s.sk - s.sq;
  int64_t l = 0, h = (int64_t)s.sk - 1;
  if (wl >= 0) l = max(l, diag - wl);
  if (wr >= 0) h = min(h, diag + wr);
  if (p.attention_chunk > 0) {
    const int64_t c0 = chunk_start(diag, p.attention_chunk);
    l = max(l, c0);
    h = min(h, c0 + p.attention_chunk - 1);
  }
  lo = (int)min(l, (int64_t)INT32_MAX);
  hi = (int)max(h, (int64_t)-1);
}

// Where o / lse of row m (query position i, head h) of sequence b go.
// The K and V rows of logical key jp of sequence s (b: its batch index; pages: its page-table row or null)
// in KV head hkv: paged, packed (cu_seqlens_k) or dense; the three kernels' loaders share it.
template <typename T>
__device__ __forceinline__ void kv_rows(const kseek_params& p, const Seq& s, const int32_t* pages, int b, int hkv,
                                        int jp, const T* K, const T* V, const T*& kp, const T*& vp) {
  const int64_t j = (int64_t)jp + s.lp;
  int64_t ko, vo;
  if (pages) {
    const int64_t pg = pages[j / p.page_size], slot = j % p.page_size;
    ko = pg * p.k_batch_stride + slot * p.k_row_stride;
    vo = pg * p.v_batch_stride + slot * p.v_row_stride;
  } else if (p.cu_seqlens_k) {
    ko = (s.k_row0 + j) * p.k_row_stride;
    vo = (s.k_row0 + j) * p.v_row_stride;
  } else {
    ko = (int64_t)b * p.k_batch_stride + j * p.k_row_stride;
    vo = (int64_t)b * p.v_batch_stride + j * p.v_row_stride;
  }
  kp = K + ko + (int64_t)hkv * p.k_head_stride;
  vp = V + vo + (int64_t)hkv * p.v_head_stride;
}

template <typename T>
__device__ __forceinline__ T* out_ptr(const kseek_params& p, const Seq& s, int b, int i, int h) {
  const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * p.o_row_stride + (int64_t)h * p.o_head_stride
                                     : (int64_t)b * p.o_batch_stride + (int64_t)i * p.o_row_stride +
                                           (int64_t)h * p.o_head_stride;
  return (T*)p.o + off;
}
__device__ __forceinline__ float* lse_ptr(const kseek_params& p, const Seq& s, int b, int i, int h) {
  if (!p.lse) return nullptr;
  return p.cu_seqlens_q ? p.lse + (int64_t)h * p.lse_head_stride + s.q_row0 + i
                        : p.lse + (int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride + i;
}

// The keys [lo, hi) a 64-row tile (rows m0 .. min(m0 + kM, mb) - 1, G rows per query) reads, clipped to
// [k0, k1), and its kN-key blocks from lo
template <int kM, int kN>
__device__ __forceinline__ int tile_keys(const kseek_params& p, const Seq& s, int G, int m0, int mb, int64_t k0,
                                         int64_t k1, int& lo, int& hi) {
  int tlo, thi, dummy;
  row_range(p, s, m0 / G, tlo, dummy);
  row_range(p, s, (min(m0 + kM, mb) - 1) / G, dummy, thi);
  lo = (int)max((int64_t)tlo, k0);
  hi = (int)min((int64_t)thi + 1, k1);
  return hi > lo ? (hi - lo + kN - 1) / kN : 0;
}

// O = 0 and lse = -inf for the rows m0 .. min(m0 + kM, mb) - 1 of a tile that sees no key (Dv columns);
// the calling threads take 16-bit pairs first, first + stride, ...
template <typename T, int kM, int Dv>
__device__ __forceinline__ void zero_rows(const kseek_params& p, const Seq& s, int b, int hkv, int G, int m0, int mb,
                                          int first, int stride) {
  for (int e = first; e < kM * (Dv / 2); e += stride) {
    const int r = e / (Dv / 2), c = e % (Dv / 2);
    if (m0 + r >= mb) break;
    const int m = m0 + r, i = m / G, h = hkv * G + m % G;
    *reinterpret_cast<uint32_t*>(out_ptr<T>(p, s, b, i, h) + 2 * c) = 0u;
    float* lp = lse_ptr(p, s, b, i, h);
    if (lp && c == 0) *lp = -INFINITY;
  }
}

// A whole-sequence tile's keys (tile_keys over all keys), or, where it sees none, its rows zeroed (zero_rows)
// and 0: the long-sequence kernels' first step.
template <typename T, int kM, int kN, int Dv>
__device__ __forceinline__ int tile_keys_or_zero(const kseek_params& p, const Seq& s, int b, int hkv, int G, int m0,
                                                 int mb, int tid, int nthreads, int& lo, int& hi) {
  const int n = tile_keys<kM, kN>(p, s, G, m0, mb, 0, INT32_MAX, lo, hi);
  if (n == 0) zero_rows<T, kM, Dv>(p, s, b, hkv, G, m0, mb, tid, nthreads);
  return n;
}

__device__ __forceinline__ bool role_takes(int role, int mb) {
  return role == kAll || (role == kSmall ? mb <= kSmallRows : mb > kSmallRows);
}


}  // namespace qv
