// qv_fwd.cu: attention forward with FlashAttention-3's qv term (MLA-style models), on tensor cores
// (kernelseek/qv_attention.py calls it; before it, kernelseek.attention concatenated [q, qv] and [k, v]
// and ran the naive wide kernel).
//
//   score = scale * (q . k + qv . v)      q, k: D = 64;  qv, v, o: Dv = 256 or 512 (FA3's qv shapes)
//
// Everything else as kernels/kseek.h says: dense, varlen or paged K/V, seqused_k, leftpad_k, causal /
// window / attention_chunk masks (bottom-right aligned), softcap, GQA, LSE. bf16 or fp16 in and out.
// No sinks, no fp8 (FA3 refuses fp8 with qv): those calls answer KSEEK_ERR_UNSUPPORTED and
// kernelseek.attention keeps the concatenated route.
//
// Design (mma.sync m16n8k16 with fp32 accumulators, cp.async, two shared-memory stages):
// * A CTA owns kM = 16 * kRG rows of one sequence and KV head (row m = query position m / G times the
//   G query heads of the KV head, head m % G) and one key split. Its 4 * kRG warps are kRG row groups
//   of four column warps.
// * Per block of kN = 32 keys (K 32 x 64 and V 32 x Dv staged by cp.async), column warp c forms a
//   partial S (16 x 32) over its quarter of the 64 + Dv dot-product dims (q . k dims 16c..16c+15 and
//   qv . v dims c Dv/4..); the four partials meet in shared memory (a named barrier per row group) and
//   every warp of the group sums them in the same order, so all four hold the same S, max and sum.
//   Each then accumulates P V for its quarter of the Dv output columns (O: 16 x Dv/4 in registers).
//   V is read once per block for both products.
// * Sequences with <= 64 rows per KV head (decodes) run kRG = 1 with the keys split over CTAs (fp32
//   partial O and LSE in the workspace, merged by qv_combine); longer ones kRG = 4, one split.
//   A varlen batch gets both launches; each CTA skips the sequences of the other kind.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <type_traits>

#include "kseek.h"

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
};

