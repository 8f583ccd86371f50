// fa3_hopper.cu: FlashAttention-3-style forward for Hopper (sm_90a), implementing kernels/kseek.h.
// The one translation unit of kernels/fa3_hopper/ (README.md there maps the files, the status and
// the build variants); this file is the dispatch: which path takes a call, the tile-choice table,
// the schedule choice, and the ABI entry points. Status: v12 (kernels/NOTES.md).
//
// Paths, tried in this order by kseek_fwd:
//   1. split-KV decode (decode.cuh): paged KV, and dense KV with at most 16 query rows per KV head
//      (bf16/fp16; fp8 e4m3 too in the -DKSEEK_FA3_DECODE_FP8=1 build, variants.cuh);
//      packed queries over a cache: alone when every sequence fits it, else beside the prefill
//      (a mixed call: short sequences here, long ones on path 2);
//   2. bf16/fp16 prefill (prefill_*.cuh): dense, varlen or paged KV, head dims (64, 64), (96, 96),
//      (128, 128), (192, 128), (192, 192), (256, 256);
//   3. fp8 e4m3 prefill (prefill_fp8.cuh), same head dims, bf16 out;
//   4. the naive fallback (../naive_core.cuh): everything else; built with -DKSEEK_FA3_PAGE_GATHER=1,
//      a paged call that paths 1-3 cannot read in place is first copied to a dense cache in the
//      workspace and run on them (page_gather.cuh).
// Built with -DKSEEK_FA3_FORCE_FALLBACK=1, every call takes the fallback (variants.cuh).
#include "../kseek.h"
#include "../naive_core.cuh"
#include "variants.cuh"

#if !KSEEK_FA3_FORCE_FALLBACK
#include "decode.cuh"
#include "prefill_fp8.cuh"
#include "prefill_host.cuh"
#if KSEEK_FA3_PAGE_GATHER || KSEEK_FA3_MIXED_GATHER
#include "page_gather.cuh"
#endif

