// decode.cuh: split-KV decode for paged and dense KV caches (namespace dec; mma.sync + cp.async).
// One CTA of 4 warps per (batch, KV head, split, 16-row query tile): the G query heads of a KV
// head times the Sq rows form the M rows of an m16 MMA tile; each warp streams every 4th 16-key
// chunk through its own cp.async ring; several splits write fp32 partials to the workspace and a
// combine kernel merges them. fp8 e4m3 q/k/v (o bf16), only in the KSEEK_FA3_DECODE_FP8=1 build:
// splitkv_f8_kernel, the same structure over byte tiles and 32-key warp stages. Entry points: dec::supported, dec::workspace_bytes, dec::run (the
// dispatch in fa3_hopper.cu decides which calls come here). Design, split heuristic and workspace
// layout: tests/probes/README_decode.md.
#pragma once
#include <algorithm>
#include <type_traits>

#include <cuda_fp8.h>

#include "hopper_primitives.cuh"
#include "variants.cuh"

namespace dec {

using fa3::clamp_window;
using fa3::current_device;
using fa3::ex2;
using fa3::kMaxDev;
using fa3::ldsm_x4;
using fa3::ldsm_x4_trans;
using fa3::pack2;
using fa3::smem_u32;

// ------------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------------
constexpr int kWarps = 4;          // warps per CTA, each with its own key slice and cp.async ring
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 16;          // keys per warp stage (one k16 step of P V, two n8 tiles of S)
constexpr int kRows = 16;          // query rows per CTA (one m16 tile)
constexpr int kMaxRows = 64;       // Sq * G limit (up to 4 query tiles per KV head)
constexpr int kMaxSplits = 256;

// D = head dim of Q and K, Dv = head dim of V and O: D == Dv in {64, 128, 256}, and (192, 128) only
// in the KSEEK_FA3_DECODE_DV=1 build (DeepSeek-style; NOTES v13g).
// kWide: the wide form (splitkv_wide), for grids of at most one CTA per SM (an explicit num_splits, few
// sequences): 8 warps instead of 4, each with the usual ring, 1 CTA per SM by shared memory (v22: 4 warps
// with twice the stages gained only 14% there; 8 warps halve each warp's serial chain of chunks).
template <int D, int Dv = D, bool kWide = false>
struct Cfg {
  static constexpr int kDv = Dv;
  static constexpr int kW = kWide ? 2 * kWarps : kWarps;  // warps per CTA
  static_assert((D == Dv && (D == 64 || D == 128 || D == 256)) || (fa3::build::kDecodeDv && D == 192 && Dv == 128),
                "head dims");
  // (192, 128): 4 stages of 10 KiB, 166.5 KiB per CTA, 1 CTA per SM: 3 stages in flight per warp,
  // 120 KiB per SM, as hd128 (2 CTAs x 4 warps x 2 x 8 KiB) and hd256 (4 warps x 2 x 16 KiB)
  static constexpr int kStages = (D == 64 || D != Dv) ? 4 : 3;  // ring depth per warp
  static_assert(!kWide || (D == Dv && D <= 128), "wide form: hd64 and hd128 only");
  static constexpr int kRowB = D * 2;                     // bytes of one K/Q row in smem
  static constexpr int kChunks = D / 8;                   // 16-byte chunks per K/Q row
  static constexpr int kChunksV = Dv / 8;                 // 16-byte chunks per V row
  static constexpr int kTile = kKeys * kRowB;             // one K tile of a stage (the V tile follows)
  static constexpr int kTileV = kKeys * Dv * 2;           // one V tile
  static constexpr int kStage = kTile + kTileV;           // K tile then V tile
  static constexpr int kRing = kW * kStages * kStage;     // all warps' rings
  static constexpr int kQ = kRows * kRowB;                // the Q tile
  static constexpr int kOPad = Dv + 4;                    // floats per row of the merge buffer
  static constexpr int kMerge = kW * kRows * kOPad * 4;
  static_assert(kMerge <= kRing, "merge buffer reuses the ring");
  static constexpr int kOffQ = kRing;
  static constexpr int kOffStat = kOffQ + kQ;             // m[kWarps][16], l[kWarps][16]
  static constexpr int kSmem = kOffStat + 2 * kW * kRows * 4;
  static constexpr bool kQReg = D <= 128 || D != Dv;      // Q fragments held in registers (192: 48)
};

// Kernel arguments (by value).
struct Args {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  float* ws_o;      // [nsplit][R][Dv] fp32 partial O (normalized), R = B * Hkv * M
  float* ws_lse;    // [nsplit][R] partial LSE (natural log), -inf when the split saw no key
  const int32_t* seqused;
  const int32_t* leftpad;
  const int32_t* pt;
  const float* sinks;
  const int32_t* cu_q;  // packed queries [total_q, Hq, D] (cu_seqlens_q), or NULL (dense)
  int64_t q_bs, q_rs, q_hs;
  int64_t k_bs, k_rs, k_hs;   // paged: k_bs is the page stride
  int64_t v_bs, v_rs, v_hs;
  int64_t o_bs, o_rs, o_hs;
  int64_t lse_bs, lse_hs;
  int pt_stride, ps, ps_shift, paged;   // ps_shift = log2(ps) when ps is a power of two, else -1
  int B, Hkv, G, sq, sk, M, mtiles, nsplit, R;  // packed queries: sq = the rows a sequence may have
                                                // here (sequences with more are left to the prefill
                                                // launch of a mixed call), M = sq * G
  int wl, wr;                           // -1 = unbounded; causal already folded into wr = 0
  int chunk;                            // attention_chunk (kseek.h), 0 = off
  int softcap_on;
  float scale_log2;                     // no softcap: scale*log2(e); softcap: scale/softcap
  float cap_log2;                       // softcap*log2(e)
  int mloop;                            // 1: a CTA walks its (sequence, split, KV head)'s row tiles
                                        // (packed queries; the grid has no mt), 0: one tile per CTA
                                        // (last: the fields before keep their offsets, v24)
};

// ------------------------------------------------------------------------------------------------
// Device helpers (PTX)
// ------------------------------------------------------------------------------------------------
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


// Byte offset of 16-byte chunk c of row r in a swizzled tile (rows of D*2 bytes, D*2 % 128 == 0):
// the low three bits of the chunk index are XORed with r % 8, so the 8 rows an ldmatrix reads at
// one logical chunk fall into 8 different 16-byte bank groups. Rows of 384 bytes (D = 192) as well:
// the XOR stays inside the chunk's 128-byte group and every row starts on a 128-byte multiple, so
// the bank group of (r, c) is (c ^ r) % 8, as at 128 and 256 bytes.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return (uint32_t)(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

// Visible key range (positions after leftpad, inclusive) of query row i of a sequence with sq query
// rows; lo > hi when empty.
// attention_chunk: also within the row's own chunk.
__device__ __forceinline__ int row_lo(const Args& a, int i, int sk, int sq) {
  const int lo = a.wl >= 0 ? max(0, i + sk - sq - a.wl) : 0;
  return a.chunk > 0 ? max(lo, fa3::chunk_lo(i + sk - sq, a.chunk)) : lo;
}
__device__ __forceinline__ int row_hi(const Args& a, int i, int sk, int sq) {
  const int hi = a.wr >= 0 ? min(sk - 1, i + sk - sq + a.wr) : sk - 1;
  return a.chunk > 0 ? min(hi, fa3::chunk_lo(i + sk - sq, a.chunk) + a.chunk - 1) : hi;
}

// Sequence b's query rows and the element offsets of its row 0 in q, o and lse. Packed queries:
// false when this launch leaves the sequence to the prefill (more than a.sq rows).
struct SeqQ {
  int sq;
  int64_t q, o, lse;
};
__device__ __forceinline__ bool seq_q(const Args& a, int b, SeqQ& s) {
  if (a.cu_q) {
    const int r0 = __ldg(a.cu_q + b);
    s.sq = __ldg(a.cu_q + b + 1) - r0;
    s.q = (int64_t)r0 * a.q_rs;
    s.o = (int64_t)r0 * a.o_rs;
    s.lse = r0;  // lse [Hq, total_q]
    return s.sq <= a.sq;
  }
  s.sq = a.sq;
  s.q = (int64_t)b * a.q_bs;
  s.o = (int64_t)b * a.o_bs;
  s.lse = (int64_t)b * a.lse_bs;
  return true;
}


// ------------------------------------------------------------------------------------------------
// Main kernel
// ------------------------------------------------------------------------------------------------
// The body of splitkv_kernel (kWide false) and splitkv_wide (true): the row tile `bid` names (as blockIdx.x
// below). false when it has no rows (its sequence is a mixed call's long one, or the tile is past its rows):
// neither has any later tile of the same (sequence, split, KV head).
template <typename T, int D, int Dv, bool kWide>
__device__ __forceinline__ bool splitkv_body(const Args& a, int bid) {
  using C = Cfg<D, Dv, kWide>;
  constexpr int S = C::kStages;
  constexpr int kWarps = C::kW, kThreads = 32 * C::kW;   // (the namespace's 4 and 128 unless wide)
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);

  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int g = lane >> 2, q4 = lane & 3;