template <int Dv, int kRG>
struct Cfg {
  static constexpr int kM = 16 * kRG;
  static constexpr int kThreads = 128 * kRG;
  static constexpr int kQRowB = (kD + Dv) * 2;          // bytes of one [q, qv] row in shared memory
  static constexpr int kVRowB = Dv * 2;
  static constexpr int kKTile = kN * kD * 2;            // 4 KiB
  static constexpr int kStage = kKTile + kN * kVRowB;   // K tile then V tile
  static constexpr int kOffStage = kM * kQRowB;         // Q first
  static constexpr int kOffS = kOffStage + 2 * kStage;  // partial S tiles: [kRG][4][16][kSPad] floats
  static constexpr int kSmem = kOffS + kRG * 4 * 16 * kSPad * 4;
  static constexpr int kCols = Dv / 4;                  // O columns per warp
  static constexpr int kNT = kCols / 8;                 // n8 tiles of O per warp
  static constexpr int kKS = kCols / 16 + 1;            // k16 steps of S per warp (qv.v part, then q.k)
  static constexpr int kTPR = kThreads / kN;            // loader threads per key row
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

__host__ __device__ __forceinline__ int64_t chunk_start(int64_t x, int c) {
  const uint32_t uc = (uint32_t)c;
  return x >= 0 ? (int64_t)((uint32_t)x / uc) * c : -(int64_t)(((uint32_t)(-x) + uc - 1u) / uc) * c;
}

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

__device__ __forceinline__ bool role_takes(int role, int mb) {
  return role == kAll || (role == kSmall ? mb <= kSmallRows : mb > kSmallRows);
}

// ---- the attention kernel ------------------------------------------------------------------------------
// grid (row tiles, Hkv, B * nsplit), block 128 * kRG.
template <typename T, int Dv, int kRG>
__global__ void __launch_bounds__(128 * kRG, kRG == 1 ? 2 : 1)
    qv_attn(const __grid_constant__ kseek_params p, const __grid_constant__ Args a) {
  using C = Cfg<Dv, kRG>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rg = warp >> 2, cq = warp & 3;        // row group, column quarter
  const int g = lane >> 2, q4 = lane & 3;         // mma fragment row / column pair
  const int hkv = blockIdx.y;
  const int b = blockIdx.z / a.nsplit, split = blockIdx.z % a.nsplit;
  const int G = a.G;

  const Seq s = seq_of(p, b);
  const int mb = s.sq * G;                        // rows of this sequence per KV head
  if (!role_takes(a.role, mb)) return;
  const int m0 = blockIdx.x * C::kM;
  if (m0 >= mb) return;

  // keys this CTA reads: the tile's visible range within its split
  int tlo, thi, dummy;
  row_range(p, s, m0 / G, tlo, dummy);
  row_range(p, s, (min(m0 + C::kM, mb) - 1) / G, dummy, thi);
  const int ks = split * a.kps;
  const int kbeg = max(tlo, ks);
  const int kend = (int)min((int64_t)thi + 1, (int64_t)ks + a.kps);
  const int nblk = kend > kbeg ? (kend - kbeg + kN - 1) / kN : 0;

  if (nblk == 0) {   // no visible key in this split: nothing to read
    if (a.nsplit > 1) {   // the merge skips a split whose lse is -inf; its O is never read
      const int64_t R = (int64_t)p.batch * p.heads_kv * a.msmall;
      for (int r = tid; r < C::kM && m0 + r < mb; r += C::kThreads)
        a.ws_lse[(int64_t)split * R + ((int64_t)b * p.heads_kv + hkv) * a.msmall + m0 + r] = -INFINITY;
    } else {
      for (int e = tid; e < C::kM * (Dv / 2); e += C::kThreads) {
        const int r = e / (Dv / 2), c = e % (Dv / 2);
        if (m0 + r >= mb) break;
        const int m = m0 + r, i = m / G, h = hkv * G + m % G;
        *reinterpret_cast<uint32_t*>(out_ptr<T>(p, s, b, i, h) + 2 * c) = 0u;
        float* lp = lse_ptr(p, s, b, i, h);
        if (lp && c == 0) *lp = -INFINITY;
      }
    }
    return;
  }
  if (a.nsplit > 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");   // the merge may start launching

  // this thread's two rows (g, g + 8 of its row group)
  int rlo[2], rhi[2];
  bool rvalid[2];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int m = m0 + rg * 16 + g + 8 * t;
    rvalid[t] = m < mb;
    if (rvalid[t]) {
      row_range(p, s, m / G, rlo[t], rhi[t]);
      rlo[t] = max(rlo[t], kbeg);
      rhi[t] = min(rhi[t], kend - 1);
    } else {
      rlo[t] = 0;
      rhi[t] = -1;
    }
  }

  const uint32_t sbase = smem_u32(smem);
  const T* K = (const T*)p.k;
  const T* V = (const T*)p.v;
  const int32_t* pages = p.page_table ? p.page_table + (int64_t)b * p.page_table_stride : nullptr;

  // ---- Q tile ([q, qv] rows) into shared memory, zeros for rows past the sequence -------------------
  {
    constexpr int kChunks = (kD + Dv) / 8;
    for (int e = tid; e < C::kM * kChunks; e += C::kThreads) {
      const int r = e / kChunks, c = e % kChunks;
      const int m = m0 + r;
      const bool ok = m < mb;
      const T* src = (const T*)p.q;
      if (ok) {
        const int i = m / G, h = hkv * G + m % G;
        if (c < kD / 8) {
          const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * p.q_row_stride
                                             : (int64_t)b * p.q_batch_stride + (int64_t)i * p.q_row_stride;
          src = (const T*)p.q + off + (int64_t)h * p.q_head_stride + c * 8;
        } else {
          const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * a.qv_rs : (int64_t)b * a.qv_bs + (int64_t)i * a.qv_rs;
          src = (const T*)a.qv + off + (int64_t)h * a.qv_hs + (c - kD / 8) * 8;
        }
      }
      cp16(sbase + swz(r, c, C::kQRowB), src, ok);
    }
  }

  // ---- K/V block loader: thread -> one key row, chunks spaced by kTPR --------------------------------
  const int lrow = tid / C::kTPR, lcol = tid % C::kTPR;
  auto load_block = [&](int blk, int stage) {
    const int jp = kbeg + blk * kN + lrow;         // logical key
    const bool ok = jp < kend;
    const T* kp = K;
    const T* vp = V;
    if (ok) {
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
    const uint32_t st = sbase + C::kOffStage + stage * C::kStage;
    for (int c = lcol; c < kD / 8; c += C::kTPR) cp16(st + swz(lrow, c, kD * 2), kp + c * 8, ok);
    for (int c = lcol; c < Dv / 8; c += C::kTPR) cp16(st + C::kKTile + swz(lrow, c, C::kVRowB), vp + c * 8, ok);
  };

  load_block(0, 0);
  cp_commit();

  float o[C::kNT][4];
#pragma unroll
  for (int n = 0; n < C::kNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow_[2] = {0.f, 0.f};
  const float smul = p.scale;
  const bool capped = p.softcap > 0.f;
  float* sS = reinterpret_cast<float*>(smem + C::kOffS) + rg * 4 * 16 * kSPad;
  const uint32_t qrow_base = sbase + (uint32_t)(rg * 16) * C::kQRowB;

  for (int blk = 0; blk < nblk; ++blk) {
    if (blk + 1 < nblk) {
      load_block(blk + 1, (blk + 1) & 1);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();
    const uint32_t st = sbase + C::kOffStage + (blk & 1) * C::kStage;
    const uint32_t sv = st + C::kKTile;

    // partial S over this warp's dims: qv . v (columns cq*kCols ..), then q . k (dims 16 cq ..)
    float sp[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) sp[n][0] = sp[n][1] = sp[n][2] = sp[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < C::kKS; ++kk) {
      const bool qk = kk == C::kKS - 1;
      // A: rows 0-15 of the row group; [q, qv] chunk of dims
      const int qchunk = qk ? 2 * cq : kD / 8 + (cq * C::kCols) / 8 + 2 * kk;
      uint32_t af[4];
      ldsm4(qrow_base + swz((lane & 7) + ((lane >> 3) & 1) * 8, qchunk + (lane >> 4), C::kQRowB), af);
#pragma unroll
      for (int np = 0; np < 2; ++np) {   // keys 16 np .. 16 np + 15
        const int key = np * 16 + (lane & 7) + (lane >> 4) * 8;
        uint32_t bf[4];
        if (qk) {
          ldsm4(st + swz(key, 2 * cq + ((lane >> 3) & 1), kD * 2), bf);
        } else {
          ldsm4(sv + swz(key, (cq * C::kCols) / 8 + 2 * kk + ((lane >> 3) & 1), C::kVRowB), bf);
        }
        mma<T>(sp[2 * np], af, bf[0], bf[1]);
        mma<T>(sp[2 * np + 1], af, bf[2], bf[3]);
      }
    }
    // the four partials meet: store, barrier of the row group, sum in a fixed order
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      *reinterpret_cast<float2*>(sS + (cq * 16 + g) * kSPad + n * 8 + 2 * q4) = make_float2(sp[n][0], sp[n][1]);
      *reinterpret_cast<float2*>(sS + (cq * 16 + g + 8) * kSPad + n * 8 + 2 * q4) = make_float2(sp[n][2], sp[n][3]);
    }
    if (kRG == 1) __syncthreads(); else bar_named(1 + rg, 128);
    float sc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float2 x = *reinterpret_cast<const float2*>(sS + (w * 16 + g) * kSPad + n * 8 + 2 * q4);
        const float2 y = *reinterpret_cast<const float2*>(sS + (w * 16 + g + 8) * kSPad + n * 8 + 2 * q4);
        sc[n][0] += x.x; sc[n][1] += x.y; sc[n][2] += y.x; sc[n][3] += y.y;
      }
    }

    // scores (log2 units), masks, online softmax
    const int kb = kbeg + blk * kN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = e >> 1;
        const int j = kb + n * 8 + 2 * q4 + (e & 1);
        float x = sc[n][e] * smul;
        if (capped) x = p.softcap * tanhf(x / p.softcap);
        x = (j >= rlo[t] && j <= rhi[t]) ? x * kLog2e : -INFINITY;
        sc[n][e] = x;
        mx[t] = fmaxf(mx[t], x);
      }
    }
    float alpha[2], muse[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      mx[t] = fmaxf(mx[t], __shfl_xor_sync(0xffffffffu, mx[t], 1));
      mx[t] = fmaxf(mx[t], __shfl_xor_sync(0xffffffffu, mx[t], 2));
      const float mn = fmaxf(mrow[t], mx[t]);
      muse[t] = mn == -INFINITY ? 0.f : mn;
      alpha[t] = exp2f(mrow[t] - muse[t]);          // 0 when the old max is -inf
      mrow[t] = mn;
      lrow_[t] *= alpha[t];
    }
    uint32_t pa[2][4];   // P as A fragments of the two k16 steps of P V
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float p0 = exp2f(sc[n][0] - muse[0]), p1 = exp2f(sc[n][1] - muse[0]);
      const float p2 = exp2f(sc[n][2] - muse[1]), p3 = exp2f(sc[n][3] - muse[1]);
      lrow_[0] += p0 + p1;
      lrow_[1] += p2 + p3;
      pa[n >> 1][(n & 1) * 2] = pack<T>(p0, p1);
      pa[n >> 1][(n & 1) * 2 + 1] = pack<T>(p2, p3);
    }
