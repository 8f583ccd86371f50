// decode.cuh: split-KV decode for paged and dense KV caches (namespace dec; mma.sync + cp.async).
// One CTA of 4 warps per (batch, KV head, split, 16-row query tile): the G query heads of a KV
// head times the Sq rows form the M rows of an m16 MMA tile; each warp streams every 4th 16-key
// chunk through its own cp.async ring; several splits write fp32 partials to the workspace and a
// combine kernel merges them. Entry points: dec::supported, dec::workspace_bytes, dec::run (the
// dispatch in fa3_hopper.cu decides which calls come here). Design, split heuristic and workspace
// layout: tests/probes/README_decode.md.
#pragma once
#include <algorithm>
#include <type_traits>

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
  int softcap_on;
  float scale_log2;                     // no softcap: scale*log2(e); softcap: scale/softcap
  float cap_log2;                       // softcap*log2(e)
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
// one logical chunk fall into 8 different 16-byte bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return (uint32_t)(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

// Visible key range (positions after leftpad, inclusive) of query row i of a sequence with sq query
// rows; lo > hi when empty.
__device__ __forceinline__ int row_lo(const Args& a, int i, int sk, int sq) {
  return a.wl >= 0 ? max(0, i + sk - sq - a.wl) : 0;
}
__device__ __forceinline__ int row_hi(const Args& a, int i, int sk, int sq) {
  return a.wr >= 0 ? min(sk - 1, i + sk - sq + a.wr) : sk - 1;
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

  SeqQ sqb;
  if (!seq_q(a, b, sqb)) return;  // a mixed call's long sequence: the prefill launch runs it
  const int m0 = mt * kRows;
  if (m0 >= sqb.sq * a.G) return;             // packed queries: past this sequence's rows
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
    pa[0] = pack2<fa3::is_f16<T>>(s[0][0], s[0][1]);
    pa[1] = pack2<fa3::is_f16<T>>(s[0][2], s[0][3]);
    pa[2] = pack2<fa3::is_f16<T>>(s[1][0], s[1][1]);
    pa[3] = pack2<fa3::is_f16<T>>(s[1][2], s[1][3]);

    // O += P V: V^T fragments by ldmatrix.trans, two n8 tiles of Dv per x4
#pragma unroll
    for (int n2 = 0; n2 < D / 16; ++n2) {
      uint32_t vb[4];
      ldsm_x4_trans(vb, vt + swz<D>(a_row, 2 * n2 + a_ch));
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
      T* dst = (T*)a.o + sqb.o + (int64_t)i * a.o_rs + (int64_t)hq * a.o_hs + d;
      reinterpret_cast<uint32_t*>(dst)[0] = pack2<fa3::is_f16<T>>(acc.x * inv, acc.y * inv);
      reinterpret_cast<uint32_t*>(dst)[1] = pack2<fa3::is_f16<T>>(acc.z * inv, acc.w * inv);
      if (a.lse && d == 0) a.lse[sqb.lse + (int64_t)hq * a.lse_hs + i] = lse;
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
  for (int e = 0; e < E; e += 2) reinterpret_cast<uint32_t*>(dst)[e / 2] = pack2<fa3::is_f16<T>>(acc[e], acc[e + 1]);
  if (a.lse && lane == 0) a.lse[sqb.lse + (int64_t)hq * a.lse_hs + i] = lse;
}

// ------------------------------------------------------------------------------------------------
// Host side
// ------------------------------------------------------------------------------------------------
// SMs of the device; 132 (H100/H200 SXM) when the query fails.
inline int sms_or_default(int dev) {
  const int n = fa3::sm_count(dev);
  return n > 0 ? n : 132;
}

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
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return false;
  if (p->out_dtype != p->dtype) return false;
  if (p->head_dim != p->head_dim_v) return false;
  if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256) return false;
  if (p->cu_seqlens_k) return false;  // packed queries over a dense or paged cache only
  if (p->batch <= 0 || p->heads_kv <= 0 || p->heads_q <= 0 || p->heads_q % p->heads_kv) return false;
  if (p->seqlen_q < 0 || p->seqlen_k < 0 || p->seqlen_q >= (1 << 28) || p->seqlen_k >= (1 << 28)) return false;
  const int64_t rows = (int64_t)row_cap(p) * (p->heads_q / p->heads_kv);
  if (rows > kMaxRows || (p->cu_seqlens_q && rows == 0 && p->seqlen_q > 0)) return false;
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
  return fa3::device_is_sm90(current_device());
}

// Split count: explicit num_splits is honoured (clamped to [1, 256]); 0 = a wave-quantized cost
// model over the CTA slots of the GPU (see README_decode.md).
inline int choose_splits(const kseek_params* p) {
  if (p->num_splits > 0) return p->num_splits < kMaxSplits ? p->num_splits : kMaxSplits;
  const int dev = current_device();
  const int g = p->heads_q / p->heads_kv;
  const int rows = row_cap(p) * g;
  const int mtiles = (rows + kRows - 1) / kRows;
  const int64_t ctas = (int64_t)p->batch * p->heads_kv * (mtiles > 0 ? mtiles : 1);
  int occ = ctas_per_sm(p, dev);
  if (occ <= 0) occ = 1;
  const int64_t slots = (int64_t)sms_or_default(dev) * occ;
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
  // KSEEK_FA3_DECODE_SPLITS=ragged: seqused_k lives on the device, so the model above assumes every
  // sequence holds `keys`; with ragged lengths one long sequence then rests on its few CTAs (d17). At
  // least enough splits that a CTA covers <= kSplitKeys of the longest; a split past a shorter
  // sequence's keys finds none and writes LSE -inf, which the combine skips.
  if constexpr (fa3::build::kDecodeSplits == fa3::build::decsplits_ragged) {
    if (p->seqused_k) {
      const int64_t need = (keys + fa3::build::kSplitKeys - 1) / fa3::build::kSplitKeys;
      if (need > best) best = (int)std::min<int64_t>(need, kMaxSplits);
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
