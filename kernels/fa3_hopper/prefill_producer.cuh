// prefill_producer.cuh: the producer of the prefill kernel, one thread of warpgroup 0. It walks the
// CTA's tiles (prefill_scheduler.cuh) and, for each, loads Q into a free Q buffer and the tile's
// K/V blocks into the 2-stage ring, each by TMA onto an mbarrier, waiting for the consumers to free
// a buffer or stage before reusing it. Dynamic schedule: it also draws the next tile index from
// the counter and hands it to the consumers (-1: no more tiles).
#pragma once
#include "prefill_scheduler.cuh"
#include "variants.cuh"

namespace fa3 {

// One K (or V) block of a paged cache into the stage at `dst`: BN / prow boxes of prow rows per
// 64-column chunk, each from its page (the same bytes as the dense path's one box per chunk, so the
// stage's expected transaction count is unchanged). Rows past the sequence's last key read a page
// that holds keys (the last one): the mainloop masks those keys and zeroes their V rows (vzero),
// and the page-table row is never read past the sequence's pages.
template <int DD, int BN>
__device__ __forceinline__ void load_pages(uint32_t dst, const CUtensorMap* map, uint32_t bar, const Args& a,
                                           const Tile& ti, int n_block, int swap) {
  const int32_t* row = a.pt + (int64_t)ti.b * a.pt_stride;
  const int last = (ti.k_coord + ti.sk - 1) / a.psz;  // the sequence's last page (the tile has keys: sk >= 1)
  for (int j = 0; j < BN; j += a.prow) {
    const int key = ti.k_coord + n_block * BN + j;  // logical key row of this box's first key
    const int pi = min(key / a.psz, last);
    const int page = __ldg(row + pi);
    const int slot = key - (key / a.psz) * a.psz;
#pragma unroll
    for (int c = 0; c < pad64(DD) / 64; ++c)
      tma_tile(dst + c * BN * 128 + j * 128, map, bar, 64 * c, slot, ti.hkv, page, swap);
  }
}

// KSEEK_FA3_PAGEIDS=warp: the 32 lanes of the producer warp run this together; lane j < BN / prow
// reads box j's page id (all in flight at once, before the stage waits) and issues that box's TMA,
// so no thread issues more than one box per chunk. Lane 0 alone arms the stage's barrier, before
// any lane's copy can complete on it (__syncwarp).
template <int D, int DV, int BN>
__device__ __forceinline__ void load_kv_paged_warp(uint32_t base, const CUtensorMap* tk, const CUtensorMap* tv,
                                                   const Args& a, const Tile& ti, int n_block, int kv) {
  using L = Smem<D, DV, BN>;
  const int lane = threadIdx.x & 31;
  const int stage = kv & 1;
  const uint32_t ph = (kv >> 1) & 1;
  const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
  const uint32_t dk = base + L::kK + stage * L::kKBytes, dv = base + L::kV + stage * L::kVBytes;
  const bool mine = lane < BN / a.prow;
  const int j = lane * a.prow;                         // this lane's box: rows j .. j + prow - 1
  const int key = ti.k_coord + n_block * BN + j;      // its first key's logical row
  int page = 0;
  if (mine) {
    const int last = (ti.k_coord + ti.sk - 1) / a.psz;  // the sequence's last page (the tile has keys)
    page = __ldg(a.pt + (int64_t)ti.b * a.pt_stride + min(key / a.psz, last));
  }
  const int slot = key - (key / a.psz) * a.psz;
  mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
  if (lane == 0) mbar_arrive_expect_tx(kf, L::kKBytes);
  __syncwarp();
  if (mine) {
#pragma unroll
    for (int c = 0; c < pad64(D) / 64; ++c)
      tma_tile(dk + c * BN * 128 + j * 128, tk, kf, 64 * c, slot, ti.hkv, page, a.k_swap);
  }
  mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
  if (lane == 0) mbar_arrive_expect_tx(vf, L::kVBytes);
  __syncwarp();
  if (mine) {
#pragma unroll
    for (int c = 0; c < pad64(DV) / 64; ++c)
      tma_tile(dv + c * BN * 128 + j * 128, tv, vf, 64 * c, slot, ti.hkv, page, a.v_swap);
  }
}

// Does the whole producer warp run the producer (KSEEK_FA3_PAGEIDS=warp, PG kernels), or thread 0?
template <bool PG>
__device__ __forceinline__ constexpr bool warp_producer() {
  return PG && build::kPageIds == build::pageids_warp;
}

// K and V of K/V block n_block of tile ti into ring stage kv % 2 (phase (kv / 2) % 2), each once the
// consumers have freed that stage.
template <int D, int DV, int BN, bool PG>
__device__ __forceinline__ void load_kv(uint32_t base, const CUtensorMap* tk, const CUtensorMap* tv, const Args& a,
                                        const Tile& ti, int n_block, int kv) {
  using L = Smem<D, DV, BN>;
  constexpr bool kWarp = warp_producer<PG>();
  if constexpr (kWarp) {
    if (a.pt) return load_kv_paged_warp<D, DV, BN>(base, tk, tv, a, ti, n_block, kv);
  }
  const bool lead = !kWarp || (threadIdx.x & 31) == 0;  // the one thread that issues (warp mode: lane 0)
  const uint32_t sK = base + L::kK, sV = base + L::kV;
  const int stage = kv & 1;
  const uint32_t ph = (kv >> 1) & 1;
  const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
  mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
  if (!lead) return mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);   // warp mode, dense K/V: lane 0 alone
  mbar_arrive_expect_tx(kf, L::kKBytes);
  if (PG && a.pt) {
    load_pages<D, BN>(sK + stage * L::kKBytes, tk, kf, a, ti, n_block, a.k_swap);
  } else {
#pragma unroll
    for (int c = 0; c < pad64(D) / 64; ++c)
      tma_tile(sK + stage * L::kKBytes + c * BN * 128, tk, kf, 64 * c, ti.k_coord + n_block * BN,
               ti.hkv, k_batch(a, ti), a.k_swap);
  }
  mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
  mbar_arrive_expect_tx(vf, L::kVBytes);
  if (PG && a.pt) {
    load_pages<DV, BN>(sV + stage * L::kVBytes, tv, vf, a, ti, n_block, a.v_swap);
  } else {
#pragma unroll
    for (int c = 0; c < pad64(DV) / 64; ++c)
      tma_tile(sV + stage * L::kVBytes + c * BN * 128, tv, vf, 64 * c, ti.k_coord + n_block * BN,
               ti.hkv, k_batch(a, ti), a.v_swap);
  }
}