#pragma unroll
    for (int n = 0; n < C::kNT; ++n) {
      o[n][0] *= alpha[0]; o[n][1] *= alpha[0];
      o[n][2] *= alpha[1]; o[n][3] *= alpha[1];
    }
    // O += P V for this warp's columns
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int key = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int np = 0; np < C::kNT / 2; ++np) {
        uint32_t bf[4];
        ldsm4t(sv + swz(key, (cq * C::kCols) / 8 + 2 * np + (lane >> 4), C::kVRowB), bf);
        mma<T>(o[2 * np], pa[kk], bf[0], bf[1]);
        mma<T>(o[2 * np + 1], pa[kk], bf[2], bf[3]);
      }
    }
    __syncthreads();   // the stage and the partial-S tiles are free for the next block
  }
  cp_wait<0>();

  // ---- epilogue: o / l (bf16 / fp16) and lse, or the split's fp32 partials --------------------------
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    lrow_[t] += __shfl_xor_sync(0xffffffffu, lrow_[t], 1);
    lrow_[t] += __shfl_xor_sync(0xffffffffu, lrow_[t], 2);
  }
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    if (!rvalid[t]) continue;
    const int m = m0 + rg * 16 + g + 8 * t;
    const int i = m / G, h = hkv * G + m % G;
    const float l = lrow_[t];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? (mrow[t] + log2f(l)) * kLn2 : -INFINITY;
    if (a.nsplit == 1) {
      T* op = out_ptr<T>(p, s, b, i, h) + cq * C::kCols + 2 * q4;
#pragma unroll
      for (int n = 0; n < C::kNT; ++n)
        *reinterpret_cast<uint32_t*>(op + n * 8) = pack<T>(o[n][2 * t] * inv, o[n][2 * t + 1] * inv);
      float* lp = lse_ptr(p, s, b, i, h);
      if (lp && cq == 0 && q4 == 0) *lp = lse;
    } else {
      const int64_t R = (int64_t)p.batch * p.heads_kv * a.msmall;
      const int64_t row = ((int64_t)b * p.heads_kv + hkv) * a.msmall + m;
      if (cq == 0 && q4 == 0) a.ws_lse[(int64_t)split * R + row] = lse;
      if (l == 0.f) continue;   // lse -inf: the merge skips this split's O
      float* wo = a.ws_o + ((int64_t)split * R + row) * Dv + cq * C::kCols + 2 * q4;
#pragma unroll
      for (int n = 0; n < C::kNT; ++n)
        *reinterpret_cast<float2*>(wo + n * 8) = make_float2(o[n][2 * t] * inv, o[n][2 * t + 1] * inv);
    }
  }
}