namespace fa3 {

// The consumer schedule (fwd_kernel's VAR) and tile schedule (DYN) of the <T, D, DV, BN> kernels.
// VAR 2 (measured fastest on every probe shape, NOTES v3) unless built with KSEEK_FA3_VARIANT.
// DYN (a global tile counter) where tile costs differ -- causal or windowed attention -- and the
// head dim is above 64: there it beat the static round-robin by 5-12% (NOTES v5). Static
// otherwise: equal tiles need no balancing, and the dynamic kernel's tile loop ends on a value
// read from shared memory, which ptxas cannot prove warp-uniform, so its K/V loop computes
// descriptors and barrier addresses per thread (+59 instructions per iteration at hd128; 5-15%
// slower on non-causal and hd64 rows, NOTES v5); hd96 static lost 17% on row 16 (run 075315).
// KSEEK_FA3_SCHED=static|dynamic overrides (VAR 2 only; VAR 0/1 are always static). Only the
// instantiations this build can reach are compiled.
template <typename T, int D, int DV, int BN>
int launch(const kseek_params* p, cudaStream_t stream, int64_t rq, int64_t rk, const int32_t* ids) {
#if KSEEK_FA3_PAGE_GATHER || KSEEK_FA3_MIXED_GATHER
  // over a dense copy the last K/V tile reads up to BN - 1 rows past a sequence's end: the copy writes
  // (zeros) only pg::kZeroTail of them (the fp8 prefill's tiles are 64 or 128 rows)
  static_assert(BN <= pg::kZeroTail + 1, "a K/V tile wider than the page copy's zero tail");
#endif
  Launch l;
  if (!prepare_launch<T, D, DV, BN>(p, rq, rk, ids, l)) return -1;  // not for the fast path
  constexpr int var = build::kVariant;
  // paged K/V or a mixed call's sequence list: the PG instantiations (the others compile those
  // branches out, so the dense and varlen kernels keep their registers: NOTES v13)
  const bool pg = l.a.pt != nullptr || l.a.ids != nullptr;
  // attention_chunk (ABI 3): only the dynamic-schedule kernels hold the chunk's code (tile_at's CH), so the
  // static ones keep v15's machine code (v16a put it in every kernel: the hd64 bench26 rows lost 3-9%); hd64,
  // static otherwise, gets dynamic kernels for chunked calls alone. A build without them refuses the call.
  if (p->attention_chunk > 0) {
    if constexpr (var == 2 && build::kSched != build::sched_static) {
      return pg ? start<T, D, DV, BN, 2, true, true>(l, stream) : start<T, D, DV, BN, 2, true>(l, stream);
    } else {
      return -1;
    }
  }
  if constexpr (var == 2) {
    constexpr bool can_dyn = build::kSched == build::sched_dynamic || (build::kSched == build::sched_auto && D > 64);
    constexpr bool can_static = build::kSched != build::sched_dynamic;
    // Packed queries take the dynamic kernels at every head dim (v23; hd64's are built for chunked calls
    // anyway): the tile slots past a sequence's last query row are empty, and the static round-robin over
    // the slots left CTAs unequal (H200, varlen grid against FA3: hd64 0.57x, non-causal hd128 0.69x).
    if constexpr (build::kSched == build::sched_auto) {
      if (p->cu_seqlens_q) return pg ? start<T, D, DV, BN, 2, true, true>(l, stream) : start<T, D, DV, BN, 2, true>(l, stream);
    }
    if constexpr (can_dyn && can_static) {
      const bool ragged = p->causal || p->window_left >= 0 || p->window_right >= 0;
      if (ragged) return pg ? start<T, D, DV, BN, 2, true, true>(l, stream) : start<T, D, DV, BN, 2, true>(l, stream);
      return pg ? start<T, D, DV, BN, 2, false, true>(l, stream) : start<T, D, DV, BN, 2, false>(l, stream);
    } else {
      return pg ? start<T, D, DV, BN, 2, can_dyn, true>(l, stream) : start<T, D, DV, BN, 2, can_dyn>(l, stream);
    }
  } else if (pg) {
    return -1;  // paged / mixed launches are built for VAR 2 only
  } else if constexpr (BN != 64 && BN != 128) {
    return start<T, D, DV, BN, 2, false>(l, stream);  // wide tiles: VAR 2 only
  } else if constexpr (var == 0) {
    return start<T, D, DV, BN, 0, false>(l, stream);
  } else if constexpr (DV < 256) {
    return start<T, D, DV, BN, 1, false>(l, stream);
  } else {  // VAR 1 is not built for Dv = 256: it spills there (12 bytes since v5); runs VAR 2
    return start<T, D, DV, BN, 2, false>(l, stream);
  }
}

// The tile-choice table: keys per K/V tile (BN) by head dims and key length. KSEEK_FA3_BN
// overrides it for A/B runs (64: v4's tiles at hd192/256; 128 or 192 at hd64/hd96 for every key
// length; 176 at hd128, FlashAttention-3's non-causal choice).
template <typename T>
int dispatch(const kseek_params* p, cudaStream_t stream, int64_t rq, int64_t rk, const int32_t* ids) {
  const int d = p->head_dim, dv = p->head_dim_v;
  constexpr int bn = build::kBN;
  // hd64: 192-key tiles from 2k keys on (half the per-tile softmax bookkeeping per key; rows 2/3
  // -4%/-6% time, row 1 (1k causal) +10%: run 085537, NOTES v6). hd96: 2 chunks, 6 k-steps (Smem);
  // 192-key tiles as at hd64 (row 16 -3.3%, run 090222).
  if (d == 64 || d == 96) {
    if constexpr (bn != 0) {
      constexpr int w = bn == 192 ? 192 : 128;
      return d == 64 ? launch<T, 64, 64, w>(p, stream, rq, rk, ids) : launch<T, 96, 96, w>(p, stream, rq, rk, ids);
    } else if (p->seqlen_k >= 2048) {
      return d == 64 ? launch<T, 64, 64, 192>(p, stream, rq, rk, ids) : launch<T, 96, 96, 192>(p, stream, rq, rk, ids);
    } else {
      return d == 64 ? launch<T, 64, 64, 128>(p, stream, rq, rk, ids) : launch<T, 96, 96, 128>(p, stream, rq, rk, ids);
    }
  }
  if (d == 128) return launch<T, 128, 128, bn == 176 ? 176 : 128>(p, stream, rq, rk, ids);
  if (d == 192 && dv == 128) return launch<T, 192, 128, 128>(p, stream, rq, rk, ids);
  // Dv >= 192: 112 / 80 keys per K/V tile (FlashAttention-3's choice for these head dims: the
  // most that fits in shared memory with two stages); KSEEK_FA3_BN=64 for v4's 64.
  if (d == 192) return launch<T, 192, 192, bn == 64 ? 64 : 112>(p, stream, rq, rk, ids);
  if (d == 256) return launch<T, 256, 256, bn == 64 ? 64 : 80>(p, stream, rq, rk, ids);
  return -1;
}

// bf16/fp16 prefill: -1 when it does not take the call (the caller tries the next path). `ids`: a
// mixed call's device list of the sequences to run (fwd_kernel's Args::ids), else NULL (all).
inline int fwd(const kseek_params* p, cudaStream_t stream, const int32_t* ids = nullptr) {
  if (!fast_ok(p)) return -1;
  int64_t rq = p->seqlen_q, rk = p->seqlen_k;
  if ((p->cu_seqlens_q || p->cu_seqlens_k) && !varlen_totals(p, stream, &rq, &rk)) return -1;
  return p->dtype == KSEEK_FP16 ? dispatch<__half>(p, stream, rq, rk, ids)
                                : dispatch<__nv_bfloat16>(p, stream, rq, rk, ids);
}

namespace f8 {

// The fp8 instantiations <D, DV, BN, CW>: CW = 128 needs D and DV multiples of 128 (and unpadded:
// a 128-byte box over a 96-byte row would exceed the tensor's row). D = 96 runs as 128 with
// 64-byte chunks, the second one zero-filled by TMA past byte 96 (as the bf16 path does with its
// second 64-element box).
inline int dispatch(const kseek_params* p, cudaStream_t stream, int64_t rq, int64_t rk) {
  const int d = p->head_dim, dv = p->head_dim_v;
  if (d == 64) return launch<64, 64, 128, 64>(p, stream, rq, rk);
  if (d == 96) return launch<128, 128, 128, 64>(p, stream, rq, rk);
  if (d == 128) return launch<128, 128, 128, 128>(p, stream, rq, rk);
  if (d == 192 && dv == 128) return launch<192, 128, 128, 64>(p, stream, rq, rk);
  if (d == 192) return launch<192, 192, 64, 64>(p, stream, rq, rk);
  if (d == 256) return launch<256, 256, 64, 128>(p, stream, rq, rk);
  return -1;
}

// fp8 prefill: -1 when it does not take the call; else a kseek_status.
inline int fwd(const kseek_params* p, cudaStream_t stream) {
  if (!fast_ok(p)) return -1;
  int64_t rq = p->seqlen_q, rk = p->seqlen_k;
  if (p->cu_seqlens_q && !varlen_totals(p, stream, &rq, &rk)) return -1;
  return dispatch(p, stream, rq, rk);
}

}  // namespace f8
}  // namespace fa3

