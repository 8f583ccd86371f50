// prefill_mainloop.cuh: one consumer warpgroup's work on one tile of the prefill kernel: for each of
// the tile's K/V blocks, S = Q K^T (wgmma SS), softcap / masks / online softmax in registers, then
// O += P V (wgmma RS, P from registers). ConsumerTile holds the tile's state (the O accumulator,
// the running max and sum) and its steps; run() is the pipeline of consumer schedule VAR:
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

}  // namespace fa3