  // bid = ((b * nsplit + split) * Hkv + h) * mtiles + mt: the query tiles and KV heads of
  // one (sequence, split) are neighbours, so they run together and share pages / L2 lines.
  const int mt = bid % a.mtiles;
  bid /= a.mtiles;
  const int h = bid % a.Hkv;
  bid /= a.Hkv;
  const int sp = bid % a.nsplit;
  const int b = bid / a.nsplit;

  SeqQ sqb;
  if (!seq_q(a, b, sqb)) return false;  // a mixed call's long sequence: the prefill launch runs it
  const int m0 = mt * kRows;
  if (m0 >= sqb.sq * a.G) return false;        // packed queries: past this sequence's rows
  const int mv = min(kRows, sqb.sq * a.G - m0);  // valid rows of this tile (>= 1)

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
      const T* src = (const T*)a.q + sqb.q + (int64_t)i * a.q_rs + (int64_t)hq * a.q_hs + c * 8;
      qv[u] = __ldg(reinterpret_cast<const uint4*>(src));
    }
  }

  // ---- this sequence's keys, the tile's visible key range and this split's share of it -------
  const int lp = a.leftpad ? __ldg(a.leftpad + b) : 0;
  const int end = a.seqused ? __ldg(a.seqused + b) : a.sk;
  const int sk = max(0, end - lp);
  const int i_first = m0 / a.G, i_last = (m0 + mv - 1) / a.G;
  const int ulo = row_lo(a, i_first, sk, sqb.sq), uhi = row_hi(a, i_last, sk, sqb.sq);  // union of the rows' ranges
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
      rlo[rr] = max(row_lo(a, i, sk, sqb.sq), ks);
      rhi[rr] = min(row_hi(a, i, sk, sqb.sq), ke - 1);
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
      if constexpr (D == Dv) {
#pragma unroll
        for (int j = 0; j < C::kChunks / 8; ++j) {
          cp_async16(dst + j * 128, ksrc + j * 64, nb);
          cp_async16(dst + C::kTile + j * 128, vsrc + j * 64, nb);
        }
      } else {  // K rows of D, V rows of Dv elements (each a multiple of 64: 8 lanes x 16 bytes)
        const uint32_t dstv = kt + C::kTile + swz<Dv>(r, lane & 7);
#pragma unroll
        for (int j = 0; j < C::kChunks / 8; ++j) cp_async16(dst + j * 128, ksrc + j * 64, nb);
#pragma unroll
        for (int j = 0; j < C::kChunksV / 8; ++j) cp_async16(dstv + j * 128, vsrc + j * 64, nb);
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

  float o[Dv / 8][4];
#pragma unroll
  for (int n = 0; n < Dv / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
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
      for (int n = 0; n < Dv / 8; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }
    }

    // P (16 x 16 keys) as the A fragment: n tile 0 = keys 0-7, n tile 1 = keys 8-15
    uint32_t pa[4];
    pa[0] = pack2<fa3::is_f16<T>>(s[0][0], s[0][1]);
    pa[1] = pack2<fa3::is_f16<T>>(s[0][2], s[0][3]);
    pa[2] = pack2<fa3::is_f16<T>>(s[1][0], s[1][1]);
    pa[3] = pack2<fa3::is_f16<T>>(s[1][2], s[1][3]);

    // O += P V: V^T fragments by ldmatrix.trans, two n8 tiles of Dv per x4
#pragma unroll
    for (int n2 = 0; n2 < Dv / 16; ++n2) {
      uint32_t vb[4];
      ldsm_x4_trans(vb, vt + swz<Dv>(a_row, 2 * n2 + a_ch));
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
  for (int n = 0; n < Dv / 8; ++n) {
    *reinterpret_cast<float2*>(&so[(w * kRows + g) * C::kOPad + 8 * n + 2 * q4]) = make_float2(o[n][0], o[n][1]);
    *reinterpret_cast<float2*>(&so[(w * kRows + g + 8) * C::kOPad + 8 * n + 2 * q4]) = make_float2(o[n][2], o[n][3]);
  }
  __syncthreads();

  constexpr float kLn2 = 0.6931471805599453f;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kQuads = Dv / 4;  // 4 output elements per work item
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
      T* dst = (T*)a.o + sqb.o + (int64_t)i * a.o_rs + (int64_t)hq * a.o_hs + d;
      reinterpret_cast<uint32_t*>(dst)[0] = pack2<fa3::is_f16<T>>(acc.x * inv, acc.y * inv);
      reinterpret_cast<uint32_t*>(dst)[1] = pack2<fa3::is_f16<T>>(acc.z * inv, acc.w * inv);
      if (a.lse && d == 0) a.lse[sqb.lse + (int64_t)hq * a.lse_hs + i] = lse;
    } else {
      const int64_t row = (int64_t)sp * a.R + ((int64_t)b * a.Hkv + h) * a.M + m;
      const float inv = L > 0.f ? 1.f / L : 0.f;
      *reinterpret_cast<float4*>(a.ws_o + row * Dv + d) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (d == 0) a.ws_lse[row] = L > 0.f ? (mm + __log2f(L)) * kLn2 : -INFINITY;
    }
  }
  return true;
}