// Which calls go to the decode path alone: every paged call it supports, packed queries over a
// cache whose longest sequence (seqlen_q) it takes, and dense calls with at most 16 query rows per KV
// head (Sq * Hq / Hkv), where one m16 tile holds all of them. fp8 (dec::supported takes it only in the
// KSEEK_FA3_DECODE_FP8 build): dense calls with Sq <= 16 and up to dec::kMaxRows rows, since the fp8
// prefill does not pack query heads (a 128-row tile per query head would hold Sq rows; NOTES v13e).
// hd192/Dv128 bf16/fp16 (dec::supported takes it only in the KSEEK_FA3_DECODE_DV build) likewise: the
// prefill's tiles would hold Sq rows there too (NOTES v13g).
static bool use_decode(const kseek_params* p) {
  if (!dec::supported(p)) return false;
  const int64_t rows = (int64_t)p->seqlen_q * (p->heads_q / p->heads_kv);
  if (p->cu_seqlens_q) return rows <= dec::kMaxRows;
  if (p->page_table) return true;
  if (p->dtype == KSEEK_FP8_E4M3 || p->head_dim != p->head_dim_v) return p->seqlen_q <= 16 && rows <= dec::kMaxRows;
  return rows <= 16;
}

// Mixed calls: packed queries over a dense or paged cache, some sequences too long for the decode
// path (a serving step: chunked prefills beside decodes). The short ones (at most dec::row_cap rows)
// run on the decode path, the rest on the prefill; which is which is read on the device (long_seqs),
// so the call stays asynchronous. Needs the workspace for that list (mixed_ids_bytes) first.
static bool use_mixed(const kseek_params* p) {
  return p->cu_seqlens_q && !p->cu_seqlens_k && dec::supported(p) && !use_decode(p) && fa3::fast_ok(p);
}
// The list (B + 1 ints) and the prefill's CTA budget after it (ids[B + 1]).
static size_t mixed_ids_bytes(const kseek_params* p) { return ((size_t)(p->batch + 2) * 4 + 255) / 256 * 256; }

// What long_seqs needs to weigh a mixed call's two parts (KSEEK_FA3_MIXED_BALANCE): per sequence its keys
// (seqused_k, else the cache's seqlen_k), and per unit of work the SM time it costs on the H200.
struct Weigh {
  const int32_t* seqused;  // [B] keys per sequence, or NULL: seqlen_k each
  int seqlen_k, heads_q, heads_kv, dsum, causal;
  int sms;                 // 0: no budget (one stream; ids[B + 1] = a large number)
};
// SM microseconds per 128 x 128 query-key block of the prefill at D + Dv = 256 (~600 TFLOP/s over 132 SMs),
// and per byte of K/V the decode part streams (~20 KB/us per SM: v22's varlen_q_dense decode, 25 MB in
// 63 us on its 20 reserved SMs).
constexpr double kPrefillBlockUs = 1.8, kDecodeByteUs = 1.0 / 20000.0;