// ---- merge of the key splits: one warp per row --------------------------------------------------------
template <typename T, int Dv>
__global__ void __launch_bounds__(128) qv_combine(const __grid_constant__ kseek_params p,
                                                  const __grid_constant__ Args a) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");   // launched early (PDL): wait for the splits' writes
  const int lane = threadIdx.x & 31;
  const int64_t R = (int64_t)p.batch * p.heads_kv * a.msmall;
  const int64_t row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
  if (row >= R) return;
  const int m = (int)(row % a.msmall);
  const int hkv = (int)((row / a.msmall) % p.heads_kv);
  const int b = (int)(row / ((int64_t)a.msmall * p.heads_kv));
  const Seq s = seq_of(p, b);
  const int mb = s.sq * a.G;
  if (!role_takes(a.role, mb) || m >= mb) return;
  float mx = -INFINITY;
  for (int sp = lane; sp < a.nsplit; sp += 32) mx = fmaxf(mx, a.ws_lse[sp * R + row]);
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const int i = m / a.G, h = hkv * a.G + m % a.G;
  T* op = out_ptr<T>(p, s, b, i, h);
  float* lp = lse_ptr(p, s, b, i, h);
  constexpr int kPer = Dv / 128;   // float4 groups per lane
  float acc[kPer][4];