// One tile per CTA (a.mloop 0), or (packed queries, a.mloop 1) the CTA's (sequence, split, KV head) tile by
// tile until one has no rows: a serving step's decodes have one tile each, and a grid of one CTA per tile
// launched 4 CTAs per decode for the row cap's 64 rows, 3 of which exited at once (v24). The barrier orders
// one tile's merge (it reads the rings' smem) before the next tile's loads write it.
template <typename T, int D, int Dv, bool kWide>
__device__ __forceinline__ void splitkv_tiles(const Args& a) {
  const int n = a.mloop ? a.mtiles : 1;                        // one call site: the body is inlined once
  const int first = a.mloop ? (int)blockIdx.x * a.mtiles : (int)blockIdx.x;
  for (int t = 0; t < n; ++t) {
    if (t > 0) __syncthreads();
    if (!splitkv_body<T, D, Dv, kWide>(a, first + t)) return;
  }
}

// DV_: empty (Dv = D: the default build's kernels, their names as before), or one value, the V head dim
// ((192, 128) in the KSEEK_FA3_DECODE_DV build). K tiles are D wide, V tiles and O Dv.
template <typename T, int D, int... DV_>
__global__ void __launch_bounds__(kThreads) splitkv_kernel(const Args a) {
  splitkv_tiles<T, D, Cfg<D, DV_...>::kDv, false>(a);
}
// The wide form (Cfg::kWide, 8 warps): launched instead when the grid has at most one CTA per SM (launch()).
template <typename T, int D>
__global__ void __launch_bounds__(2 * kThreads, 1) splitkv_wide(const Args a) {
  splitkv_tiles<T, D, D, true>(a);
}

// ------------------------------------------------------------------------------------------------
// Combine kernel: one warp per output row (b, h, m); lane owns D/32 consecutive elements. D here is
// the O row width, the V head dim Dv (combine_kernel<T, 128> serves (192, 128) as well).
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
  SeqQ sqb;
  if (!seq_q(a, b, sqb) || i >= sqb.sq) return;  // the prefill launch's sequence, or no such row

  float mx = -INFINITY;
  for (int s = lane; s < ns; s += 32) mx = fmaxf(mx, a.ws_lse[(int64_t)s * a.R + row]);
#pragma unroll
  for (int off = 16; off; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));

  T* dst = (T*)a.o + sqb.o + (int64_t)i * a.o_rs + (int64_t)hq * a.o_hs + lane * E;
  float acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.f;
  float lse = -INFINITY;
  if (mx != -INFINITY) {  // the row saw at least one key in some split
    const float sink = a.sinks ? __ldg(a.sinks + hq) : -INFINITY;
    const float mtot = fmaxf(mx, sink);
    // Lane l holds the weight exp(lse - mtot) of splits l, l + 32, ... (0: an empty split, whose O is never
    // read). The partials are read kB splits at a time, every load issued before the first is used (the
    // weights are in registers, so no load waits on another).
    constexpr int kB = E <= 4 ? 8 : 4;
    float sum = 0.f;
    for (int s0 = 0; s0 < ns; s0 += 32) {
      const int sl = s0 + lane;
      const float ls = sl < ns ? a.ws_lse[(int64_t)sl * a.R + row] : -INFINITY;
      const float wl = ls == -INFINITY ? 0.f : expf(ls - mtot);
      sum += wl;
      const int n = min(32, ns - s0);
      for (int j0 = 0; j0 < n; j0 += kB) {
        float wj[kB];
        float2 x[kB][E / 2];
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          wj[j] = __shfl_sync(0xffffffffu, wl, (j0 + j) & 31);
          if (j0 + j >= n) wj[j] = 0.f;
          const float* src = a.ws_o + ((int64_t)(s0 + j0 + j) * a.R + row) * D + lane * E;
#pragma unroll
          for (int e = 0; e < E / 2; ++e)
            x[j][e] = wj[j] != 0.f ? *reinterpret_cast<const float2*>(src + 2 * e) : make_float2(0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < kB; ++j) {
#pragma unroll
          for (int e = 0; e < E / 2; ++e) {
            acc[2 * e] += wj[j] * x[j][e].x;
            acc[2 * e + 1] += wj[j] * x[j][e].y;
          }
        }
      }
    }
#pragma unroll
    for (int off = 16; off; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (a.sinks) sum += expf(sink - mtot);
    lse = mtot + logf(sum);
    const float inv = 1.f / sum;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] *= inv;
  }
#pragma unroll
  for (int e = 0; e < E; e += 2) reinterpret_cast<uint32_t*>(dst)[e / 2] = pack2<fa3::is_f16<T>>(acc[e], acc[e + 1]);
  if (a.lse && lane == 0) a.lse[sqb.lse + (int64_t)hq * a.lse_hs + i] = lse;
}

#if KSEEK_FA3_DECODE_FP8
// ------------------------------------------------------------------------------------------------
// fp8 e4m3 main kernel (build variant KSEEK_FA3_DECODE_FP8=1): q, k, v e4m3 with per (batch, KV
// head) descales (kseek.h), o bf16
// ------------------------------------------------------------------------------------------------
// Same grid, splits, packed queries, GQA packing, per-warp cp.async rings, masks, online softmax,
// warp merge and combine (combine_kernel<__nv_bfloat16, D>) as splitkv_kernel. What differs (the
// never-run port at 346fdc1:kernels/wip/decode_fp8, adapted to this file; NOTES v13e):
//   * K/V tiles hold the fp8 bytes: a row is D bytes in shared memory. A warp stage is 32 keys, so
//     it moves as many bytes as a 16-key bf16 stage and the ring is as deep in bytes.
//   * sm_90 has no native fp8 mma.sync (ptxas emulates m16n8k32 .e4m3 with an f16 unpack and two
//     HMMA), so each fp8 value is converted here once: e4m3 -> f16 is exact (cvt.rn.f16x2.e4m3x2,
//     one instruction per two values) and both products run on mma.sync m16n8k16 f16, fp32 sums.
//     S = Q K^T: an ldmatrix (.b16) of an 8-key x 16-byte block gives a thread 4 consecutive fp8
//     values of one key, d = 16c + 4*q4 .. +3; their f16 pairs are the B fragment of k16 step c with
//     d permuted (k 2*q4+{0,1} <- d 4*q4+{0,1}, k 8+2*q4+{0,1} <- d 4*q4+2+{0,1}). Q is converted
//     once into shared memory in the same permuted order, so splitkv_kernel's ldmatrix of Q gives
//     matching A fragments.
//     O += P V: P in f16 (11 bits; the bf16 kernel keeps 8), V^T by ldmatrix.trans of byte pairs,
//     a prmt pairing the two keys of one value column, then the f16 conversion. n8 tile 2c + par of
//     O holds value columns 16c + 2n + par (n = 0..7): a thread owns columns 16c + 4*q4 .. +3 of
//     its rows g and g + 8.
//   * Each key row's K and V byte offsets are computed once, by the lane whose index is the row, into
//     a per-warp table in shared memory (the bf16 loader's per-lane address math, 4x as many rows
//     per lane here, would cost ~40% of the loop's instructions: the port's SASS count).
//   * q_descale * k_descale multiply the score multiplier before the max (any sign; inside tanh with
//     softcap), so m, l and the LSE are those of the real scores; v_descale multiplies the output
//     with 1/l, and the split partials in the workspace carry it (the combine is unchanged).
constexpr int kKeys8 = 32;  // keys per warp stage (fp8)