// ids[0] = how many sequences have more than `cap` query rows, ids[1..] = which, ascending; ids[B + 1] = how
// many CTAs of the prefill launch take tiles (w.sms > 0): the SMs that its share of the estimated time asks
// for, so that both parts end together (at least 1; all of them when there is nothing to decode). One CTA
// of 1024 threads (32 warps) walks the batch 1024 sequences at a time.
__global__ void __launch_bounds__(1024) long_seqs(const int32_t* cu_q, int batch, int cap, Weigh w, int32_t* ids) {
  __shared__ int warp_n[32];
  __shared__ float warp_p[32], warp_d[32], warp_t[32];
  __shared__ int base;
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  float pre = 0.f, dec = 0.f, tiles = 0.f;  // this thread's prefill SM-us, decode SM-us, prefill tiles
  for (int b0 = 0; b0 < batch; b0 += 1024) {
    const int b = b0 + (int)threadIdx.x;
    const int sq = b < batch ? cu_q[b + 1] - cu_q[b] : 0;
    const bool lng = b < batch && sq > cap;
    if (b < batch && w.sms > 0) {
      const float sk = (float)(w.seqused ? w.seqused[b] : w.seqlen_k);
      if (lng) {  // query-key pairs (bottom-right causal: row r sees sk - sq + r + 1 keys) in 128 x 128 blocks
        const float q = (float)sq;
        const float pairs = w.causal ? (q <= sk ? q * (sk - 0.5f * q) : 0.5f * sk * sk) : q * sk;
        pre += (float)w.heads_q * pairs / 16384.f * (float)kPrefillBlockUs * (float)w.dsum / 256.f;
        tiles += (float)w.heads_q * ceilf(q / 128.f);
      } else {
        dec += sk * (float)w.heads_kv * (float)w.dsum * 2.f * (float)kDecodeByteUs;
      }
    }
    const unsigned m = __ballot_sync(0xffffffffu, lng);
    if (lane == 0) warp_n[wi] = __popc(m);
    __syncthreads();
    int off = 0, total = 0;
    for (int i = 0; i < 32; ++i) {
      off += i < wi ? warp_n[i] : 0;
      total += warp_n[i];
    }
    if (lng) ids[1 + base + off + __popc(m & ((1u << lane) - 1u))] = b;
    __syncthreads();  // every thread has read base and warp_n
    if (threadIdx.x == 0) base += total;
    __syncthreads();
  }
  for (int o = 16; o > 0; o >>= 1) {
    pre += __shfl_xor_sync(0xffffffffu, pre, o);
    dec += __shfl_xor_sync(0xffffffffu, dec, o);
    tiles += __shfl_xor_sync(0xffffffffu, tiles, o);
  }
  if (lane == 0) warp_p[wi] = pre, warp_d[wi] = dec, warp_t[wi] = tiles;
  __syncthreads();
  if (threadIdx.x == 0) {
    ids[0] = base;
    int budget = 1 << 30;  // no budget: every CTA of the launch
    if (w.sms > 0) {
      float P = 0.f, Dd = 0.f, T = 0.f;
      for (int i = 0; i < 32; ++i) P += warp_p[i], Dd += warp_d[i], T += warp_t[i];
      const float share = P + Dd > 0.f ? P / (P + Dd) : 1.f;
      budget = Dd > 0.f ? (int)ceilf((float)w.sms * share) : w.sms;
      budget = min(budget, Dd > 0.f ? w.sms - 1 : w.sms);
      budget = max(1, min(budget, (int)T));
    }
    ids[batch + 1] = budget;
  }
}