#pragma unroll
  for (int u = 0; u < kPer; ++u) acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.f;
  float den = 0.f;
  if (mx != -INFINITY) {
    for (int sp = 0; sp < a.nsplit; ++sp) {
      const float ls = a.ws_lse[sp * R + row];
      if (ls == -INFINITY) continue;
      const float w = __expf(ls - mx);
      den += w;
      const float* src = a.ws_o + (sp * R + row) * Dv;
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const float4 x = *reinterpret_cast<const float4*>(src + u * 128 + lane * 4);
        acc[u][0] += w * x.x; acc[u][1] += w * x.y; acc[u][2] += w * x.z; acc[u][3] += w * x.w;
      }
    }
  }
  const float inv = den > 0.f ? 1.f / den : 0.f;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    uint32_t* dst = reinterpret_cast<uint32_t*>(op + u * 128 + lane * 4);   // 4-byte aligned (even strides)
    dst[0] = pack<T>(acc[u][0] * inv, acc[u][1] * inv);
    dst[1] = pack<T>(acc[u][2] * inv, acc[u][3] * inv);
  }
  if (lp && lane == 0) *lp = den > 0.f ? mx + logf(den) : -INFINITY;
}

// ---- host ------------------------------------------------------------------------------------------------
struct Plan {
  int G, rows, small_tiles, big_tiles, small_role, nsplit, kps, msmall;
  bool small, big;
};

static int sm_count() {
  static int cached[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
  if (!cached[dev]) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
    cached[dev] = n;
  }
  return cached[dev];
}

static Plan make_plan(const kseek_params* p) {
  Plan pl{};
  pl.G = p->heads_q / p->heads_kv;
  pl.rows = p->seqlen_q * pl.G;
  const bool varlen = p->cu_seqlens_q != nullptr;
  pl.small = pl.rows <= kSmallRows || varlen;
  pl.big = pl.rows > kSmallRows;
  pl.small_role = pl.rows <= kSmallRows ? kAll : kSmall;
  pl.msmall = pl.rows <= kSmallRows ? ((pl.rows + 15) / 16) * 16 : kSmallRows;
  pl.small_tiles = pl.msmall / 16;
  pl.big_tiles = (pl.rows + 63) / 64;
  // key splits of the small launch: up to 8 CTAs per SM, at least 128 keys per split (64 when forced by
  // num_splits). Measured on the H200 (tools/qv_probe.py, session 18): 4 decodes of <= 2049 keys were fastest
  // at 13-22 splits (33 splits of 64 keys: 0.0262 ms, 13: 0.0250), 128 decodes of 1k-8k keys at 8 (5: 0.304 ms,
  // 8: 0.284); this rule gives 17 and 9.
  const int sk = p->seqlen_k;
  const int ctas = p->batch * p->heads_kv * (pl.rows <= kSmallRows ? pl.small_tiles : 1);
  int ns = p->num_splits > 0 ? p->num_splits : (8 * sm_count() + ctas - 1) / ctas;
  ns = std::min(ns, std::max(1, (sk + (p->num_splits > 0 ? 63 : 127)) / (p->num_splits > 0 ? 64 : 128)));
  ns = std::max(1, std::min(ns, kMaxSplits));
  pl.kps = ((std::max(sk, 1) + ns - 1) / ns + kN - 1) / kN * kN;
  pl.nsplit = std::max(1, (std::max(sk, 1) + pl.kps - 1) / pl.kps);
  if (pl.nsplit == 1) pl.kps = INT32_MAX / 2;
  return pl;
}