template <int D>
struct Cfg8 {
  static_assert(D == 64 || D == 128 || D == 256, "head dim");
  static constexpr int kStages = (D == 64) ? 4 : 3;       // ring depth per warp (bytes as bf16's)
  static constexpr int kRowB = D;                         // bytes of one K/V row in smem
  static constexpr int kChunks = D / 16;                  // 16-byte chunks per fp8 row
  static constexpr int kLpr = kChunks < 8 ? kChunks : 8;  // lanes per row in one warp-wide cp.async
  static constexpr int kRpi = 32 / kLpr;                  // rows per warp-wide cp.async
  static constexpr int kRpl = kKeys8 / kRpi;              // rows per lane per stage
  static constexpr int kCpl = kChunks / kLpr;             // chunks per lane per row
  static constexpr int kTile = kKeys8 * kRowB;            // one K (or V) tile of a stage
  static constexpr int kStage = 2 * kTile;                // K tile then V tile
  static constexpr int kRing = kWarps * kStages * kStage; // all warps' rings
  static constexpr int kQ = kRows * D * 2;                // the Q tile, f16 (Cfg<D>'s layout)
  static constexpr int kOPad = D + 4;                     // floats per row of the merge buffer
  static constexpr int kMerge = kWarps * kRows * kOPad * 4;
  static_assert(kMerge <= kRing, "merge buffer reuses the ring");
  static constexpr int kOffQ = kRing;
  static constexpr int kOffStat = kOffQ + kQ;             // m[kWarps][16], l[kWarps][16]
  static constexpr int kOffTab = kOffStat + 2 * kWarps * kRows * 4;  // per warp: 32 x {K, V offset}
  static constexpr int kSmem = kOffTab + kWarps * kKeys8 * 16;
  static constexpr bool kQReg = D <= 128;                 // Q fragments held in registers
  static constexpr int kMinCtas = (D == 64) ? 3 : (D == 128) ? 2 : 1;  // CTAs/SM the smem allows
};

// Descale pointers ([B, Hkv] with batch stride bs; NULL = 1).
struct Desc8 {
  const float* q;
  const float* k;
  const float* v;
  int64_t bs;
};

// Byte offset of 16-byte chunk c of row r in a swizzled fp8 tile (rows of D bytes). D >= 128: chunk
// bits 0-2 XOR r % 8 (as swz). D = 64 (two rows per 128 bytes): chunk XOR (r / 2) % 4. Either way
// the 8 rows an ldmatrix reads at one chunk fall into 8 different 16-byte bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz8(int r, int c) {
  if constexpr (D == 64) return (uint32_t)(r * 64 + ((c ^ ((r >> 1) & 3)) << 4));
  else return (uint32_t)(r * D + ((c ^ (r & 7)) << 4));
}

// Byte permute: byte i of the result is byte ((SEL >> 4i) & 7) of {b, a} (a = bytes 0-3).
template <uint32_t SEL>
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "n"(SEL));
  return d;
}

// The two e4m3 in bits 0-15 (HI: bits 16-31) of x -> f16x2, exact; the lower byte -> the low half.
template <bool HI>
__device__ __forceinline__ uint32_t e4m3x2_f16x2(uint32_t x) {
  uint32_t d;
  if constexpr (HI)
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;\n}\n" : "=r"(d) : "r"(x));
  else
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, l;\n}\n" : "=r"(d) : "r"(x));
  return d;
}

