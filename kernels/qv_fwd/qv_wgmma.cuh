// qv_wgmma.cuh: the long-sequence kernel of the qv forward on wgmma (sequences with > 64 rows per KV
// head: prefill chunks). Design: kernels/qv_fwd/qv_fwd.cu; Hopper building blocks from
// kernels/fa3_hopper/hopper_primitives.cuh (128B-swizzled chunks, descriptors, wgmma generators).
//
// A CTA is two warpgroups on 64 rows of one sequence and KV head. Shared memory, in 64-column chunks
// of 128-byte rows (fa3::swz_offset; chunk 0 = the 64 q / k dims, chunks 1.. = the Dv qv / v dims):
// the [q, qv] tile (64 rows), two stages of the [k, v] block (32 keys) and one exchange buffer.
// Per block: warpgroup w forms S_w = [q, qv] . [k, v]^T over its half of the k16 steps (wgmma
// m64n32k16, both operands from shared memory); thread t of either warpgroup holds the same S elements,
// so the halves cross through the exchange buffer and both warpgroups hold S_0 + S_1 (IEEE addition
// commutes: the same S, max and sum). Warpgroup w then accumulates P V for the Dv columns
// [w Dv/2, (w+1) Dv/2) (wgmma m64n128k16, P from registers, V N-major from shared memory).
// Without qv (FA3's D 64 with Dv 256 / 512) S has the four q . k steps only.
#pragma once
#include "../fa3_hopper/hopper_primitives.cuh"
#include "qv_common.cuh"

namespace qv {

template <int Dv>
struct CfgW {
  static constexpr int kM = 64, kN = 32, kThreads = 256;
  static constexpr int kChunks = 1 + Dv / 64;            // 64-column chunks of a [q, qv] or [k, v] row
  static constexpr int kQ = kM * 128 * kChunks;          // bytes of the [q, qv] tile (a multiple of 1024)
  static constexpr int kStage = kN * 128 * kChunks;      // bytes of one [k, v] block
  static constexpr int kOffStage = kQ;
  static constexpr int kOffX = kOffStage + 2 * kStage;   // exchange: [2 warpgroups][16][128 threads] floats
  static constexpr int kSmem = kOffX + 2 * 16 * 128 * 4 + 1024;   // + slack to align the base to 1024 bytes
  static constexpr int kNB = Dv / 256;                   // wgmma N = 128 per warpgroup and k16 step of P V
  static constexpr int kWgChunk = Dv / 128;              // 64-column V chunks per warpgroup
};

template <typename T, int Dv>
__global__ void __launch_bounds__(256, 1)
    qv_attn_wg(const __grid_constant__ kseek_params p, const __grid_constant__ Args a) {
  using C = CfgW<Dv>;
  constexpr bool F16 = std::is_same<T, __half>::value;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sbase = (raw + 1023u) & ~1023u;         // swizzle atoms need 1024-byte alignment
  float* xbuf = reinterpret_cast<float*>(smem_raw + (sbase - raw) + C::kOffX);
  const int tid = threadIdx.x, wg = tid >> 7, t = tid & 127;
  const int hkv = blockIdx.y, b = blockIdx.z;
  const int G = a.G;

  const Seq s = seq_of(p, b);
  const int mb = s.sq * G;
  if (!role_takes(a.role, mb)) return;
  const int m0 = blockIdx.x * C::kM;
  if (m0 >= mb) return;
  int kbeg, kend;
  const int nblk = tile_keys_or_zero<T, C::kM, C::kN, Dv>(p, s, b, hkv, G, m0, mb, tid, C::kThreads, kbeg, kend);
  if (nblk == 0) return;   // no visible key for any row of the tile: its rows are zeroed
  const bool has_qv = a.qv != nullptr;
  const int nks = has_qv ? 4 * C::kChunks : 4;           // k16 steps of S
  const int ks0 = wg ? nks / 2 : 0, ks1 = wg ? nks : nks / 2;

  // this thread's rows (accumulator rows r and r + 8) and their visible keys
  const int r0 = fa3::acc_row(t, 0);
  int rlo[2], rhi[2];
  bool rvalid[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int m = m0 + r0 + 8 * u;
    rvalid[u] = m < mb;
    if (rvalid[u]) {
      row_range(p, s, m / G, rlo[u], rhi[u]);
    } else {
      rlo[u] = 0;
      rhi[u] = -1;
    }
  }

  // ---- [q, qv] tile: thread -> 16-byte units; rows past the sequence are zeros -----------------------
  {
    const int qchunks = has_qv ? C::kChunks : 1;
    for (int e = tid; e < C::kM * qchunks * 8; e += C::kThreads) {
      const int r = e / (qchunks * 8), u = e % (qchunks * 8);
      const int col = u * 8;                             // column of [q, qv]
      const int m = m0 + r;
      const bool ok = m < mb;
      const T* src = (const T*)p.q;
      if (ok) {
        const int i = m / G, h = hkv * G + m % G;
        if (col < kD) {
          const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * p.q_row_stride
                                             : (int64_t)b * p.q_batch_stride + (int64_t)i * p.q_row_stride;
          src = (const T*)p.q + off + (int64_t)h * p.q_head_stride + col;
        } else {
          const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * a.qv_rs : (int64_t)b * a.qv_bs + (int64_t)i * a.qv_rs;
          src = (const T*)a.qv + off + (int64_t)h * a.qv_hs + (col - kD);
        }
      }
      cp16(sbase + fa3::swz_offset(r, col, C::kM), src, ok);
    }
  }

  // ---- [k, v] block loader: thread -> key row tid / 8, unit tid % 8 of every chunk --------------------
  const int lrow = tid >> 3, lunit = tid & 7;
  const T* K = (const T*)p.k;
  const T* V = (const T*)p.v;
  const int32_t* pages = p.page_table ? p.page_table + (int64_t)b * p.page_table_stride : nullptr;
  auto load_block = [&](int blk, int stage) {
    const int jp = kbeg + blk * C::kN + lrow;
    const bool ok = jp < kend;
    const T* kp = K;
    const T* vp = V;
    if (ok) kv_rows(p, s, pages, b, hkv, jp, K, V, kp, vp);
    const uint32_t st = sbase + C::kOffStage + stage * C::kStage;
    cp16(st + fa3::swz_offset(lrow, lunit * 8, C::kN), kp + lunit * 8, ok);
#pragma unroll
    for (int c = 1; c < C::kChunks; ++c) {
      const int col = (c - 1) * 64 + lunit * 8;          // column of v
      cp16(st + fa3::swz_offset(lrow, kD + col, C::kN), vp + col, ok);
    }
  };

  load_block(0, 0);
  cp_commit();

  float o[C::kNB][64];
#pragma unroll
  for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
    for (int i = 0; i < 64; ++i) o[nb][i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};
  const float smul = p.scale;
  const bool capped = p.softcap > 0.f;

  for (int blk = 0; blk < nblk; ++blk) {
    if (blk + 1 < nblk) {
      load_block(blk + 1, (blk + 1) & 1);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    fa3::fence_proxy_async_smem();   // cp.async wrote through the generic proxy; wgmma reads through the async one
    __syncthreads();
    const uint32_t st = sbase + C::kOffStage + (blk & 1) * C::kStage;

    // this warpgroup's half of S (64 x 32)
    float sacc[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) sacc[i] = 0.f;
    fa3::wgmma_fence();
    for (int ks = ks0; ks < ks1; ++ks)
      fa3::wgmma_ss<F16>(sacc, fa3::desc_kmajor(sbase, C::kM, ks), fa3::desc_kmajor(st, C::kN, ks), 1);
    fa3::wgmma_commit();
    fa3::wgmma_wait<0>();
    fa3::fence_regs(sacc);

    // the halves cross: thread t of both warpgroups holds the same elements
#pragma unroll
    for (int i = 0; i < 16; ++i) xbuf[(wg * 16 + i) * 128 + t] = sacc[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 16; ++i) sacc[i] += xbuf[((1 - wg) * 16 + i) * 128 + t];

    // scores (log2 units), masks, online softmax
    const int kb = kbeg + blk * C::kN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int u = (i >> 1) & 1;
      const int j = kb + fa3::acc_col(t, i);
      float x = sacc[i] * smul;
      if (capped) x = p.softcap * tanhf(x / p.softcap);
      x = (j >= rlo[u] && j <= rhi[u] && j < kend) ? x * kLog2e : -INFINITY;
      sacc[i] = x;
      mx[u] = fmaxf(mx[u], x);
    }
    float alpha[2], muse[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], 1));
      mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], 2));
      const float mn = fmaxf(mrow[u], mx[u]);
      muse[u] = mn == -INFINITY ? 0.f : mn;
      alpha[u] = exp2f(mrow[u] - muse[u]);
      mrow[u] = mn;
      lsum[u] *= alpha[u];
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int u = (i >> 1) & 1;
      sacc[i] = exp2f(sacc[i] - muse[u]);
      lsum[u] += sacc[i];
    }
    uint32_t pa[2][4];
    fa3::acc_to_a<F16, 16>(sacc, pa);