#if KSEEK_FA3_MIXED_GATHER
// How many of a mixed call's long sequences get a dense slot (KSEEK_FA3_MIXED_GATHER): over a paged
// cache the prefill reads in place, as many as build::kMixedGatherBytes of K + V slots hold, at most
// the batch; 0 = none (read in place, as without the variant).
static int mixed_slots(const kseek_params* p) {
  if (!p->page_table || !pg::copyable(p)) return 0;
  const int64_t per = (int64_t)pg::slot_bytes(p, 1);
  if (per <= 0) return 0;
  int64_t n = std::min<int64_t>(p->batch, fa3::build::kMixedGatherBytes / per);
  if (fa3::build::kMixedGatherSlots > 0) n = std::min<int64_t>(n, fa3::build::kMixedGatherSlots);
  return (int)n;
}
// The workspace they take after the list: two more lists (slotted, in place) and the slots.
static size_t mixed_gather_bytes(const kseek_params* p) {
  const int n = mixed_slots(p);
  return n > 0 ? 2 * mixed_ids_bytes(p) + pg::slot_bytes(p, n) : 0;
}
// 1: the last run_mixed ran its prefill part over dense slots (kseek_last_path 6).
static int g_mixed_slotted = 0;
// ids_g = the first min(ids[0], n) long sequences (those get slots), ids_p = the rest (in place).
// Both lists keep the budget (ids[batch + 1]).
__global__ void __launch_bounds__(256) split_ids(const int32_t* ids, int n, int batch, int32_t* ids_g, int32_t* ids_p) {
  const int total = ids[0], ng = min(total, n);
  if (threadIdx.x == 0) {
    ids_g[0] = ng;
    ids_p[0] = total - ng;
    ids_g[batch + 1] = ids_p[batch + 1] = ids[batch + 1];
  }
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    if (i < ng) ids_g[1 + i] = ids[1 + i];
    else ids_p[1 + i - ng] = ids[1 + i];
  }
}
// The prefill part over dense slots, split in two so that a mixed call can put its launches on another
// stream: slots_prep splits the list and copies the slotted sequences' pages (false: the slots cannot be
// used, nothing launched); slots_run runs the prefill over the slots (K/V batch coordinate = list
// position), then in place for the rest when there can be any. A kseek_status, or -1 (the caller's
// in-place prefill over the whole list rewrites every row the slots' launch may have written: the list
// and the copies are workspace only).
struct Slots {
  kseek_params d;
  int32_t* ids_g;
  int32_t* ids_p;
};
static int slots_prep(const kseek_params* p, cudaStream_t stream, const int32_t* ids, int slots, Slots& sl) {
  char* w = static_cast<char*>(p->workspace) + mixed_ids_bytes(p);
  sl.ids_g = reinterpret_cast<int32_t*>(w);
  sl.ids_p = reinterpret_cast<int32_t*>(w + mixed_ids_bytes(p));
  // d's K/V maps claim B batches (d.batch stays B: q, o, cu_q and seqused are per sequence) over `slots`
  // of memory; the prefill's K/V batch coordinate is the list position (Args::kslot), < ids_g[0] <= slots
  sl.d = pg::slot_view(p, w + 2 * mixed_ids_bytes(p), slots);
  if (!fa3::fast_ok(&sl.d)) return -1;
  split_ids<<<1, 256, 0, stream>>>(ids, slots, p->batch, sl.ids_g, sl.ids_p);
  if (cudaGetLastError() != cudaSuccess) return KSEEK_ERR_CUDA;
  return pg::launch_listed(p, &sl.d, sl.ids_g, slots, stream);
}
static int slots_run(const kseek_params* p, cudaStream_t stream, const Slots& sl, int slots) {
  fa3::g_kslot = 1;
  int r = fa3::fwd(&sl.d, stream, sl.ids_g);
  fa3::g_kslot = 0;
  if (r != KSEEK_OK) return r;
  if (slots < p->batch) r = fa3::fwd(p, stream, sl.ids_p);
  return r;
}
#endif

// KSEEK_FA3_MIXED_RESERVE (variants.cuh): a mixed call's prefill part on a second stream, at the device's
// highest priority, its grid capped at the SM count less the reserve, beside the decode part on the
// caller's stream. The stream and its two events are
// made once per device, never while the caller's stream is being captured (a call captured first runs
// on one stream); fork after the list (and the slots' page copy), join before kseek_fwd returns, so
// the caller's stream orders everything after the call as before.
static int g_mixed_reserve_probe = 0;  // KSEEK_FA3_MIXED_RESERVE=-1: set by kseek_fa3_probe_mixed_reserve
// The prefill part's grid cap (0: one stream): the SM count less the reserve, when that leaves both sides SMs.
static int mixed_cap() {
  const int reserve = fa3::build::kMixedReserve >= 0 ? fa3::build::kMixedReserve : g_mixed_reserve_probe;
  if (reserve <= 0) return 0;
  const int sms = fa3::sm_count(fa3::current_device());
  return sms - reserve >= 1 ? sms - reserve : 0;
}
struct Side {
  cudaStream_t s;
  cudaEvent_t fork, join;
};
static Side g_side[fa3::kMaxDev];
static Side* side_for(cudaStream_t stream) {
  const int dev = fa3::current_device();
  if (dev < 0 || dev >= fa3::kMaxDev) return nullptr;
  Side& sd = g_side[dev];
  if (sd.s) return &sd;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return nullptr;
  }
  int least = 0, greatest = 0;
  cudaStream_t s = nullptr;
  cudaEvent_t f = nullptr, j = nullptr;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
      cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest) != cudaSuccess ||
      cudaEventCreateWithFlags(&f, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventCreateWithFlags(&j, cudaEventDisableTiming) != cudaSuccess) {
    if (s) cudaStreamDestroy(s);
    if (f) cudaEventDestroy(f);
    if (j) cudaEventDestroy(j);
    cudaGetLastError();
    return nullptr;
  }
  sd.s = s, sd.fork = f, sd.join = j;
  return &sd;
}