template <int D>
__global__ void __launch_bounds__(kThreads, Cfg8<D>::kMinCtas) splitkv_f8_kernel(const Args a, const Desc8 ds) {
  using C = Cfg8<D>;
  constexpr int S = C::kStages;
  constexpr int KC = D / 16;  // k16 steps of S = Q K^T (one 16-byte fp8 chunk each)
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);

  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int g = lane >> 2, q4 = lane & 3;

  // blockIdx.x = ((b * nsplit + split) * Hkv + h) * mtiles + mt, as splitkv_kernel
  int bid = blockIdx.x;
  const int mt = bid % a.mtiles;
  bid /= a.mtiles;
  const int h = bid % a.Hkv;
  bid /= a.Hkv;
  const int sp = bid % a.nsplit;
  const int b = bid / a.nsplit;

  SeqQ sqb;
  if (!seq_q(a, b, sqb)) return;  // a mixed call's long sequence (not routed here for fp8)
  const int m0 = mt * kRows;
  if (m0 >= sqb.sq * a.G) return;                // packed queries: past this sequence's rows
  const int mv = min(kRows, sqb.sq * a.G - m0);  // valid rows of this tile (>= 1)

  // ---- Q tile (fp8): global -> registers now, -> f16 smem below (rows past M are zero) -------
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
      const uint8_t* src = (const uint8_t*)a.q + sqb.q + (int64_t)i * a.q_rs + (int64_t)hq * a.q_hs + c * 16;
      qv[u] = __ldg(reinterpret_cast<const uint4*>(src));
    }
  }

  // ---- descales of (b, h): q*k into the score multiplier, v into the output ------------------
  const int64_t di = (int64_t)b * ds.bs + h;
  const float qkd = (ds.q ? __ldg(ds.q + di) : 1.f) * (ds.k ? __ldg(ds.k + di) : 1.f);
  const float vdesc = ds.v ? __ldg(ds.v + di) : 1.f;
  const float smul = a.scale_log2 * qkd;  // no softcap: to log2 units; softcap: argument of tanh

  // ---- this sequence's keys, the tile's visible key range and this split's share of it -------
  const int lp = a.leftpad ? __ldg(a.leftpad + b) : 0;
  const int end = a.seqused ? __ldg(a.seqused + b) : a.sk;
  const int sk = max(0, end - lp);
  const int i_first = m0 / a.G, i_last = (m0 + mv - 1) / a.G;
  const int ulo = row_lo(a, i_first, sk, sqb.sq), uhi = row_hi(a, i_last, sk, sqb.sq);  // union of the rows' ranges
  const int nch = uhi >= ulo ? (uhi - ulo + kKeys8) / kKeys8 : 0;        // 32-key chunks
  const int cps = (nch + a.nsplit - 1) / a.nsplit;                       // chunks per split
  const int c0 = min(nch, sp * cps), c1 = min(nch, c0 + cps);
  const int ks = ulo + c0 * kKeys8;                                      // split's keys [ks, ke)
  const int ke = c1 > c0 ? min(uhi + 1, ulo + c1 * kKeys8) : ks;
  const int nchl = c1 - c0;
  const int nst = nchl > w ? (nchl - w + kWarps - 1) / kWarps : 0;       // this warp's stages

  // Per-thread rows g and g + 8 of the tile: visible keys clamped to the split. Padding rows (r >=
  // mv: zero Q, never written) see everything, so that a stage inside every real row's range needs
  // no mask at all (their scores are finite: a zero Q row gives 0).
  int rlo[2], rhi[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int r = g + 8 * rr;
    if (r < mv) {
      const int i = (m0 + r) / a.G;
      rlo[rr] = max(row_lo(a, i, sk, sqb.sq), ks);
      rhi[rr] = min(row_hi(a, i, sk, sqb.sq), ke - 1);
    } else {
      rlo[rr] = -(1 << 30);  // keys are < 2^28
      rhi[rr] = 1 << 30;
    }
  }
  const int lo_all = max(rlo[0], rlo[1]), hi_all = min(rhi[0], rhi[1]);  // keys both rows see

  // ---- loader: lane owns rows lr + kRpi*k (k < kRpl) of each 32-key stage and, in each, the
  // 16-byte chunks lc + kLpr*j: one warp-wide cp.async moves kRpi rows x 16*kLpr contiguous bytes
  // (4 x 128 B for D >= 128, 8 x 64 B for D = 64). `locate` loads key row `lane`'s page id one
  // stage ahead (the page-table latency hides behind a stage), `publish` turns it into the row's K
  // and V byte offsets in the warp's table, and `issue` reads its rows' offsets back (one
  // ld.shared.v2 per row) and issues the copies. ----------------------------------------------
  const int lr = lane / C::kLpr, lc = lane % C::kLpr;
  const uint8_t* kgl = (const uint8_t*)a.k + (int64_t)h * a.k_hs + lc * 16;  // this lane's chunk
  const uint8_t* vgl = (const uint8_t*)a.v + (int64_t)h * a.v_hs + lc * 16;
  const int32_t* ptrow = a.paged ? a.pt + (int64_t)b * a.pt_stride : nullptr;
  const uint32_t ring = sbase + (uint32_t)(w * S * C::kStage);
  const uint32_t tab = sbase + C::kOffTab + (uint32_t)(w * kKeys8 * 16);  // 16 bytes per key row

  // Page (dense: batch) index of key row `lane` of warp stage t; -1 = no key there (zero fill).
  auto locate = [&](int t) -> int {
    const int j = ks + (t * kWarps + w) * kKeys8 + lane;
    int pid = -1;
    if (t < nst && j < ke) {
      if (a.paged) {
        const int jj = j + lp;
        pid = __ldg(ptrow + (a.ps_shift >= 0 ? (jj >> a.ps_shift) : jj / a.ps));
      } else {
        pid = b;
      }
    }
    return pid;
  };
  // Key row `lane` of stage t (page id pid): byte offsets of its K and V rows into the table (0 when
  // there is no key: a valid address, and the copy reads nothing). Returns the warp's mask of rows
  // with a key. Warp-uniform call (ballot).
  auto publish = [&](int t, int pid) -> uint32_t {
    int64_t ko = 0, vo = 0;
    if (pid >= 0) {
      int sl = ks + (t * kWarps + w) * kKeys8 + lane + lp;  // stored key index
      if (a.paged) sl = a.ps_shift >= 0 ? (sl & (a.ps - 1)) : sl % a.ps;
      ko = (int64_t)pid * a.k_bs + (int64_t)sl * a.k_rs;
      vo = (int64_t)pid * a.v_bs + (int64_t)sl * a.v_rs;
    }
    asm volatile("st.shared.v2.s64 [%0], {%1, %2};\n" ::"r"(tab + lane * 16), "l"(ko), "l"(vo) : "memory");
    return __ballot_sync(0xffffffffu, pid >= 0);
  };
  // Issue the published stage into ring slot `slot` (after a __syncwarp that follows publish).
  auto issue = [&](int slot, uint32_t okm) {
    const uint32_t kt = ring + (uint32_t)(slot * C::kStage);
    const uint32_t okl = okm >> lr;  // bit kRpi*k: row lr + kRpi*k has a key
#pragma unroll
    for (int k = 0; k < C::kRpl; ++k) {
      const int r = lr + C::kRpi * k;
      int64_t ko, vo;
      asm volatile("ld.shared.v2.s64 {%0, %1}, [%2];\n" : "=l"(ko), "=l"(vo) : "r"(tab + r * 16) : "memory");
      const int nb = (okl >> (C::kRpi * k)) & 1 ? 16 : 0;
      const uint8_t* ksrc = kgl + ko;
      const uint8_t* vsrc = vgl + vo;
#pragma unroll
      for (int j = 0; j < C::kCpl; ++j) {
        const uint32_t dst = kt + swz8<D>(r, lc + C::kLpr * j);
        cp_async16(dst, ksrc + j * 16 * C::kLpr, nb);
        cp_async16(dst + C::kTile, vsrc + j * 16 * C::kLpr, nb);
      }
    }
  };

  // Prologue: locate stages 0..S-1 (independent loads), publish and issue 0..S-2.
  int pid;
  {
    int ppid[S - 1];
#pragma unroll
    for (int t = 0; t < S - 1; ++t) ppid[t] = locate(t);
    pid = locate(S - 1);
#pragma unroll
    for (int t = 0; t < S - 1; ++t) {
      uint32_t okm = 0;
      if (t < nst) okm = publish(t, ppid[t]);
      __syncwarp();  // the table is visible to every lane
      if (t < nst) issue(t, okm);
      cp_async_commit();
      __syncwarp();  // every lane has read the table before it is rewritten
    }
  }

  // Q to smem as f16 in the permuted d order, in splitkv_kernel's Q layout (rows of 2D bytes,
  // swz<D>): fp8 chunk c (d = 16c..16c+15, 32-bit words X0..X3) -> f16 chunk 2c = the low pairs of
  // X0..X3 (d 4j, 4j+1), f16 chunk 2c+1 = their high pairs (d 4j+2, 4j+3).
  const uint32_t qs = sbase + C::kOffQ;
#pragma unroll
  for (int u = 0; u < kQPer; ++u) {
    const int idx = tid + u * kThreads;
    if (idx < kRows * C::kChunks) {
      const int r = idx / C::kChunks, c = idx % C::kChunks;
      const uint32_t x[4] = {qv[u].x, qv[u].y, qv[u].z, qv[u].w};
      uint32_t lo[4], hi[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        lo[j] = e4m3x2_f16x2<false>(x[j]);
        hi[j] = e4m3x2_f16x2<true>(x[j]);
      }
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(qs + swz<D>(r, 2 * c)), "r"(lo[0]),
                   "r"(lo[1]), "r"(lo[2]), "r"(lo[3])
                   : "memory");
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(qs + swz<D>(r, 2 * c + 1)), "r"(hi[0]),
                   "r"(hi[1]), "r"(hi[2]), "r"(hi[3])
                   : "memory");
    }
  }
  __syncthreads();

  // ldmatrix lane addressing (x4). Q (f16, 16-byte chunks of the 2D-byte rows) and V^T (fp8): row
  // (lane&7) + 8*((lane>>3)&1), chunk + (lane>>4). K (fp8): row lane (keys 0..31: matrix i = keys
  // 8i..8i+7 = n8 tile i), one chunk.
  const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_ch = lane >> 4;

  uint32_t qf[C::kQReg ? KC : 1][4];
  if constexpr (C::kQReg) {
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) ldsm_x4(qf[kc], qs + swz<D>(a_row, 2 * kc + a_ch));
  }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mrun[2] = {-INFINITY, -INFINITY};
  float lsum[2] = {0.f, 0.f};

  int rd = 0, wrs = S - 1;  // ring slots: read (stage t), write (stage t + S - 1)
  for (int t = 0; t < nst; ++t) {
    const bool more = t + S - 1 < nst;  // warp-uniform
    uint32_t okm = 0;
    if (more) okm = publish(t + S - 1, pid);  // page ids loaded one iteration ago
    __syncwarp();  // table visible; every lane is done reading slot wrs (consumed at t - 1)
    if (more) issue(wrs, okm);
    cp_async_commit();
    pid = locate(t + S);  // page ids for the next issue; latency hidden behind this stage
    cp_async_wait<S - 1>();
    __syncwarp();  // the stage's rows from every lane are visible; the table reads are done

    const uint32_t kt = ring + (uint32_t)(rd * C::kStage);
    const uint32_t vt = kt + C::kTile;

    // S = Q K^T for 32 keys: four n8 tiles (keys 8n..8n+7), k16 step kc = fp8 chunk kc
    float s[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + swz8<D>(lane, kc));
      uint32_t qa[4];
      if constexpr (C::kQReg) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[e] = qf[kc][e];
      } else {
        ldsm_x4(qa, qs + swz<D>(a_row, 2 * kc + a_ch));
      }
