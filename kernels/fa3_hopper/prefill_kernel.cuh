// prefill_kernel.cuh: the bf16/fp16 prefill kernel fa3::fwd_kernel<T, D, DV, BN, VAR, DYN>. A
// persistent grid of at most one CTA of 384 threads per SM: warpgroup 0 produces (one thread
// issues the TMA loads: prefill_producer.cuh), warpgroups 1 and 2 consume 64 query rows each of
// every 128-row tile (consumer() below: prefill_mainloop.cuh, then prefill_epilogue.cuh). T =
// element type (bf16 or fp16, out = in), D / DV = q/k and v head dims, BN = keys per K/V block,
// VAR = consumer schedule (0, 1, 2: prefill_mainloop.cuh), DYN = dynamic tile schedule
// (prefill_scheduler.cuh).
#pragma once
#include "prefill_epilogue.cuh"
#include "prefill_mainloop.cuh"
#include "prefill_producer.cuh"
#include "prefill_scheduler.cuh"

namespace fa3 {

// Consumer warpgroup cw (0 or 1): the CTA's tiles in the producer's order, for each the tile's
// registers, its mainloop and its epilogue.
template <typename T, int D, int DV, int BN, int VAR, bool DYN, bool PG>
__device__ __forceinline__ void consumer(uint32_t base, const CUtensorMap* to, const Args& a, int cw) {
  constexpr int NS = BN / 2;  // S accumulator floats per thread
  using L = Smem<D, DV, BN>;
  const uint32_t sQ = base + L::kQ, sK = base + L::kK, sV = base + L::kV;
  const int t = threadIdx.x & 127;
  const int lane = t & 31;
  // Ping-pong (VAR 2): a warpgroup takes its turn (bar.sync on barrier 3 + cw, 256 threads)
  // before issuing GEMMs and hands it over (bar.arrive on the other's barrier) after issuing.
  // Both warpgroups take the same turns (same tiles, same K/V tiles); warpgroup 1 hands over
  // once before the first turn (warpgroup 0 starts) and warpgroup 0 takes one extra turn after
  // the last tile, so no arrival is left pending when the CTA exits.
  if constexpr (VAR == 2) {
    if (cw == 1) named_bar_arrive(3, 256);
  }
  int kv = 0, qi = 0;
  const int ntiles = tile_count<PG>(a);
  for (int idx = blockIdx.x;;) {
    if constexpr (DYN) {
      mbar_wait(bar_q<L>(base, qbuf<L>(qi)), qphase<L>(qi));  // the next tile's index (and its Q, when it has keys)
      idx = __shfl_sync(0xffffffffu, ld_shared_s32(tile_slot<L>(base, qbuf<L>(qi))), 0);  // (all lanes read the same)
      if (idx < 0) break;
    } else if (idx >= ntiles) {
      break;
    }
    Tile ti;
    if (!tile_at<BN, PG, DYN>(a, idx, ti)) {  // static only (the dynamic producer never hands these out)
      idx += gridDim.x;
      continue;
    }
    const int m0 = ti.m0, sk = ti.sk, diag = ti.diag, n_max = ti.n_max, n_cnt = ti.n_cnt;
    const int row0 = m0 + 64 * cw + acc_row(t, 0);  // query row of elements i%4 in {0,1}; +8 for {2,3}

    // visible keys of this thread's two rows: klo[r] <= j' <= khi[r]
    int klo[2], khi[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      khi[r] = sk - 1;
      if (a.wr >= 0) khi[r] = min(khi[r], row + diag + a.wr);
      klo[r] = a.wl >= 0 ? row + diag - a.wl : 0;
      if constexpr (DYN) {  // chunked calls run on the dynamic-schedule kernels only (tile_at's CH)
        if (a.chunk > 0) {  // the row's own chunk
          const int c0 = chunk_lo(row + diag, a.chunk);
          klo[r] = max(klo[r], c0);
          khi[r] = min(khi[r], c0 + a.chunk - 1);
        }
      }
    }

    float o[DV / 2];
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY};  // running max of the score (raw or capped) per row
    float l_run[2] = {0.f, 0.f};              // this thread's partial sum of exp, per row

    const int qb = qbuf<L>(qi);                                 // this tile's Q buffer
    const uint32_t sQw = sQ + qb * L::kQBytes + cw * 64 * 128;  // this warpgroup's 64 rows (8 swizzle atoms)
    float s[NS];                                                // S tile, then P in fp32
    uint32_t pa[NS / 8][4];                                     // P as wgmma A fragments (bf16/fp16)
    float corr[2];                                              // rescale of O and l for the block just scored

    const Mainloop<T, D, DV, BN, VAR, DYN> ml{a, base, sK, sV, sQw, kv, qb, cw, t, lane, m0, sk, diag, n_max,
                                         klo, khi, o, m_run, l_run, s, pa, corr};
    if constexpr (DYN) {
      if (n_cnt == 0) ml.release_q();  // no keys: O = 0, LSE = -inf below
    }
    if (n_cnt > 0) {
      if constexpr (!DYN) mbar_wait(bar_q<L>(base, qb), qphase<L>(qi));
      ml.run(n_cnt);
    }

    if (DYN || n_cnt > 0) {
      ++qi;
      kv += n_cnt;
    }

    epilogue<T, DV, L>(a, ti, to, base, cw, t, row0, o, m_run, l_run);
    if constexpr (!DYN) idx += gridDim.x;
  }  // tiles
  if constexpr (L::kOStage) {
    if (a.o_tma && t == 0) bulk_wait();  // the last O store has completed
  }
  if constexpr (VAR == 2) {
    if (cw == 0) named_bar_sync(3, 256);  // absorb warpgroup 1's last hand-over
  }
}

// Barriers are initialised by thread 0; after the one CTA-wide __syncthreads the two roles run
// apart, rebalancing registers with setmaxnreg (producer down to kProducerRegs, consumers up).
template <typename T, int D, int DV, int BN, int VAR, bool DYN, bool PG>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap to,
               const __grid_constant__ Args a) {
  using L = Smem<D, DV, BN>;
  if constexpr (PG && DYN) {  // a mixed call's prefill CTAs past its budget: counted as finished, nothing else
    if ((int)blockIdx.x >= cta_budget<PG, DYN>(a)) {
      if (threadIdx.x == 0) sched_done(a);
      return;
    }
  }
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int b = 0; b < L::kQBuf; ++b) {
      mbar_init(bar_q<L>(base, b), 1);
      mbar_init(bar_qe<L>(base, b), kConsumerWarps);
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

  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    // thread 0 produces; the PG kernels of KSEEK_FA3_PAGEIDS=warp use the whole warp 0
    if (warp_producer<PG>() ? threadIdx.x < 32 : threadIdx.x == 0) producer<D, DV, BN, DYN, PG>(base, &tq, &tk, &tv, a);
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    consumer<T, D, DV, BN, VAR, DYN, PG>(base, &to, a, wg - 1);
  }
}

}  // namespace fa3