// A mixed call: the list, the decode launch (its workspace after the list), the prefill launch; with
// KSEEK_FA3_MIXED_RESERVE the prefill on the side stream, its grid capped, then the decode, then the join.
// -1 when it cannot run that way (the caller falls back; a decode launch already made is harmless:
// the fallback writes every row).
static int run_mixed(const kseek_params* p, cudaStream_t stream) {
  const size_t idb = mixed_ids_bytes(p);
  size_t extra = 0;  // KSEEK_FA3_MIXED_GATHER: lists and slots between the list and the decode's workspace
  int slots = 0;
#if KSEEK_FA3_MIXED_GATHER
  g_mixed_slotted = 0;
  slots = mixed_slots(p);
  extra = mixed_gather_bytes(p);
  if (p->workspace_bytes < idb + extra + dec::workspace_bytes(p)) slots = 0, extra = 0;  // too small: in place
#endif
  if (!p->workspace || p->workspace_bytes < idb + extra || (reinterpret_cast<uintptr_t>(p->workspace) & 255))
    return -1;
  int32_t* ids = static_cast<int32_t*>(p->workspace);
  kseek_params pd = *p;
  pd.workspace = static_cast<char*>(p->workspace) + idb + extra;
  pd.workspace_bytes = p->workspace_bytes - idb - extra;
  int cap = mixed_cap();
  Side* side = cap > 0 ? side_for(stream) : nullptr;
  // Fork right after the list (the copy on the side stream, the decode part launched first): always with
  // KSEEK_FA3_MIXED_FORK_EARLY; for a slotted call of at most KSEEK_FA3_MIXED_EARLY_BATCH sequences (v26b),
  // with 1 SM reserved: its few decodes cannot hold the chip away from the prefill, and they stream beside the
  // copy instead of after it (v25: varlen_q_paged graph 177 -> 163 us; the serving rows, 60+ decodes, keep
  // the default order, under which they were 2-3% faster).
  bool early = false;
#if KSEEK_FA3_MIXED_GATHER
  if (side && slots > 0) {
    early = fa3::build::kMixedForkEarly;
    if (!early && p->batch <= fa3::build::kMixedEarlyBatch) {
      const int sms = fa3::sm_count(fa3::current_device());
      if (sms > 1) early = true, cap = sms - 1;
    }
  }
#endif
  // KSEEK_FA3_MIXED_BALANCE: beside the decode part, the prefill grid is one CTA per SM and long_seqs sets
  // how many of them run (one stream: no budget, the prefill runs after the decode on every SM)
  Weigh w{p->seqused_k, p->seqlen_k, p->heads_q, p->heads_kv, p->head_dim + p->head_dim_v, p->causal ? 1 : 0, 0};
  if (side && fa3::build::kMixedBalance) {
    w.sms = fa3::sm_count(fa3::current_device());
    cap = w.sms;
  }
  long_seqs<<<1, 1024, 0, stream>>>(p->cu_seqlens_q, p->batch, dec::row_cap(p), w, ids);
  if (cudaGetLastError() != cudaSuccess) return KSEEK_ERR_CUDA;
  if (side == nullptr) {  // one stream: the decode, then the prefill
    const int r = dec::run(&pd, stream);
    if (r != KSEEK_OK) return r;
#if KSEEK_FA3_MIXED_GATHER
    if (slots > 0) {
      Slots sl;
      int rs = slots_prep(p, stream, ids, slots, sl);
      if (rs == KSEEK_OK) rs = slots_run(p, stream, sl, slots);
      g_mixed_slotted = rs == KSEEK_OK;
      if (rs != -1) return rs;
    }
#endif
    return fa3::fwd(p, stream, ids);
  }
  // KSEEK_FA3_MIXED_FORK_EARLY (variants.cuh, v25): fork right after the list; the slots' split and page copy
  // on the side stream and the decode part launched next on the caller's, so that it streams beside the copy.
  // Default (0): the copy on the caller's stream, then the fork, the prefill launched before the decode.
  int rp = -1;           // the prefill part's status; -1: in place over the whole list
  int r = KSEEK_OK;      // the decode part's status
  bool decoded = false;  // launched already (before the prefill)
  int rs = -1;           // the slots' status (KSEEK_FA3_MIXED_GATHER); -1: none, in place
#if KSEEK_FA3_MIXED_GATHER
  Slots sl;
  if (!early && slots > 0) {
    rs = slots_prep(p, stream, ids, slots, sl);
    if (rs != KSEEK_OK && rs != -1) return rs;
  }
#endif
  if (cudaEventRecord(side->fork, stream) != cudaSuccess || cudaStreamWaitEvent(side->s, side->fork, 0) != cudaSuccess)
    return KSEEK_ERR_CUDA;
#if KSEEK_FA3_MIXED_GATHER
  if (early) {
    rs = slots_prep(p, side->s, ids, slots, sl);
    if (rs != KSEEK_OK && rs != -1) {  // join the fork before returning (a capture must not end unjoined)
      if (cudaEventRecord(side->join, side->s) == cudaSuccess) cudaStreamWaitEvent(stream, side->join, 0);
      return rs;
    }
    if (rs == KSEEK_OK) r = dec::run(&pd, stream), decoded = true;
  }
#endif
  fa3::g_grid_cap = cap;
#if KSEEK_FA3_MIXED_GATHER
  if (rs == KSEEK_OK) {
    rp = slots_run(p, side->s, sl, slots);
    g_mixed_slotted = rp == KSEEK_OK;
  }
#endif
  if (rp == -1) rp = fa3::fwd(p, side->s, ids);
  fa3::g_grid_cap = 0;
  const bool joined = cudaEventRecord(side->join, side->s) == cudaSuccess;
  if (!decoded) r = dec::run(&pd, stream);
  if (!joined || cudaStreamWaitEvent(stream, side->join, 0) != cudaSuccess) return KSEEK_ERR_CUDA;
  return r != KSEEK_OK ? r : rp;
}
#if KSEEK_FA3_MIXED_RESERVE < 0
// Probe builds only: the SMs reserved for the decode part of the next mixed calls (0: one stream).
extern "C" void kseek_fa3_probe_mixed_reserve(int sms) { g_mixed_reserve_probe = sms; }
#endif
#else
namespace fa3 {
inline int g_last_path = -1;  // as in prefill_host.cuh: the fallback build only ever sets 0
}
#endif  // !KSEEK_FA3_FORCE_FALLBACK