#pragma unroll
      for (int n = 0; n < 4; ++n) mma16816<__half>(s[n], qa, e4m3x2_f16x2<false>(kb[n]), e4m3x2_f16x2<true>(kb[n]));
    }

    // scores in log2 units (descales folded into smul); masked unless the whole stage is visible
    // to both of this thread's rows; online softmax
    const int kb0 = ks + (t * kWarps + w) * kKeys8;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = s[n][e];
        s[n][e] = a.softcap_on ? a.cap_log2 * tanhf(x * smul) : x * smul;
      }
    }
    if (kb0 < lo_all || kb0 + kKeys8 - 1 > hi_all) {
      const int key0 = kb0 + 2 * q4;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int rr = e >> 1;
          const int key = key0 + 8 * n + (e & 1);
          if (key < rlo[rr] || key > rhi[rr]) s[n][e] = -INFINITY;
        }
      }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
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
    for (int n = 0; n < 4; ++n) {
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

    // O += P V over two k16 halves (keys 16kh..16kh+15). P: the f16 A fragment straight from the S
    // accumulators. V^T: ldmatrix.trans of byte pairs; matrices (keys 0-7, chunk 2cp), (8-15, 2cp),
    // (0-7, 2cp+1), (8-15, 2cp+1); a register holds bytes (key 2q4, col 2g), (2q4, 2g+1), (2q4+1,
    // 2g), (2q4+1, 2g+1); prmt 0x3120 puts the column-2g key pair in the low 16 bits and the
    // column-2g+1 pair in the high 16 bits, each one f16x2 B register after conversion.
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
      uint32_t pa[4];
      pa[0] = pack2<true>(s[2 * kh][0], s[2 * kh][1]);
      pa[1] = pack2<true>(s[2 * kh][2], s[2 * kh][3]);
      pa[2] = pack2<true>(s[2 * kh + 1][0], s[2 * kh + 1][1]);
      pa[3] = pack2<true>(s[2 * kh + 1][2], s[2 * kh + 1][3]);
#pragma unroll
      for (int cp = 0; cp < D / 32; ++cp) {
        uint32_t vb[4];
        ldsm_x4_trans(vb, vt + swz8<D>(16 * kh + a_row, 2 * cp + a_ch));
#pragma unroll
        for (int hc = 0; hc < 2; ++hc) {
          const uint32_t x0 = prmt<0x3120>(vb[2 * hc], 0u), x1 = prmt<0x3120>(vb[2 * hc + 1], 0u);
          const int c = 2 * cp + hc;
          mma16816<__half>(o[2 * c], pa, e4m3x2_f16x2<false>(x0), e4m3x2_f16x2<false>(x1));
          mma16816<__half>(o[2 * c + 1], pa, e4m3x2_f16x2<true>(x0), e4m3x2_f16x2<true>(x1));
        }
      }
    }

    rd = (rd + 1 == S) ? 0 : rd + 1;
    wrs = (wrs + 1 == S) ? 0 : wrs + 1;
  }

  // Let a dependent (combine) grid start launching; it waits for this grid's completion anyway.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // ---- merge the warps' states through shared memory (as splitkv_kernel) ----------------------
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
  // o[2c + par][e]: row g (e < 2) or g + 8, value column 16c + 4*q4 + 2*(e & 1) + par
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    *reinterpret_cast<float4*>(&so[(w * kRows + g) * C::kOPad + 16 * c + 4 * q4]) =
        make_float4(o[2 * c][0], o[2 * c + 1][0], o[2 * c][1], o[2 * c + 1][1]);
    *reinterpret_cast<float4*>(&so[(w * kRows + g + 8) * C::kOPad + 16 * c + 4 * q4]) =
        make_float4(o[2 * c][2], o[2 * c + 1][2], o[2 * c][3], o[2 * c + 1][3]);
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
          inv = vdesc * sc / den;
          lse = (mt2 + __log2f(den)) * kLn2;
        } else {
          inv = vdesc / L;
          lse = (mm + __log2f(L)) * kLn2;
        }
      }
      __nv_bfloat16* dst = (__nv_bfloat16*)a.o + sqb.o + (int64_t)i * a.o_rs + (int64_t)hq * a.o_hs + d;
      reinterpret_cast<uint32_t*>(dst)[0] = pack2<false>(acc.x * inv, acc.y * inv);
      reinterpret_cast<uint32_t*>(dst)[1] = pack2<false>(acc.z * inv, acc.w * inv);
      if (a.lse && d == 0) a.lse[sqb.lse + (int64_t)hq * a.lse_hs + i] = lse;
    } else {
      const int64_t row = (int64_t)sp * a.R + ((int64_t)b * a.Hkv + h) * a.M + m;
      const float inv = L > 0.f ? vdesc / L : 0.f;  // partials carry v_descale
      *reinterpret_cast<float4*>(a.ws_o + row * D + d) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (d == 0) a.ws_lse[row] = L > 0.f ? (mm + __log2f(L)) * kLn2 : -INFINITY;
    }
  }
}
#endif  // KSEEK_FA3_DECODE_FP8

// ------------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------------
// SMs of the device; 132 (H100/H200 SXM) when the query fails.
inline int sms_or_default(int dev) {
  const int n = fa3::sm_count(dev);
  return n > 0 ? n : 132;
}

// instantiation. Returns CTAs per SM, or 0 on failure.
template <typename T, int D, int Dv>
inline void (*kernel_of())(const Args) {  // splitkv_kernel<T, D> when Dv == D, else <T, D, Dv>
  if constexpr (D == Dv) return splitkv_kernel<T, D>;
  else return splitkv_kernel<T, D, Dv>;
}
template <typename T, int D, int Dv = D>
inline int prepare(int dev) {
  static int occ[kMaxDev] = {0};
  if (dev >= 0 && dev < kMaxDev && occ[dev]) return occ[dev];
  if (dev < 0) return 0;
  if (cudaFuncSetAttribute(kernel_of<T, D, Dv>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Cfg<D, Dv>::kSmem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel_of<T, D, Dv>(), kThreads, Cfg<D, Dv>::kSmem) !=
          cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 0;
  }
  if (dev < kMaxDev) occ[dev] = n;
  return n;
}

