// prefill_producer.cuh: the producer of the prefill kernel, one thread of warpgroup 0. It walks the
// CTA's tiles (prefill_scheduler.cuh) and, for each, loads Q into a free Q buffer and the tile's
// K/V blocks into the 2-stage ring, each by TMA onto an mbarrier, waiting for the consumers to free
// a buffer or stage before reusing it. Dynamic schedule: it also draws the next tile index from
// the counter and hands it to the consumers (-1: no more tiles).
#pragma once
#include "prefill_scheduler.cuh"

namespace fa3 {

// K and V of K/V block n_block of tile ti into ring stage kv % 2 (phase (kv / 2) % 2), each once the
// consumers have freed that stage.
template <int D, int DV, int BN>
__device__ __forceinline__ void load_kv(uint32_t base, const CUtensorMap* tk, const CUtensorMap* tv, const Args& a,
                                        const Tile& ti, int n_block, int kv) {
  using L = Smem<D, DV, BN>;
  const uint32_t sK = base + L::kK, sV = base + L::kV;
  const int stage = kv & 1;
  const uint32_t ph = (kv >> 1) & 1;
  const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
  mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
  mbar_arrive_expect_tx(kf, L::kKBytes);
#pragma unroll
  for (int c = 0; c < pad64(D) / 64; ++c)
    tma_tile(sK + stage * L::kKBytes + c * BN * 128, tk, kf, 64 * c, ti.k_coord + n_block * BN,
             ti.hkv, ti.tb, a.k_swap);
  mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
  mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
  for (int c = 0; c < pad64(DV) / 64; ++c)
    tma_tile(sV + stage * L::kVBytes + c * BN * 128, tv, vf, 64 * c, ti.k_coord + n_block * BN,
             ti.hkv, ti.tb, a.v_swap);
}

// Persistent: this CTA runs tiles blockIdx.x, blockIdx.x + gridDim.x, ... (static) or blockIdx.x
// and then whatever the counter hands out (DYN). Producer and consumers walk the same sequence;
// `kv` counts K/V tiles over all of them (ring stage kv % 2, phase (kv / 2) % 2) and `qi` the Q
// loads, so the producer loads the next tile's Q and K/V while the consumers finish the current one.
template <int D, int DV, int BN, bool DYN>
__device__ __forceinline__ void producer(uint32_t base, const CUtensorMap* tq, const CUtensorMap* tk,
                                         const CUtensorMap* tv, const Args& a) {
  using L = Smem<D, DV, BN>;
  const uint32_t sQ = base + L::kQ;
  prefetch_tmap(tq);
  prefetch_tmap(tk);
  prefetch_tmap(tv);
  // (declared qi before kv: the other order gives the same program with other register names in
  // the SASS -- ptxas follows the order of the PTX's virtual registers; README.md)
  int qi = 0, kv = 0;
  for (int idx = blockIdx.x;;) {
    Tile ti;
    if constexpr (DYN) {
      const bool more = idx < a.tiles;
      if (more && !tile_at<BN>(a, idx, ti)) {  // varlen: starts past its sequence's end
        idx = next_tile(a);
        continue;
      }
      // the consumers are done with this buffer's previous Q (and index)
      mbar_wait(bar_qe<L>(base, qbuf<L>(qi)), qphase<L>(qi) ^ 1);
      st_shared_s32(tile_slot<L>(base, qbuf<L>(qi)), more ? idx : -1);
      if (!more || ti.n_cnt == 0) {
        mbar_arrive(bar_q<L>(base, qbuf<L>(qi)));  // no Q to load: the index alone (-1 ends the consumers' loop)
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
      mbar_wait(bar_qe<L>(base, qbuf<L>(qi)), qphase<L>(qi) ^ 1);  // the consumers are done with this buffer
    }
    {
      const int qb = qbuf<L>(qi);
      mbar_arrive_expect_tx(bar_q<L>(base, qb), L::kQBytes);
#pragma unroll
      for (int c = 0; c < pad64(D) / 64; ++c)
        tma_tile(sQ + qb * L::kQBytes + c * kBM * 128, tq, bar_q<L>(base, qb), 64 * c, ti.q_coord, ti.h, ti.tb,
                 a.q_swap);
    }
    ++qi;
    for (int it = 0; it < ti.n_cnt; ++it, ++kv) load_kv<D, DV, BN>(base, tk, tv, a, ti, ti.n_max - 1 - it, kv);
    if constexpr (DYN) idx = next_tile(a);
    else idx += gridDim.x;
  }
  if constexpr (DYN) sched_done(a);
}

}  // namespace fa3