static size_t ws_bytes(const kseek_params* p, const Plan& pl) {
  if (!pl.small || pl.nsplit == 1) return 0;
  const size_t R = (size_t)p->batch * p->heads_kv * pl.msmall;
  return (size_t)pl.nsplit * R * ((size_t)p->head_dim_v + 1) * sizeof(float) + 256;
}

static bool aligned16(const void* x) { return ((uintptr_t)x & 15) == 0; }

static int check(const kseek_params* p, const void* qv, int64_t qv_bs, int64_t qv_rs, int64_t qv_hs) {
  if (!p) return KSEEK_ERR_INVALID;
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (!p->q || !p->k || !p->v || !p->o || !qv) return KSEEK_ERR_INVALID;
  if (p->batch <= 0 || p->heads_q <= 0 || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return KSEEK_ERR_INVALID;
  if (p->seqlen_q < 0 || p->seqlen_k < 0 || p->attention_chunk < 0) return KSEEK_ERR_INVALID;
  if (p->page_table && p->page_size <= 0) return KSEEK_ERR_INVALID;
  if ((p->cu_seqlens_k != nullptr) && p->page_table) return KSEEK_ERR_INVALID;
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return KSEEK_ERR_UNSUPPORTED;
  if (p->out_dtype != p->dtype) return KSEEK_ERR_UNSUPPORTED;
  if (p->head_dim != kD || (p->head_dim_v != 256 && p->head_dim_v != 512)) return KSEEK_ERR_UNSUPPORTED;
  if (p->sinks || p->q_descale || p->k_descale || p->v_descale) return KSEEK_ERR_UNSUPPORTED;
  // 16-byte cp.async of every row chunk; 4-byte stores of o
  const int64_t s16[] = {p->q_row_stride, p->q_head_stride, p->k_row_stride, p->k_head_stride, p->v_row_stride,
                         p->v_head_stride, qv_rs, qv_hs, p->cu_seqlens_q ? 0 : p->q_batch_stride,
                         p->cu_seqlens_q ? 0 : qv_bs, (p->cu_seqlens_k) ? 0 : p->k_batch_stride,
                         (p->cu_seqlens_k) ? 0 : p->v_batch_stride};
  for (int64_t x : s16)
    if (x % 8) return KSEEK_ERR_UNSUPPORTED;
  if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v) || !aligned16(qv)) return KSEEK_ERR_UNSUPPORTED;
  if ((p->o_row_stride | p->o_head_stride | (p->cu_seqlens_q ? 0 : p->o_batch_stride)) & 1) return KSEEK_ERR_UNSUPPORTED;
  if ((uintptr_t)p->o & 3) return KSEEK_ERR_UNSUPPORTED;
  return KSEEK_OK;
}

#define QV_CK(x)                                    \
  do {                                              \
    if ((x) != cudaSuccess) return KSEEK_ERR_CUDA;  \
  } while (0)