// splitkv_wide's shared-memory attribute, once per device; false where it is refused.
template <typename T, int D>
inline bool prepare_wide(int dev) {
  static bool done[kMaxDev] = {false};
  if (dev < 0 || dev >= kMaxDev) return false;
  if (done[dev]) return true;
  if (cudaFuncSetAttribute(splitkv_wide<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Cfg<D, D, true>::kSmem) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  done[dev] = true;
  return true;
}

#if KSEEK_FA3_DECODE_FP8
// The same for the fp8 kernel.
template <int D>
inline int prepare_f8(int dev) {
  static int occ[kMaxDev] = {0};
  if (dev >= 0 && dev < kMaxDev && occ[dev]) return occ[dev];
  if (dev < 0) return 0;
  if (cudaFuncSetAttribute(splitkv_f8_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg8<D>::kSmem) !=
      cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, splitkv_f8_kernel<D>, kThreads, Cfg8<D>::kSmem) !=
          cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 0;
  }
  if (dev < kMaxDev) occ[dev] = n;
  return n;
}
#endif

inline int ctas_per_sm(const kseek_params* p, int dev) {
#if KSEEK_FA3_DECODE_FP8
  if (p->dtype == KSEEK_FP8_E4M3) {
    switch (p->head_dim) {
      case 64: return prepare_f8<64>(dev);
      case 128: return prepare_f8<128>(dev);
      default: return prepare_f8<256>(dev);
    }
  }
#endif
  const bool f16 = p->dtype == KSEEK_FP16;
#if KSEEK_FA3_DECODE_DV
  if (p->head_dim != p->head_dim_v)  // (192, 128): supported() takes no other D != Dv
    return f16 ? prepare<__half, 192, 128>(dev) : prepare<__nv_bfloat16, 192, 128>(dev);
#endif
  switch (p->head_dim) {
    case 64: return f16 ? prepare<__half, 64>(dev) : prepare<__nv_bfloat16, 64>(dev);
    case 128: return f16 ? prepare<__half, 128>(dev) : prepare<__nv_bfloat16, 128>(dev);
    default: return f16 ? prepare<__half, 256>(dev) : prepare<__nv_bfloat16, 256>(dev);
  }
}


inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

// Query rows per sequence this path runs: dense, all (Sq); packed, at most kMaxRows / G of them
// (a sequence with more is left to the prefill: fa3_hopper.cu's mixed calls).
inline int row_cap(const kseek_params* p) {
  if (!p->cu_seqlens_q || p->heads_kv <= 0) return p->seqlen_q;
  const int g = p->heads_q / p->heads_kv;
  return g > 0 ? std::min(p->seqlen_q, kMaxRows / g) : 0;
}

inline bool supported(const kseek_params* p) {
  if (!p || p->abi_version != KSEEK_ABI_VERSION) return false;
  // fp8 e4m3 q/k/v with bf16 o (as the fp8 prefill) only in the KSEEK_FA3_DECODE_FP8 build
  const bool f8 = fa3::build::kDecodeFp8 && p->dtype == KSEEK_FP8_E4M3;
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16 && !f8) return false;
  if (p->out_dtype != (f8 ? (int32_t)KSEEK_BF16 : p->dtype)) return false;
  if (p->head_dim != p->head_dim_v) {
    // (192, 128), bf16/fp16, only in the KSEEK_FA3_DECODE_DV build (fp8 with D != Dv: never)
    if (!fa3::build::kDecodeDv || f8 || p->head_dim != 192 || p->head_dim_v != 128) return false;
  } else if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256) {
    return false;
  }
  if (p->cu_seqlens_k) return false;  // packed queries over a dense or paged cache only
  if (p->batch <= 0 || p->heads_kv <= 0 || p->heads_q <= 0 || p->heads_q % p->heads_kv) return false;
  if (p->seqlen_q < 0 || p->seqlen_k < 0 || p->seqlen_q >= (1 << 28) || p->seqlen_k >= (1 << 28)) return false;
  const int64_t rows = (int64_t)row_cap(p) * (p->heads_q / p->heads_kv);
  if (rows > kMaxRows || (p->cu_seqlens_q && rows == 0 && p->seqlen_q > 0)) return false;
  if (!p->q || !p->k || !p->v || !p->o) return false;
  if (!(p->scale == p->scale) || isinf(p->scale)) return false;
  if (!(p->softcap >= 0.f) || isinf(p->softcap)) return false;
  if (p->softcap > 0.f && isinf(p->scale / p->softcap)) return false;
  // 16-byte loads of q/k/v rows (8 elements of 16 bits, 16 of fp8); o written as element pairs
  if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v)) return false;
  const int64_t am = f8 ? 15 : 7;
  if ((p->q_batch_stride | p->q_row_stride | p->q_head_stride) & am) return false;
  if ((p->k_batch_stride | p->k_row_stride | p->k_head_stride) & am) return false;
  if ((p->v_batch_stride | p->v_row_stride | p->v_head_stride) & am) return false;
  if ((reinterpret_cast<uintptr_t>(p->o) & 3) || ((p->o_batch_stride | p->o_row_stride | p->o_head_stride) & 1))
    return false;
  if (p->page_table && (p->page_size <= 0 || p->page_table_stride <= 0)) return false;
  if ((int64_t)p->batch * p->heads_kv * ((rows + kRows - 1) / kRows) * kMaxSplits >= (int64_t)1 << 31) return false;
  return fa3::device_is_sm90(current_device());
}

