// prefill_common.cuh: what every part of the bf16/fp16 prefill kernel (fa3::fwd_kernel) shares: the
// CTA shape and register split, the shared-memory layout (Smem), the kernel arguments (Args, also
// the fp8 kernel's) and the Q-buffer bookkeeping of the persistent loop.
#pragma once
#include "hopper_primitives.cuh"
#include "variants.cuh"

namespace fa3 {

constexpr int kBM = 128;            // query rows per CTA (two consumer warpgroups of 64 rows)
// keys per K/V tile: a template parameter of fwd_kernel (BN = 128; 112 for D = Dv = 192, 80 for 256)
constexpr int kStages = 2;          // K/V ring depth
constexpr int kThreads = 384;       // warpgroup 0 = producer, 1..2 = consumers
constexpr int kConsumerWarps = 8;   // arrivals that free one K or V stage (lane 0 of each warp)
// setmaxnreg targets. The CTA holds 384 x 168 registers from launch (__launch_bounds__(384, 1));
// what the producer gives back is all the consumers can take: 128 x (168 - 40) = 256 x (232 - 168).
// (v5 first had 32/240, which asks for 1024 registers more than the pool holds: the consumers'
// setmaxnreg.inc waited forever -- the probe hung on its first run. 24/240 fits but makes ptxas
// spill 8 bytes in the v5 producer.)
#ifdef FA3_REGS_24_240  // A/B build hook (probe only): v4's split; the v5 producer then spills 8 bytes
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
#else
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
#endif

// D = q/k head dim, DV = v head dim (multiples of 32), BN = keys per K/V tile. Shared memory holds
// 64-column chunks (128-byte swizzle atoms): D = 96 takes two, the TMA zero-filling columns 96..127,
// which the GEMMs never read (6 k-steps of S; P V as N = 64 + N = 32, pv_step).
__host__ __device__ constexpr int pad64(int x) { return (x + 63) / 64 * 64; }
template <int D, int DV, int BN>
struct Smem {
  static constexpr int kQBytes = kBM * pad64(D) * 2;
  static constexpr int kKBytes = BN * pad64(D) * 2;   // one stage of K
  static constexpr int kVBytes = BN * pad64(DV) * 2;  // one stage of V
  // Two Q buffers where they fit (hd64, hd96 with 128-key tiles, hd128): the producer loads the next
  // tile's Q as soon as it knows the tile, instead of after the current tile's last S.
  static constexpr int kQBuf =
      2 * kQBytes + kStages * (kKBytes + kVBytes) + 128 + 1024 <= 227 * 1024 ? 2 : 1;
  // O staged for a TMA store (kOBytes: both warpgroups' 64 rows, 64-column chunks), where it fits
  // beside the above: hd64, hd96 with 128-key tiles, hd128 with 128-key tiles (0 elsewhere).
  static constexpr int kOBytes = kBM * pad64(DV) * 2;
  static constexpr int kOStage =
      kQBuf * kQBytes + kStages * (kKBytes + kVBytes) + kOBytes + 128 + 1024 <= 227 * 1024 ? 1 : 0;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBuf * kQBytes;
  static constexpr int kV = kK + kStages * kKBytes;
  static constexpr int kO = kV + kStages * kVBytes;  // chunk c of warpgroup w at kO + (2c + w) * 8 KB
  static constexpr int kBar = kO + kOStage * kOBytes;
  // barriers: q_full, k_full[2], v_full[2], k_empty[2], v_empty[2], q_empty; then the index of
  // the tile whose Q the q_full barrier announces (-1: no more tiles); then q_full, q_empty and
  // the index of the second Q buffer (kQBuf == 2)
  static constexpr int kBarQ = kBar, kBarKF = kBar + 8, kBarVF = kBar + 24, kBarKE = kBar + 40,
                       kBarVE = kBar + 56, kBarQE = kBar + 72, kTileIdx = kBar + 80,
                       kBarQ2 = kBar + 88, kBarQE2 = kBar + 96, kTileIdx2 = kBar + 104;
  static constexpr int kTotal = kBar + 128 + 1024;  // + slack to align the base to 1024 bytes
  static_assert(kQBytes % 1024 == 0 && kKBytes % 1024 == 0 && kVBytes % 1024 == 0,
                "every tile (and chunk) must start on a 1024-byte boundary (swizzle atoms)");
  static_assert(kTotal <= 227 * 1024, "shared memory per block (sm_90: 227 KB opt-in)");
};

struct Args {
  void* o;
  float* lse;
  int64_t o_bs, o_rs, o_hs;
  int64_t lse_bs, lse_hs;
  const int32_t* cu_q;     // varlen (both set) or both NULL
  const int32_t* cu_k;
  const int32_t* seqused;  // per-sequence key end, or NULL
  const int32_t* leftpad;  // per-sequence first key, or NULL
  const float* sinks;      // [Hq] or NULL
  int sq, sk;              // dense: Sq, Sk; varlen: unused (per-sequence from cu_seqlens)
  int group;               // Hq / Hkv
  int wl, wr;              // window (causal folded into wr = 0); < 0 = unbounded; clamped < 2^29
  int dv;                  // true Dv (columns of O stored; DV may be padded)
  int vzero;               // 1: V rows past the sequence's key end may hold anything (zero them)
  int softcap_on;
  float scale_log2;        // multiplies the (possibly capped) score before exp2
  float lse_mul;           // m_run * lse_mul = running max in natural-log units
  float cap_in, cap_out;   // softcap: s = cap_out * tanh(s_raw * cap_in)
  int q_swap, k_swap, v_swap;  // 1: the map's dims are {D, H, S, B} instead of {D, S, H, B}
  int heads, batch;        // Hq, B
  int m_blocks;            // ceil(Sq / kBM) (varlen: of the longest sequence)
  int tiles;               // m_blocks * heads * batch work tiles, spread over a persistent grid
  int sec;                 // (batch, head) pairs per section of the tile order (see tile_at)
  int slot;                // this launch's tile counter: g_sched[slot] (see next_tile)
  int o_tma, o_swap;       // 1: O leaves through the `to` tensor map (packed q: whole boxes); its dim order
  int chunk;               // attention_chunk (kseek.h), 0 = off; in the 4 bytes of padding before pt
  // paged K/V (pt != NULL): the maps cover the page pool [num_pages, psz, Hkv, D] with boxes of prow
  // rows (prow divides both BN and psz, a multiple of 8: each box stays inside one page and starts on
  // a 1024-byte swizzle atom); logical key row j of sequence b is slot j % psz of page
  // pt[b * pt_stride + j / psz]
  const int32_t* pt;
  int pt_stride, psz, prow;
#if KSEEK_FA3_MIXED_GATHER
  // 1: K/V are a mixed call's dense slots (page_gather.cuh gather_listed): the K/V batch coordinate of
  // the sequence at list position j is j, not the sequence index (tile_at). In the 4 bytes of padding
  // before `ids`, so Args keeps its size and layout (at the end, the hd96/hd128 paged kernels spilled).
  int kslot;
#endif
  // mixed calls (fa3_hopper.cu): ids[0] = how many sequences this launch runs, ids[1..] = which (the
  // others, short enough for the decode path, were launched there); NULL = every sequence
  const int32_t* ids;
};


// Q buffers of the persistent loop. The qi-th Q load (qi counts them over the CTA's tiles) goes
// to buffer qbuf(qi); its barriers (full: the producer's TMA landed; empty: the consumers are done)
// and the tile-index slot are that buffer's, and the (qi / kQBuf)-th use of the buffer waits for
// phase qphase(qi).
template <class L>
__device__ __forceinline__ int qbuf(int qi) {
  return L::kQBuf == 2 ? (qi & 1) : 0;
}
template <class L>
__device__ __forceinline__ uint32_t qphase(int qi) {
  return (uint32_t)((L::kQBuf == 2 ? qi >> 1 : qi) & 1);
}
template <class L>
__device__ __forceinline__ uint32_t bar_q(uint32_t base, int b) {
  return base + (b ? L::kBarQ2 : L::kBarQ);
}
template <class L>
__device__ __forceinline__ uint32_t bar_qe(uint32_t base, int b) {
  return base + (b ? L::kBarQE2 : L::kBarQE);
}
template <class L>
__device__ __forceinline__ uint32_t tile_slot(uint32_t base, int b) {
  return base + (b ? L::kTileIdx2 : L::kTileIdx);
}

}  // namespace fa3