namespace fa3 {
// Which path the last kseek_fwd on this process launched (kseek_last_path): 0 the naive fallback,
// 1 split-KV decode, 2 bf16/fp16 prefill, 3 fp8 prefill, 4 decode + prefill (a mixed call), 5 a paged
// cache copied to a dense one, then a fast path (KSEEK_FA3_PAGE_GATHER), 6 a mixed call whose prefill part
// ran over dense copies of its long sequences (KSEEK_FA3_MIXED_GATHER), -1 none yet. Host-only bookkeeping.
inline int g_last_kind = -1;
}

#if !KSEEK_FA3_FORCE_FALLBACK
// KSEEK_FA3_MIXED_SMALL (variants.cuh, v25c, default 1): a mixed call over a DENSE cache whose every sequence's
// query-head tiles fit one wave (B x Hq <= the SM count) and whose keys are few (seqlen_k <= kMixedSmallKeys: a
// decode's one 128-row tile walks all its keys, ~1.9 us per 128) runs whole on the bf16/fp16 prefill, its decodes
// as tiles of the one persistent launch: FlashAttention-3's way, no list, decode part or combine (fa3api
// varlen_q_dense, H200: graph 76-78 -> 58-60 us, FA3 49-51). Not over pages: the in-place page-16 prefill made
// varlen_q_paged 168 -> 319 us.
static bool use_small_mixed(const kseek_params* p) {
  if (!fa3::build::kMixedSmall || p->page_table || p->seqlen_k > fa3::build::kMixedSmallKeys || !use_mixed(p))
    return false;
  const int sms = fa3::sm_count(fa3::current_device());
  return sms > 0 && (int64_t)p->batch * p->heads_q <= sms;
}

// Paths 1-3 for one call: a kseek_status, or -1 when none of them takes it.
static int run_fast(const kseek_params* p, cudaStream_t stream) {
  if (use_decode(p)) {  // paged KV, or dense decode (a few query rows per KV head)
    fa3::g_last_path = 1;
    fa3::g_last_kind = 1;
    return dec::run(p, stream);
  }
  if (use_small_mixed(p)) {  // v25c: the whole call on the prefill, its decodes as tiles of the one launch
    const int r = fa3::fwd(p, stream);
    if (r >= 0) {
      fa3::g_last_path = 1;
      fa3::g_last_kind = 2;
      return r;
    }
  }
  if (use_mixed(p)) {  // packed queries over a cache: short sequences on decode, the rest on prefill
    const int rm = run_mixed(p, stream);
    if (rm >= 0) {
      fa3::g_last_path = 1;
      fa3::g_last_kind = 4;
#if KSEEK_FA3_MIXED_GATHER
      if (g_mixed_slotted) fa3::g_last_kind = 6;
#endif
      return rm;
    }
  }
  int r = fa3::fwd(p, stream);             // bf16/fp16 prefill
  fa3::g_last_kind = 2;
  if (r < 0) {
    r = fa3::f8::fwd(p, stream);  // fp8 e4m3 (-1 for anything it does not take)
    fa3::g_last_kind = 3;
  }
  if (r >= 0) fa3::g_last_path = 1;
  return r;
}