#pragma unroll
    for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
      for (int i = 0; i < 64; ++i) o[nb][i] *= alpha[(i >> 1) & 1];

    // O += P V for this warpgroup's columns
    fa3::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int nb = 0; nb < C::kNB; ++nb) {
        const uint32_t vchunk = st + (uint32_t)((1 + wg * C::kWgChunk + 2 * nb) * C::kN * 128);
        fa3::wgmma_rs_tb<F16>(o[nb], pa[kk], fa3::desc_mnmajor(vchunk, C::kN, kk), 1);
      }
    fa3::wgmma_commit();
    fa3::wgmma_wait<0>();
#pragma unroll
    for (int nb = 0; nb < C::kNB; ++nb) fa3::fence_regs(o[nb]);
    __syncthreads();   // the stage and the exchange buffer are free for the next block
  }
  cp_wait<0>();

  // ---- epilogue: o / l and lse ------------------------------------------------------------------------
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    lsum[u] += __shfl_xor_sync(0xffffffffu, lsum[u], 1);
    lsum[u] += __shfl_xor_sync(0xffffffffu, lsum[u], 2);
  }
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    if (!rvalid[u]) continue;
    const int m = m0 + r0 + 8 * u;
    const int i = m / G, h = hkv * G + m % G;
    const float l = lsum[u];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T* op = out_ptr<T>(p, s, b, i, h) + wg * (Dv / 2);
#pragma unroll
    for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
      for (int i2 = 0; i2 < 64; i2 += 4) {   // elements i2 + 2u, i2 + 2u + 1: row r0 + 8u, two columns
        const int e = i2 + 2 * u;
        *reinterpret_cast<uint32_t*>(op + nb * 128 + fa3::acc_col(t, e)) = pack<T>(o[nb][e] * inv, o[nb][e + 1] * inv);
      }
    float* lp = lse_ptr(p, s, b, i, h);
    if (lp && wg == 0 && (t & 3) == 0) *lp = l > 0.f ? (mrow[u] + log2f(l)) * kLn2 : -INFINITY;
  }
}

}  // namespace qv