// Split count: explicit num_splits is honoured (clamped to [1, 256]); 0 = a wave-quantized cost
// model over the CTA slots of the GPU (see README_decode.md).
inline int choose_splits(const kseek_params* p) {
  if (p->num_splits > 0) return p->num_splits < kMaxSplits ? p->num_splits : kMaxSplits;
  const int dev = current_device();
  const int g = p->heads_q / p->heads_kv;
  const int rows = row_cap(p) * g;
  // Packed queries (a mixed call's decodes, a varlen decode): the rows per sequence are on the device and
  // the row cap only bounds them; a serving step's decodes hold one or a few rows each, and the CTAs past a
  // sequence's rows exit at once, so the model counts one row tile per sequence and KV head (v23; the cap's
  // 4 tiles per sequence gave fa3api's varlen_q_dense, 4 decodes of up to 3000 keys, 2 splits)
  const int mtiles = p->cu_seqlens_q ? 1 : (rows + kRows - 1) / kRows;
  const int64_t ctas = (int64_t)p->batch * p->heads_kv * (mtiles > 0 ? mtiles : 1);
  int occ = ctas_per_sm(p, dev);
  if (occ <= 0) occ = 1;
  const int64_t slots = (int64_t)sms_or_default(dev) * occ;
  // keys a CTA range can cover (upper bound; seqused_k is on the device)
  int64_t keys = p->seqlen_k;
  const int wl = clamp_window(p->window_left);
  const int wr = p->causal ? 0 : clamp_window(p->window_right);
  int ck = kKeys;                                                      // keys per chunk (warp stage)
  double key_bytes = 2.0 * (p->head_dim + p->head_dim_v);               // K + V, 16-bit
#if KSEEK_FA3_DECODE_FP8
  if (p->dtype == KSEEK_FP8_E4M3) {
    ck = kKeys8;
    key_bytes = 2.0 * p->head_dim;                                     // K + V, fp8
  }
#endif
  if (wl >= 0) keys = std::min<int64_t>(keys, (int64_t)wl + (wr >= 0 ? wr : p->seqlen_k) + p->seqlen_q + ck);
  // a chunk bounds a row's keys to C; the rows of one tile span at most seqlen_q positions
  if (p->attention_chunk > 0) keys = std::min<int64_t>(keys, (int64_t)p->attention_chunk + p->seqlen_q + ck);
  const int64_t chunks = (keys + ck - 1) / ck;
  if (chunks <= kWarps) return 1;
  const double fixed = 32768.0;                                        // per-CTA start-up, bytes
  const double comb = 65536.0;                                         // second launch, bytes/slot
  const int64_t smax = std::min<int64_t>(128, chunks / kWarps);
  int best = 1;
  double best_t = 0.0;
  for (int64_t s = 1; s <= smax; ++s) {
    const int64_t per = (chunks + s - 1) / s;                          // chunks per split
    const int64_t waves = (ctas * s + slots - 1) / slots;
    double t = (double)waves * ((double)per * ck * key_bytes + fixed);
    if (s > 1) t += comb + 2.0 * (double)(s * ctas * kRows) * p->head_dim_v * 4.0 / (double)slots;
    if (s == 1 || t < best_t * 0.999) {
      best = (int)s;
      best_t = t;
    }
  }
  // KSEEK_FA3_DECODE_SPLITS=ragged: seqused_k lives on the device, so the model above assumes every
  // sequence holds `keys`; with ragged lengths one long sequence then rests on its few CTAs (d17). At
  // least enough splits that a CTA covers <= kSplitKeys of the longest; a split past a shorter
  // sequence's keys finds none and writes LSE -inf, which the combine skips. Below kRaggedMinSplits the
  // model's choice stands (a uniform 2000-key row lost 3.6% in graph replay going 1 -> 2 splits). Not for
  // packed queries (a mixed call's decodes, session 10's serving rows): their partials are sized by the
  // row cap (64 rows per KV head and sequence), so 32 splits at a 32k-capacity table would ask for ~1 GB
  // of workspace, and that trade was never measured.
  if constexpr (fa3::build::kDecodeSplits == fa3::build::decsplits_ragged) {
    if (p->seqused_k && !p->cu_seqlens_q) {
      const int64_t need = (keys + fa3::build::kSplitKeys - 1) / fa3::build::kSplitKeys;
      if (need >= fa3::build::kRaggedMinSplits && need > best) best = (int)std::min<int64_t>(need, kMaxSplits);
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
  const int64_t R = (int64_t)p->batch * p->heads_kv * row_cap(p) * (p->heads_q / p->heads_kv);
  return ws_bytes_for(choose_splits(p), R, p->head_dim_v);  // O partials are Dv wide
}

// T = __nv_fp8_e4m3 (KSEEK_FA3_DECODE_FP8 builds only): splitkv_f8_kernel, output and combine in bf16.
// Dv != D (KSEEK_FA3_DECODE_DV builds only): 16-bit T; partials, combine and output Dv wide.
template <typename T, int D, int Dv = D>
int launch(const kseek_params* p, int ns, cudaStream_t stream) {
  constexpr bool kF8 = std::is_same<T, __nv_fp8_e4m3>::value;
  using TO = typename std::conditional<kF8, __nv_bfloat16, T>::type;  // output type
  const int dev = current_device();
  if constexpr (kF8) {
#if KSEEK_FA3_DECODE_FP8
    if (prepare_f8<D>(dev) <= 0) return KSEEK_ERR_CUDA;
#endif
  } else {
    if (prepare<T, D, Dv>(dev) <= 0) return KSEEK_ERR_CUDA;
  }
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
  a.cu_q = p->cu_seqlens_q;
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
  a.sq = row_cap(p);
  a.sk = p->seqlen_k;
  a.M = a.sq * a.G;
  a.mtiles = (a.M + kRows - 1) / kRows;
  a.mloop = p->cu_seqlens_q && !kF8 ? 1 : 0;  // packed queries: a CTA per (sequence, split, KV head) (fp8: per tile)
  a.R = a.B * a.Hkv * a.M;
  a.wl = clamp_window(p->window_left);
  a.wr = p->causal ? 0 : clamp_window(p->window_right);
  a.chunk = fa3::clamp_chunk(p->attention_chunk);
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
  while (ns > 1 && (p->workspace == nullptr || ws_bytes_for(ns, a.R, Dv) > p->workspace_bytes)) --ns;
  a.nsplit = ns;
  a.ws_o = ns > 1 ? reinterpret_cast<float*>(p->workspace) : nullptr;
  a.ws_lse = ns > 1 ? reinterpret_cast<float*>(static_cast<char*>(p->workspace) + ws_lse_offset(ns, a.R, Dv))
                    : nullptr;

  const int64_t nblk = (int64_t)a.B * a.Hkv * ns * (a.mloop ? 1 : a.mtiles);
  if constexpr (kF8) {
#if KSEEK_FA3_DECODE_FP8
    Desc8 ds;
    ds.q = p->q_descale;
    ds.k = p->k_descale;
    ds.v = p->v_descale;
    ds.bs = p->descale_batch_stride;
    splitkv_f8_kernel<D><<<(unsigned)nblk, kThreads, Cfg8<D>::kSmem, stream>>>(a, ds);
#endif
  } else {
    // At most one CTA per SM (an explicit num_splits, a few sequences): each SM holds one CTA whatever its
    // size, so the wide form (8 warps, twice the bytes in flight and chains of chunks half as long) costs no
    // occupancy there.
    bool wide = false;
    if constexpr (D == Dv && D <= 128) {
      wide = nblk <= (int64_t)sms_or_default(dev) * (a.mloop ? fa3::build::kDecodeWide : 1) && prepare_wide<T, D>(dev);
      if (wide) splitkv_wide<T, D><<<(unsigned)nblk, 32 * Cfg<D, D, true>::kW, Cfg<D, D, true>::kSmem, stream>>>(a);
    }
    if (!wide) kernel_of<T, D, Dv>()<<<(unsigned)nblk, kThreads, Cfg<D, Dv>::kSmem, stream>>>(a);
  }
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
  if (cudaLaunchKernelEx(&cfg, combine_kernel<TO, Dv>, a) != cudaSuccess) {  // Dv: the combine's rows
    cudaGetLastError();
    combine_kernel<TO, Dv><<<cblk, 128, 0, stream>>>(a);
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
#if KSEEK_FA3_DECODE_FP8
  if (p->dtype == KSEEK_FP8_E4M3) {
    switch (p->head_dim) {
      case 64: return launch<__nv_fp8_e4m3, 64>(p, ns, stream);
      case 128: return launch<__nv_fp8_e4m3, 128>(p, ns, stream);
      default: return launch<__nv_fp8_e4m3, 256>(p, ns, stream);
    }
  }
#endif
  const bool f16 = p->dtype == KSEEK_FP16;
#if KSEEK_FA3_DECODE_DV
  if (p->head_dim != p->head_dim_v)  // (192, 128): supported() takes no other D != Dv
    return f16 ? launch<__half, 192, 128>(p, ns, stream) : launch<__nv_bfloat16, 192, 128>(p, ns, stream);
#endif
  switch (p->head_dim) {
    case 64: return f16 ? launch<__half, 64>(p, ns, stream) : launch<__nv_bfloat16, 64>(p, ns, stream);
    case 128: return f16 ? launch<__half, 128>(p, ns, stream) : launch<__nv_bfloat16, 128>(p, ns, stream);
    default: return f16 ? launch<__half, 256>(p, ns, stream) : launch<__nv_bfloat16, 256>(p, ns, stream);
  }
}

}  // namespace dec