template <typename T, int Dv, int kRG>
static int launch_attn(const kseek_params* p, const Args& a, int tiles, cudaStream_t st) {
  using C = Cfg<Dv, kRG>;
  static bool attr[64] = {false};   // per instantiation and device; setting it twice is harmless
  int dev = 0;
  QV_CK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64 || !attr[dev]) {
    QV_CK(cudaFuncSetAttribute(qv_attn<T, Dv, kRG>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    if (dev >= 0 && dev < 64) attr[dev] = true;
  }
  dim3 grid(tiles, p->heads_kv, p->batch * a.nsplit);
  qv_attn<T, Dv, kRG><<<grid, C::kThreads, C::kSmem, st>>>(*p, a);
  QV_CK(cudaGetLastError());
  return KSEEK_OK;
}

template <typename T, int Dv>
static int run(const kseek_params* p, Args a, const Plan& pl, cudaStream_t st) {
  if (pl.big) {
    Args ab = a;
    ab.role = pl.small ? kBig : kAll;
    ab.nsplit = 1;
    ab.kps = INT32_MAX / 2;
    const int rc = launch_attn<T, Dv, 4>(p, ab, pl.big_tiles, st);
    if (rc) return rc;
  }
  if (pl.small) {
    a.role = pl.small_role;
    int rc = launch_attn<T, Dv, 1>(p, a, pl.small_tiles, st);
    if (rc) return rc;
    if (a.nsplit > 1) {
      const int64_t R = (int64_t)p->batch * p->heads_kv * a.msmall;
      // programmatic dependent launch: the merge's launch overlaps the splits' tail (griddepcontrol
      // in both kernels); a plain launch where the attribute is refused
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((unsigned)((R + 3) / 4));
      cfg.blockDim = dim3(128);
      cfg.stream = st;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at;
      cfg.numAttrs = 1;
      if (cudaLaunchKernelEx(&cfg, qv_combine<T, Dv>, *p, a) != cudaSuccess) {
        (void)cudaGetLastError();
        qv_combine<T, Dv><<<cfg.gridDim, 128, 0, st>>>(*p, a);
      }
      QV_CK(cudaGetLastError());
    }
  }
  return KSEEK_OK;
}

static int g_last_splits = 0;

}  // namespace qv

extern "C" int kseek_qv_abi(void) { return KSEEK_QV_ABI_VERSION; }

extern "C" const char* kseek_qv_name(void) { return "qv_fwd (mma.sync, D 64 + Dv 256/512)"; }

// Splits the last kseek_qv_fwd call used (1 = none); for tests and timing notes.
extern "C" int kseek_qv_last_splits(void) { return qv::g_last_splits; }

extern "C" size_t kseek_qv_workspace_bytes(const kseek_params* p) {
  if (!p || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return 0;
  return qv::ws_bytes(p, qv::make_plan(p));
}

// q, k, v, o, lse and the rest as kseek.h says (head_dim 64 = q/k, head_dim_v = qv/v/o); qv has q's
// layout with Dv columns: dense [B, Sq, Hq, Dv] or packed [total_q, Hq, Dv] (batch stride unused).
extern "C" int kseek_qv_fwd(const kseek_params* p, const void* qv_ptr, int64_t qv_batch_stride,
                            int64_t qv_row_stride, int64_t qv_head_stride, cudaStream_t stream) {
  const int rc = qv::check(p, qv_ptr, qv_batch_stride, qv_row_stride, qv_head_stride);
  if (rc) return rc;
  if (p->seqlen_q == 0) return KSEEK_OK;
  const qv::Plan pl = qv::make_plan(p);
  const size_t need = qv::ws_bytes(p, pl);
  if (need && (!p->workspace || p->workspace_bytes < need)) return KSEEK_ERR_WORKSPACE;
  qv::Args a{};
  a.qv = qv_ptr;
  a.qv_bs = qv_batch_stride;
  a.qv_rs = qv_row_stride;
  a.qv_hs = qv_head_stride;
  a.G = pl.G;
  a.msmall = pl.msmall;
  a.nsplit = pl.small ? pl.nsplit : 1;
  a.kps = pl.small ? pl.kps : INT32_MAX / 2;
  if (need) {
    const size_t R = (size_t)p->batch * p->heads_kv * pl.msmall;
    a.ws_lse = (float*)p->workspace;
    const size_t lse_b = ((size_t)pl.nsplit * R * sizeof(float) + 255) / 256 * 256;
    a.ws_o = (float*)((char*)p->workspace + lse_b);
  }
  qv::g_last_splits = a.nsplit;
  const bool bf = p->dtype == KSEEK_BF16;
  if (p->head_dim_v == 512)
    return bf ? qv::run<__nv_bfloat16, 512>(p, a, pl, stream) : qv::run<__half, 512>(p, a, pl, stream);
  return bf ? qv::run<__nv_bfloat16, 256>(p, a, pl, stream) : qv::run<__half, 256>(p, a, pl, stream);
}
