// prefill_producer.cuh: the producer of the prefill kernel, one thread of warpgroup 0. It walks the
// CTA's tiles (prefill_scheduler.cuh) and, for each, loads Q into a free Q buffer and the tile's
// K/V blocks into the 2-stage ring, each by TMA onto an mbarrier, waiting for the consumers to free
// a buffer or stage before reusing it. Dynamic schedule: it also draws the next tile index from
// the counter and hands it to the consumers (-1: no more tiles).
#pragma once
#include "prefill_scheduler.cuh"

namespace fa3 {

// K and V of block n_block of tile ti from a paged cache into ring stage kv % 2: BN / prow boxes of
// prow rows per 64-column chunk, each from its page (the same bytes as the dense path's one box per
// chunk, so each stage's expected transaction count is unchanged). The page ids are read 8 at a time,
// all 8 loads in flight together, the first 8 before the waits for the stage (their latency runs
// under them): read one by one, between TMA issues, they made the producer the bottleneck at page
// size 16 (NOTES v13). Rows past the sequence's last key read its last page: the mainloop masks those
// keys and zeroes their V rows (vzero); the page-table row is never read past the sequence's pages.
template <int D, int DV, int BN>
__device__ __forceinline__ void load_kv_paged(uint32_t base, const CUtensorMap* tk, const CUtensorMap* tv,
                                              const Args& a, const Tile& ti, int n_block, int kv) {
  using L = Smem<D, DV, BN>;
  constexpr int kG = 8;
  const int stage = kv & 1;
  const uint32_t ph = (kv >> 1) & 1;
  const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
  const uint32_t dk = base + L::kK + stage * L::kKBytes, dv = base + L::kV + stage * L::kVBytes;
  const int32_t* row = a.pt + (int64_t)ti.b * a.pt_stride;
  const int last = (ti.k_coord + ti.sk - 1) / a.psz;  // the sequence's last page (the tile has keys: sk >= 1)
  const int key0 = ti.k_coord + n_block * BN;          // logical key row of the block's first key
  const int nb = BN / a.prow;
  for (int g0 = 0; g0 < nb; g0 += kG) {
    int page[kG];
#pragma unroll
    for (int u = 0; u < kG; ++u)
      page[u] = g0 + u < nb ? __ldg(row + min((key0 + (g0 + u) * a.prow) / a.psz, last)) : 0;
    if (g0 == 0) {
      mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
      mbar_arrive_expect_tx(kf, L::kKBytes);
    }
#pragma unroll
    for (int u = 0; u < kG; ++u) {
      if (g0 + u >= nb) break;
      const int j = (g0 + u) * a.prow, key = key0 + j;
      const int slot = key - (key / a.psz) * a.psz;
#pragma unroll
      for (int c = 0; c < pad64(D) / 64; ++c)
        tma_tile(dk + c * BN * 128 + j * 128, tk, kf, 64 * c, slot, ti.hkv, page[u], a.k_swap);
    }
    if (g0 == 0) {
      mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
      mbar_arrive_expect_tx(vf, L::kVBytes);
    }
#pragma unroll
    for (int u = 0; u < kG; ++u) {
      if (g0 + u >= nb) break;
      const int j = (g0 + u) * a.prow, key = key0 + j;
      const int slot = key - (key / a.psz) * a.psz;
#pragma unroll
      for (int c = 0; c < pad64(DV) / 64; ++c)
        tma_tile(dv + c * BN * 128 + j * 128, tv, vf, 64 * c, slot, ti.hkv, page[u], a.v_swap);
    }
  }
}

// K and V of K/V block n_block of tile ti into ring stage kv % 2 (phase (kv / 2) % 2), each once the
// consumers have freed that stage.
template <int D, int DV, int BN, bool PG>
__device__ __forceinline__ void load_kv(uint32_t base, const CUtensorMap* tk, const CUtensorMap* tv, const Args& a,
                                        const Tile& ti, int n_block, int kv) {
  if constexpr (PG) {
    if (a.pt) return load_kv_paged<D, DV, BN>(base, tk, tv, a, ti, n_block, kv);
  }
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
             ti.hkv, k_batch(a, ti), a.k_swap);
  mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
  mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
  for (int c = 0; c < pad64(DV) / 64; ++c)
    tma_tile(sV + stage * L::kVBytes + c * BN * 128, tv, vf, 64 * c, ti.k_coord + n_block * BN,
             ti.hkv, k_batch(a, ti), a.v_swap);
}

// Persistent: this CTA runs tiles blockIdx.x, blockIdx.x + gridDim.x, ... (static) or blockIdx.x
// and then whatever the counter hands out (DYN). Producer and consumers walk the same sequence;
// `kv` counts K/V tiles over all of them (ring stage kv % 2, phase (kv / 2) % 2) and `qi` the Q
// loads, so the producer loads the next tile's Q and K/V while the consumers finish the current one.
template <int D, int DV, int BN, bool DYN, bool PG>
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
  const int ntiles = tile_count<PG>(a);
  for (int idx = blockIdx.x;;) {
    Tile ti;
    if constexpr (DYN) {
      const bool more = idx < ntiles;
      if (more && !tile_at<BN, PG>(a, idx, ti)) {  // varlen: starts past its sequence's end
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
      if (idx >= ntiles) break;
      if (!tile_at<BN, PG>(a, idx, ti) || ti.n_cnt == 0) {
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
    for (int it = 0; it < ti.n_cnt; ++it, ++kv) load_kv<D, DV, BN, PG>(base, tk, tv, a, ti, ti.n_max - 1 - it, kv);
    if constexpr (DYN) idx = next_tile(a);
    else idx += gridDim.x;
  }
  if constexpr (DYN) sched_done(a);
}

}  // namespace fa3
