// prefill_mainloop.cuh: one consumer warpgroup's work on one tile of the prefill kernel: for each of
// the tile's K/V blocks, S = Q K^T (wgmma SS), softcap / masks / online softmax in registers, then
// O += P V (wgmma RS, P from registers). Mainloop names the tile's registers and holds the steps;
// run() is the pipeline of consumer schedule VAR:
//   0  serial: S, softmax, P V, one after the other (v2);
//   1  intra-warpgroup overlap: S of block it+1 and P V of block it in flight together, the softmax
//      of it+1 on the CUDA cores while P V of it runs on the tensor cores (FlashAttention-3);
//   2  1 + ping-pong between the two consumer warpgroups: each takes its turn before issuing its
//      GEMMs and passes it after (named barriers 3 and 4), so one issues while the other runs its
//      softmax.
#pragma once
#include "prefill_scheduler.cuh"

namespace fa3 {

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

// The steps of one tile's mainloop for one consumer warpgroup (rows 64cw..64cw+63 of the tile;
// thread t holds two of them), and run(), the pipeline. The tile's registers (O, the running max
// and sum, S/P) are locals of consumer() (prefill_kernel.cuh), which builds a Mainloop naming
// them per tile: a closure written out, with the references a [&] lambda would hold. (v12 had the
// steps as lambdas inside the kernel; with references to the caller's locals, as here, the
// generated code stays identical -- the same steps over a struct holding the arrays by value
// reorder the compiler's work and change the SASS; see kernels/fa3_hopper/README.md.)
template <typename T, int D, int DV, int BN, int VAR, bool CH = false>  // CH: takes chunked calls (tile_at)
struct Mainloop {
  static constexpr bool F16 = std::is_same<T, __half>::value;
  static constexpr int NS = BN / 2;  // S accumulator floats per thread
  using L = Smem<D, DV, BN>;
  const Args& a;
  const uint32_t &base, &sK, &sV, &sQw;  // smem layout base, K and V rings, this warpgroup's Q rows
  const int &kv, &qb, &cw, &t, &lane;   // K/V blocks before this tile, its Q buffer, warpgroup, thread
  const int &m0, &sk, &diag, &n_max;    // first row, effective key length, bottom-right offset, blocks
  const int (&klo)[2];                  // visible keys of this thread's two rows: klo[r] <= j' <= khi[r]
  const int (&khi)[2];
  float (&o)[DV / 2];         // O accumulator (unnormalised)
  float (&m_run)[2];          // running max of the score (raw or capped) per row
  float (&l_run)[2];          // this thread's partial sum of exp, per row
  float (&s)[NS];             // S tile (64 x BN over the warpgroup), then P in fp32
  uint32_t (&pa)[NS / 8][4];  // P as wgmma A fragments (bf16/fp16)
  float (&corr)[2];           // rescale of O and l for the block just scored

  // Ping-pong (VAR 2): take the tensor cores (bar.sync on barrier 3 + cw, 256 threads) before
  // issuing GEMMs, pass them to the other warpgroup (bar.arrive on its barrier) after.
  __device__ __forceinline__ void take_turn() const {
    if constexpr (VAR == 2) named_bar_sync(3 + cw, 256);
  }
  __device__ __forceinline__ void pass_turn() const {
    if constexpr (VAR == 2) named_bar_arrive(3 + (cw ^ 1), 256);
  }
  // S = Q K^T of block `it` into s: wait for K, issue, commit (one wgmma group); not waited here.
  __device__ __forceinline__ void issue_s(int it) const {
    const int g = kv + it;
    mbar_wait(base + L::kBarKF + 8 * (g & 1), (g >> 1) & 1);
    const uint32_t kst = sK + (g & 1) * L::kKBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
      wgmma_ss<F16>(s, desc_kmajor(sQw, kBM, ks), desc_kmajor(kst, BN, ks), ks > 0 ? 1 : 0);
    wgmma_commit();
  }
  // After S of block `it` has landed: free its K stage.
  __device__ __forceinline__ void release_k(int it) const {
    fence_regs(s);
    __syncwarp();
    if (lane == 0) mbar_arrive(base + L::kBarKE + 8 * ((kv + it) & 1));
  }
  // Softcap, masks, online softmax of s (block `it`): s becomes P in fp32, m_run/l_run advance,
  // corr = the factor O must be multiplied by before P V of this block is added.
  __device__ __forceinline__ void softmax(int it) const {
    const int n0 = (n_max - 1 - it) * BN;
    if (a.softcap_on) {  // before masking: garbage/NaN keys past the end are overwritten below
#pragma unroll
      for (int i = 0; i < NS; ++i) s[i] = a.cap_out * tanh_approx(s[i] * a.cap_in);
    }
    // mask: keys past Sk_b, right window (causal), left window; only blocks that need it. A chunked call
    // masks every block: a per-block chunk test (two divisions) in this loop cost the hd64 rows 4-9%
    // without a chunk (session 16, bench26 rows 1-3), the per-element mask costs only chunked calls
    if (n0 + BN > sk || (a.wr >= 0 && n0 + BN - 1 > m0 + diag + a.wr) ||
        (a.wl >= 0 && n0 < m0 + kBM - 1 + diag - a.wl) || (CH && a.chunk > 0)) {
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
  }
  // Skipped when no row of the warp changed its max (corr exactly 1): on long rows most blocks,
  // 64-128 FMULs per thread each. The vote is warp-uniform, so is the branch. Not for Dv = 64:
  // there the vote and branch cost more than the 32 FMULs (hd64 -6%, NOTES v5c/v6).
  __device__ __forceinline__ void rescale_o() const {
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
  }
  // O += P V of block `it` (P in pa): wait for V, zero untrusted V rows, issue, commit.
  __device__ __forceinline__ void issue_pv(int it) const {
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
    fence_regs(o);  // the rescale of o and the packing of pa happen before wgmma.fence
    fence_regs(pa);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) pv_step<F16, DV, BN>(o, pa[ks], vst, ks);
    wgmma_commit();
  }
  __device__ __forceinline__ void release_v(int it) const {
    fence_regs(o);
    __syncwarp();
    if (lane == 0) mbar_arrive(base + L::kBarVE + 8 * ((kv + it) & 1));
  }
  // The Q buffer is free once the last S of this tile has landed (before the last P V).
  __device__ __forceinline__ void release_q() const {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar_qe<L>(base, qb));
  }
  // The tile's n_cnt > 0 K/V blocks in consumer schedule VAR (the header says which).
  __device__ __forceinline__ void run(int n_cnt) const {
    if constexpr (VAR >= 1) {
      // O is rescaled once P V of block it has landed.
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
        wgmma_wait<1>();  // S of block it (the older group) has landed; P V may still run
        release_k(it);
        softmax(it);
        wgmma_wait<0>();
        fence_regs(pa);  // pa was read by the P V wgmma until here: keep it from being reused
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
};

}  // namespace fa3