// Persistent: this CTA runs tiles blockIdx.x, blockIdx.x + gridDim.x, ... (static) or blockIdx.x
// and then whatever the counter hands out (DYN). Producer and consumers walk the same sequence;
// `kv` counts K/V tiles over all of them (ring stage kv % 2, phase (kv / 2) % 2) and `qi` the Q
// loads, so the producer loads the next tile's Q and K/V while the consumers finish the current one.
template <int D, int DV, int BN, bool DYN, bool PG>
__device__ __forceinline__ void producer(uint32_t base, const CUtensorMap* tq, const CUtensorMap* tk,
                                         const CUtensorMap* tv, const Args& a) {
  using L = Smem<D, DV, BN>;
  constexpr bool kWarp = warp_producer<PG>();  // all 32 lanes run this loop; lane 0 alone arms and issues
  const bool lead = !kWarp || (threadIdx.x & 31) == 0;
  const uint32_t sQ = base + L::kQ;
  if (lead) {
    prefetch_tmap(tq);
    prefetch_tmap(tk);
    prefetch_tmap(tv);
  }
  // the next tile from the counter: lane 0 draws it, every lane gets it
  const int first = cta_budget<PG, DYN>(a);
  auto draw = [&]() {
    if constexpr (kWarp) {
      int v = 0;
      if (lead) v = next_tile(a, first);
      return __shfl_sync(0xffffffffu, v, 0);
    } else {
      return next_tile(a, first);
    }
  };
  // (declared qi before kv: the other order gives the same program with other register names in
  // the SASS -- ptxas follows the order of the PTX's virtual registers; README.md)
  int qi = 0, kv = 0;
  const int ntiles = tile_count<PG>(a);
  for (int idx = blockIdx.x;;) {
    Tile ti;
    if constexpr (DYN) {
      const bool more = idx < ntiles;
      if (more && !tile_at<BN, PG, true>(a, idx, ti)) {  // varlen: starts past its sequence's end
        idx = draw();
        continue;
      }
      // the consumers are done with this buffer's previous Q (and index)
      mbar_wait(bar_qe<L>(base, qbuf<L>(qi)), qphase<L>(qi) ^ 1);
      if (lead) st_shared_s32(tile_slot<L>(base, qbuf<L>(qi)), more ? idx : -1);
      if (!more || ti.n_cnt == 0) {
        if (lead) mbar_arrive(bar_q<L>(base, qbuf<L>(qi)));  // no Q to load: the index alone (-1 ends the consumers' loop)
        if (!more) break;
        ++qi;
        idx = draw();
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
    if (lead) {
      const int qb = qbuf<L>(qi);
      mbar_arrive_expect_tx(bar_q<L>(base, qb), L::kQBytes);
#pragma unroll
      for (int c = 0; c < pad64(D) / 64; ++c)
        tma_tile(sQ + qb * L::kQBytes + c * kBM * 128, tq, bar_q<L>(base, qb), 64 * c, ti.q_coord, ti.h, ti.tb,
                 a.q_swap);
    }
    ++qi;
    for (int it = 0; it < ti.n_cnt; ++it, ++kv) load_kv<D, DV, BN, PG>(base, tk, tv, a, ti, ti.n_max - 1 - it, kv);
    if constexpr (DYN) idx = draw();
    else idx += gridDim.x;
  }
  if constexpr (DYN) {
    if (lead) sched_done(a);
  }
}

}  // namespace fa3