// The workspace paths 1-3 need for a call.
static size_t fast_workspace(const kseek_params* p) {
  if (use_decode(p)) return dec::workspace_bytes(p);
#if KSEEK_FA3_MIXED_GATHER
  if (use_mixed(p)) return mixed_ids_bytes(p) + mixed_gather_bytes(p) + dec::workspace_bytes(p);
#else
  if (use_mixed(p)) return mixed_ids_bytes(p) + dec::workspace_bytes(p);
#endif
  return 0;
}

#if KSEEK_FA3_PAGE_GATHER
// A paged call none of paths 1-3 reads in place, whose dense copy one of them takes (page_gather.cuh).
// Variant 2 also takes the paged prefills the bf16/fp16 prefill reads in place (fa3::fast_ok) over small pages.
static bool use_gather(const kseek_params* p) {
  if (!pg::copyable(p) || use_decode(p) || use_mixed(p) || fa3::f8::fast_ok(p)) return false;
  // variant 2: also the in-place-readable ones, when their pages are small (KSEEK_FA3_GATHER_MAX_PAGE)
  if (fa3::fast_ok(p) && (KSEEK_FA3_PAGE_GATHER < 2 || p->page_size > KSEEK_FA3_GATHER_MAX_PAGE)) return false;
  const kseek_params d = pg::dense_view(p, reinterpret_cast<char*>(uintptr_t{256}), 0);  // aligned stand-in
  return use_decode(&d) || use_mixed(&d) || fa3::fast_ok(&d) || fa3::f8::fast_ok(&d);
}

// The copy, then the call over it: a kseek_status, or -1 to fall back (nothing launched yet).
static int run_gathered(const kseek_params* p, cudaStream_t stream) {
  if (!use_gather(p) || !p->workspace || p->workspace_bytes < pg::bytes(p) ||
      (reinterpret_cast<uintptr_t>(p->workspace) & 255))
    return -1;
  const kseek_params d = pg::dense_view(p, static_cast<char*>(p->workspace), p->workspace_bytes);
  if (const int st = pg::launch(p, &d, stream); st != KSEEK_OK) return st;
  const int r = run_fast(&d, stream);
  if (r >= 0) fa3::g_last_kind = 5;
  return r;  // (-1: the fallback writes every row; the copy it leaves is harmless)
}
#endif
#endif  // !KSEEK_FA3_FORCE_FALLBACK

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  if (const int st = naive::check_params(p); st != KSEEK_OK) return st;
  if (p->seqlen_q == 0) return KSEEK_OK;  // nothing to compute

#if !KSEEK_FA3_FORCE_FALLBACK
#if KSEEK_FA3_PAGE_GATHER >= 2
  int r = run_gathered(p, stream);  // first: it takes paged prefills path 2 would also read in place
  if (r < 0) r = run_fast(p, stream);
#else
  int r = run_fast(p, stream);
#if KSEEK_FA3_PAGE_GATHER
  if (r < 0) r = run_gathered(p, stream);
#endif
#endif
  if (r >= 0) return r;
#endif
  fa3::g_last_path = 0;
  fa3::g_last_kind = 0;
  switch (p->dtype) {
    case KSEEK_BF16: return naive::launch_out<__nv_bfloat16>(p, stream);
    case KSEEK_FP16: return naive::launch_out<__half>(p, stream);
    default: return naive::launch_out<__nv_fp8_e4m3>(p, stream);
  }
}

extern "C" size_t kseek_workspace_bytes(const kseek_params* p) {
#if KSEEK_FA3_FORCE_FALLBACK
  (void)p;
  return 0;
#else
  if (!p || p->abi_version != KSEEK_ABI_VERSION) return 0;
#if KSEEK_FA3_PAGE_GATHER
  if (use_gather(p)) {
    const kseek_params d = pg::dense_view(p, reinterpret_cast<char*>(uintptr_t{256}), 0);
    return pg::bytes(p) + fast_workspace(&d);
  }
#endif
  return fast_workspace(p);
#endif
}

extern "C" const char* kseek_name(void) { return "fa3_hopper"; }

// Optional ABI extra (kernelseek.attention records it per call): the path of the last kseek_fwd
// (fa3::g_last_kind above). A kernel without it is recorded as "unknown".
extern "C" int kseek_last_path(void) { return fa3::g_last_kind; }
