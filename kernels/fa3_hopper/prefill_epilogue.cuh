// prefill_epilogue.cuh: the end of one tile for one consumer warpgroup: O / l and the LSE per row
// (sinks join the denominator; rows without keys: O = 0, LSE = -inf), then O to global memory,
// through shared memory and a TMA store where the layout has room for the staging (Smem::kOStage)
// and the call allows it (Args::o_tma; packed queries: whole 64-row boxes inside the sequence), else
// by direct stores of element pairs.
#pragma once
#include "prefill_scheduler.cuh"

namespace fa3 {

// For consumer warpgroup cw of tile ti after its mainloop: thread t holds rows row0 and row0 + 8
// (o, m_run, l_run: its part of the tile's accumulator, max and sum); L is the smem layout (Smem),
// `to` O's tensor map, `base` the smem layout's base.
template <typename T, int DV, class L>
__device__ __forceinline__ void epilogue(const Args& a, const Tile& ti, const CUtensorMap* to, uint32_t base, int cw,
                                         int t, int row0, float (&o)[DV / 2], float (&m_run)[2], float (&l_run)[2]) {
  constexpr bool F16 = std::is_same<T, __half>::value;
  const int sq = ti.sq, h = ti.h, b = ti.b, q_row0 = ti.q_row0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  T* obase = (T*)a.o + (a.cu_q ? (int64_t)q_row0 * a.o_rs : (int64_t)b * a.o_bs) + (int64_t)h * a.o_hs;
  float* lbase = a.lse ? a.lse + (a.cu_q ? (int64_t)q_row0 : (int64_t)b * a.lse_bs) + (int64_t)h * a.lse_hs
                       : nullptr;
  const float sink = a.sinks ? a.sinks[h] : 0.f;
  float inv[2] = {0.f, 0.f};  // 1 / denominator per row; 0 for rows without keys (and past Sq)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    if (row < sq) {
      float lse = -INFINITY;
      if (l_run[r] > 0.f) {  // at least one visible key (its exp is 1)
        const float m_nat = m_run[r] * a.lse_mul;  // running max in natural-log units
        if (a.sinks) {
          const float mn = fmaxf(m_nat, sink);
          const float e = expf(m_nat - mn);
          const float den = l_run[r] * e + expf(sink - mn);
          inv[r] = e / den;
          lse = mn + logf(den);
        } else {
          inv[r] = 1.f / l_run[r];
          lse = m_nat + logf(l_run[r]);
        }
      }
      if (lbase && (t & 3) == 0) lbase[row] = lse;
    }
  }
  bool o_done = false;
  if constexpr (L::kOStage) {
    // O through shared memory and one TMA store per 64-column chunk. Dense: rows past Sq and columns
    // past Dv fall outside the map and are not written. Packed queries: only a warpgroup whose 64 rows
    // all belong to the sequence (a box past its end would write the next sequence's rows; that
    // warpgroup stores directly below).
    if (a.o_tma && (!a.cu_q || ti.m0 + 64 * cw + 64 <= sq)) {
      if (t == 0) bulk_wait_read();  // this warpgroup's previous store has left shared memory
      named_bar_sync(1 + cw, 128);
      const int rl0 = acc_row(t, 0);  // row within this warpgroup's 64
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int rl = rl0 + 8 * r;
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          const uint32_t addr = base + L::kO + (uint32_t)((2 * (j >> 3) + cw) * 8192 + rl * 128 +
                                                          (((j & 7) ^ (rl & 7)) << 4) + 4 * (t & 3));
          st_shared_u32(addr, pack2<F16>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]));
        }
      }
      fence_proxy_async_smem();
      named_bar_sync(1 + cw, 128);
      if (t == 0) {
#pragma unroll
        for (int c = 0; c < pad64(DV) / 64; ++c) {
          const uint32_t src = base + L::kO + (uint32_t)((2 * c + cw) * 8192);
          const int row = ti.q_coord + 64 * cw;
          if (a.o_swap) tma_store_4d(to, src, 64 * c, h, row, ti.tb);
          else tma_store_4d(to, src, 64 * c, row, h, ti.tb);
        }
        bulk_commit();
      }
      o_done = true;
    }
  }
  if (!o_done) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row < sq) {
        T* orow = obase + (int64_t)row * a.o_rs + 2 * (t & 3);
#pragma unroll
        for (int j = 0; j < DV / 8; ++j)
          if (8 * j < a.dv)  // (a.dv == DV on every instantiation; kept as a guard)
            *reinterpret_cast<uint32_t*>(orow + 8 * j) =
                pack2<F16>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
      }
    }
  }
}

}  // namespace fa3
