// prefill_scheduler.cuh: the persistent prefill grid's tile order (tile_at) and its dynamic tile
// counter (next_tile, sched_done). Both the producer and the consumers of a CTA walk the same
// tiles: static = blockIdx.x, + gridDim.x, ...; dynamic = the producer draws the next index from the
// counter and hands it to the consumers through shared memory (prefill_producer.cuh).
#pragma once
#include "prefill_common.cuh"

namespace fa3 {

// when its producer has issued the last K/V load of the current tile, so a CTA that drew short
// causal tiles takes more of them (greedy, longest first: makespan within a few % of the ideal,
// where the static round-robin lost 3-13% on causal rows and up to 82% under the sectioned order,
// NOTES v4). g_sched[slot] = {tiles handed out past the first wave, CTAs finished}; the last CTA
// to finish puts both back to 0, so no per-call memset is needed and graph replays work. The host
// rotates kSchedSlots slots so that launches on different streams do not share a counter.
constexpr int kSchedSlots = 32;
__device__ int g_sched[kSchedSlots][2];
// `first`: the CTAs that take tiles (cta_budget); they start on tiles 0 .. first - 1.
__device__ __forceinline__ int next_tile(const Args& a, int first) {
  return first + atomicAdd(&g_sched[a.slot][0], 1);
}
// Called once per CTA by its producer thread after its last next_tile.
__device__ __forceinline__ void sched_done(const Args& a) {
  __threadfence();  // this CTA's counter fetches happen before its "finished" count
  if (atomicAdd(&g_sched[a.slot][1], 1) == (int)gridDim.x - 1) {
    atomicExch(&g_sched[a.slot][0], 0);
    atomicExch(&g_sched[a.slot][1], 0);
  }
}

// One work tile: 128 query rows of one head of one sequence, and the K/V tiles it visits.
struct Tile {
  int m0, h, b, hkv;
  int sq, sk, diag;          // this sequence's query rows, effective key length, bottom-right offset
  int n_min, n_max, n_cnt;   // K/V tiles n_min..n_max-1 hold every key some row may see
  int q_row0, q_coord, k_coord, tb;  // TMA coordinates (varlen: packed rows, batch 0); K/V's batch
                                     // coordinate is k_batch() (paged: the page-table row is ti.b's)
};

__device__ __forceinline__ int k_batch(const Args& a, const Tile& ti) { return a.cu_k ? 0 : ti.b; }

// The number of sequences the tile order runs over: all of them, or the ones a mixed call's
// prefill launch runs (ids[0], written on the device before this launch).
// PG: built for paged / mixed launches (fwd_kernel's PG); other instantiations compile these out.
template <bool PG>
__device__ __forceinline__ int seq_count(const Args& a) {
  if constexpr (PG) return a.ids ? __ldg(a.ids) : a.batch;
  return a.batch;
}
// How many of this launch's CTAs take tiles: all of them, or for a mixed call's prefill launch (dynamic
// schedule) the budget long_seqs wrote after the list (ids[batch + 1], >= 1; KSEEK_FA3_MIXED_BALANCE): the
// others exit at once (fwd_kernel) and leave their SMs to the call's decode part.
template <bool PG, bool DYN>
__device__ __forceinline__ int cta_budget(const Args& a) {
  if constexpr (PG && DYN) {
    if (a.ids) return min((int)gridDim.x, __ldg(a.ids + a.batch + 1));
  }
  return (int)gridDim.x;
}
// Tiles of this launch (the persistent loops' bound).
template <bool PG>
__device__ __forceinline__ int tile_count(const Args& a) {
  if constexpr (PG) return a.ids ? a.m_blocks * a.heads * __ldg(a.ids) : a.tiles;
  return a.tiles;
}

// Tile `idx` of the persistent schedule. The (batch, head) pairs (head fastest: GQA neighbours
// read the same K/V) are cut into sections of a.sec pairs; inside a section the longest causal
// tiles come first (m_block descending), then the pairs. a.sec = all pairs is one section (the
// order measured in run 061800); smaller sections keep the K/V that the resident CTAs read inside
// the L2 (the default since v5; KSEEK_FA3_ORDER=flat gives one section; NOTES v4, v5).
// Returns false when the tile starts past its sequence's last query row (varlen).
// CH: the instantiation takes chunked calls (Args::chunk; the dynamic-schedule kernels only, so the static
// ones keep v15's code: fa3_hopper.cu `launch`).
template <int BN, bool PG, bool CH = false>
__device__ __forceinline__ bool tile_at(const Args& a, int idx, Tile& ti) {
  const int hb_all = a.heads * seq_count<PG>(a);
  const int per = a.sec * a.m_blocks;           // tiles in a full section
  const int sec = idx / per;
  const int first = sec * a.sec;                // first pair of this section
  const int n = min(a.sec, hb_all - first);     // pairs in this section (the last may be short)
  const int r0 = idx - sec * per;
  const int m_block = a.m_blocks - 1 - r0 / n;
  const int r = first + (r0 - (r0 / n) * n);
  ti.h = r % a.heads;
#if KSEEK_FA3_MIXED_GATHER
  // a mixed call's prefill over dense slots (Args::kslot; packed q, no pages, no cu_k): ti.b stays the
  // list position, k_batch()'s K/V batch coordinate (the epilogue indexes o and lse by q_row0 when cu_q
  // is set), and each per-sequence read loads the sequence from the list again (FA3_SEQ): one more
  // live register here made ptxas spill in the PG kernels
  ti.b = r / a.heads;
  if constexpr (PG) {
    if (a.ids && !a.kslot) ti.b = __ldg(a.ids + 1 + ti.b);
  }
#define FA3_SEQ ((PG && a.kslot) ? __ldg(a.ids + 1 + ti.b) : ti.b)
#else
  int seq = r / a.heads;  // the sequence (a mixed call's launch: its position in a.ids, mapped here)
  if constexpr (PG) {
    if (a.ids) seq = __ldg(a.ids + 1 + seq);
  }
  ti.b = seq;
#define FA3_SEQ seq
#endif
  ti.hkv = ti.h / a.group;
  ti.m0 = m_block * kBM;
  // this sequence: query rows, key range (same rules as naive::naive_fwd_kernel)
  int sq = a.sq, cap = a.sk, q_row0 = 0, k_row0 = 0;
  if (a.cu_q) {  // packed queries (over packed keys, a dense cache or a paged one)
    q_row0 = a.cu_q[FA3_SEQ];
    sq = a.cu_q[FA3_SEQ + 1] - q_row0;
  }
  if (a.cu_k) {  // packed keys
    k_row0 = a.cu_k[FA3_SEQ];
    cap = a.cu_k[FA3_SEQ + 1] - k_row0;
  }
  if (ti.m0 >= sq) return false;
  const int kend = a.seqused ? a.seqused[FA3_SEQ] : cap;
  const int lp = a.leftpad ? a.leftpad[FA3_SEQ] : 0;
  ti.sq = sq;
  ti.sk = max(0, kend - lp);  // effective key length Sk_b; key j' is stored row lp + j'
  ti.diag = ti.sk - sq;       // key position of query row 0 (bottom-right alignment)
  const int row_last = min(ti.m0 + kBM, sq) - 1;
  int lo = 0, hi = ti.sk - 1;
  if (a.wl >= 0) lo = max(lo, ti.m0 + ti.diag - a.wl);
  if (a.wr >= 0) hi = min(hi, row_last + ti.diag + a.wr);
  if constexpr (CH) {
    if (a.chunk > 0) {  // chunked local attention: the chunks of the tile's first and last rows
      lo = max(lo, chunk_lo(ti.m0 + ti.diag, a.chunk));
      hi = min(hi, chunk_lo(row_last + ti.diag, a.chunk) + a.chunk - 1);
    }
  }
  ti.n_min = hi >= lo ? lo / BN : 0;
  ti.n_max = hi >= lo ? hi / BN + 1 : 0;
  ti.n_cnt = ti.n_max - ti.n_min;
  ti.q_row0 = q_row0;
  ti.q_coord = q_row0 + ti.m0;
  ti.k_coord = k_row0 + lp;
  ti.tb = a.cu_q ? 0 : FA3_SEQ;
#undef FA3_SEQ
  return true;
}

}  // namespace fa3
