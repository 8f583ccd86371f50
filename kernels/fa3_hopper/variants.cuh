// variants.cuh: the build variants of fa3_hopper, for A/B runs. Each is a -D flag named after the
// environment variable that v12 and earlier read with getenv in the call path (same values); unset,
// each takes the default (v14, session 13: PAGE_GATHER=2, DECODE_FP8=1, DECODE_DV=1 and
// DECODE_SPLITS=ragged became defaults after their H200 A/B, NOTES v14; v15, session 14: MIXED_GATHER=1;
// the old behaviour is the value 0 / model). An instantiation that
// only a variant reaches (a consumer schedule, a tile width) is compiled only in that variant, so
// the default build holds exactly the kernels the default dispatch can reach. README.md lists them.
//
//   -DKSEEK_FA3_FORCE_FALLBACK=1   every call takes the naive fallback (nothing else is compiled)
//   -DKSEEK_FA3_VARIANT=0|1|2      prefill consumer schedule (fwd_kernel's VAR): 0 serial, 1
//                                  intra-warpgroup overlap, 2 (default) 1 + ping-pong
//   -DKSEEK_FA3_SCHED=auto|static|dynamic
//                                  prefill tile schedule (VAR 2 only): auto (default) = dynamic for
//                                  causal or windowed calls at head dim > 64, static otherwise
//   -DKSEEK_FA3_BN=0|64|128|176|192
//                                  keys per K/V tile: 0 (default) = the tile-choice table
//                                  (fa3_hopper.cu); 64: v4's tiles at hd192/256; 128 or 192 at
//                                  hd64 and hd96 for every key length; 176 at hd128
//   -DKSEEK_FA3_ORDER=section|flat persistent tile order: section (default) = sections of heads whose
//                                  K/V fit in KSEEK_FA3_SECTION_MB of L2; flat = one section
//   -DKSEEK_FA3_SECTION_MB=16      the L2 budget of a section, MB (> 0; default 16)
//   -DKSEEK_FA3_OSTORE=tma|densetma|direct
//                                  O leaves through shared memory and a TMA store where it fits: tma
//                                  (default since v23) for dense calls and, for packed queries, each
//                                  consumer warpgroup's 64-row box that lies wholly inside its sequence
//                                  (the last, partial box by direct stores: a box would write the next
//                                  sequence's rows); densetma (v12-v22) dense calls only; direct: direct
//                                  global stores everywhere
//   -DKSEEK_FA3_DECODE_SPLITS=model|ragged
//                                  split-KV decode with seqused_k: the cost model's split count (model:
//                                  it assumes every sequence holds seqlen_k keys), or (ragged, default
//                                  since v14) at least enough splits that a CTA covers <=
//                                  KSEEK_FA3_SPLIT_KEYS keys of the longest sequence, when that needs
//                                  >= KSEEK_FA3_RAGGED_MIN_SPLITS (one long sequence no longer rests on
//                                  a few CTAs: d17 0.18 -> 0.095 ms on the H200; without the minimum a
//                                  2000-key uniform row went 1 -> 2 splits and lost 3.6% in graph replay);
//                                  dense queries only (a mixed call's decodes keep the model's count)
//   -DKSEEK_FA3_DECODE_WIDE=1      a packed-query decode grid of at most this many CTAs per SM takes the wide
//                                  form (8 warps, 1 CTA per SM; dense grids: at most one CTA per SM, as v22).
//                                  A mixed call's grid counts every sequence, and most of its CTAs may exit
//                                  at once (varlen_q_dense: 80 of 240 work): 2 gives the working ones 8 warps
//                                  each (v24, measured as a variant only)
//   -DKSEEK_FA3_SPLIT_KEYS=1024    the keys per CTA bound of `ragged` (> 0)
//   -DKSEEK_FA3_RAGGED_MIN_SPLITS=4
//                                  `ragged` leaves the model's choice alone below this many splits (>= 1)
//   -DKSEEK_FA3_PAGEIDS=ldg|warp   paged prefill (PG kernels only): the producer thread reads each box's
//                                  page id from global memory before its TMA (ldg, default: one at a
//                                  time); or the whole producer warp runs the loop and lane j loads box
//                                  j's page id and issues its TMA (warp; never run on a GPU yet). (A
//                                  third value, smem: ids by cp.async into shared memory, measured no
//                                  change at aa20ca6 and was removed: NOTES v13c.)
//   -DKSEEK_FA3_PAGE_GATHER=0|1|2  a paged call no fast path reads in place (fp8 K/V, page sizes not a
//                                  multiple of 8, paged left padding): 0 the naive fallback;
//                                  1: copy its pages to a dense K/V in the workspace and run a fast path
//                                  over that (page_gather.cuh; H200: 5 hopper rows 0.010-0.13x of before);
//                                  2 (default since v14): as 1, and every paged prefill the bf16/fp16
//                                  prefill would read in place (page % 8 == 0) goes through the copy too
//                                  (H200: p06 0.50 -> 0.22 ms, p07 7.3 -> 3.2 ms against the PG
//                                  producer's box-per-page loads). Decode and mixed calls never.
//   -DKSEEK_FA3_GATHER_MAX_PAGE=16  variant 2 copies an in-place-readable paged prefill only when its
//                                  pages hold at most this many rows (H200 hopper grid, session 14: p16
//                                  rows 0.55-0.92x the in-place time, p128/p256 rows 1.5-5.5x: with big
//                                  pages the PG producer's boxes are already large; p32/p64 not measured)
//   -DKSEEK_FA3_DECODE_FP8=0|1     fp8 e4m3 q/k/v (o bf16) in the split-KV decode: 0 (default) fp8 calls
//                                  never reach decode.cuh (paged: the naive fallback; dense: the fp8
//                                  prefill); 1 (default since v14): dec::splitkv_f8_kernel takes the fp8
//                                  calls the bf16 decode would take (D == Dv in {64, 128, 256}), and
//                                  dense fp8 calls with Sq <= 16 and at most 64 query rows per KV head
//                                  (NOTES v13e; H200: the 6 hd128 fp8 decode rows 0.05-0.90x of before)
//   -DKSEEK_FA3_DECODE_DV=0|1      head dim 192 for Q/K with 128 for V/O (DeepSeek-style) in the split-KV
//                                  decode, bf16/fp16: 0 the decode refuses D != Dv (such calls take the
//                                  bf16/fp16 prefill or the naive fallback); 1 (default since v14):
//                                  splitkv_kernel<T, 192, 128> takes every call of that shape the decode
//                                  would take at D == Dv (fp8 with D != Dv stays refused; NOTES v13g;
//                                  H200: the 6 hd192/128 bf16 decode rows 0.09-0.89x of before)
//   -DKSEEK_FA3_MIXED_GATHER=0|1   a mixed call (packed queries over a PAGED cache: decodes beside
//                                  chunked prefills) whose pages the prefill would read in place box by
//                                  box (page % 8 == 0): 0 in place (v14); 1 (default since v15): the long sequences' pages
//                                  copied first into dense slots in the workspace (page_gather.cuh
//                                  gather_listed), the prefill run over those (its K/V batch coordinate is
//                                  the slot), the decodes still in place. Sequences past the slots' budget
//                                  (KSEEK_FA3_MIXED_GATHER_MB of K + V) stay in place, in a second launch.
//                                  H200 (session 14, serving s01-s07 against FA3, graph): s01 0.60 -> 0.82x,
//                                  s04 0.51 -> 0.95x, s07 0.64 -> 0.97x, the page-64 rows +1-7%
//   -DKSEEK_FA3_MIXED_GATHER_MB=1024  the slots' budget, MiB (> 0)
//   -DKSEEK_FA3_MIXED_GATHER_SLOTS=0  at most this many slots (0: as many as the budget holds; 1 in the GPU
//                                  test, so that a step's other long sequences take the in-place launch)
//   -DKSEEK_FA3_MIXED_RESERVE=20   a mixed call's prefill part on a second (high-priority) stream beside its
//                                  decode part, its persistent grid capped at the SM count less this many
//                                  SMs, which the decode's CTAs have to themselves meanwhile (memory-bound
//                                  decode beside compute-bound prefill); 0: one stream, decode then prefill
//                                  (v16). -1: set at run time through kseek_fa3_probe_mixed_reserve (probe
//                                  builds, tools/mixed_overlap_probe.py; starts at 0). H200, session 17,
//                                  serving s01-s07 graph: reserve 20 (grid 112) 0.5-3.6% faster on every row
//                                  than one stream, outputs bit for bit the same; 66 SMs reserved: s02 -6.5%
//                                  but s04 +30%, s05 +34% (NOTES v17)
//   -DKSEEK_FA3_MIXED_BALANCE=0|1  (needs MIXED_RESERVE > 0) 1: a mixed call's prefill grid is one CTA per SM
//                                  and long_seqs sets, on the device, how many of its CTAs run: the SMs its
//                                  share of the call's estimated time asks for (prefill query-key blocks
//                                  against the decode part's bytes at 20 KB/us per SM); the others exit at
//                                  once and leave their SMs to the decode part. 0 (default): the fixed
//                                  reserve. H200, v23b: fa3api varlen_q_dense graph 81.7 -> 69.7 us, but
//                                  serving s01-s07 0.65-0.96x of FA3 against 0.85-1.01x with 0: there the
//                                  decode part has CTAs enough to spread over the prefill's SMs once it
//                                  ends, and a prefill squeezed onto a few SMs ends last (NOTES v23)
//   -DKSEEK_FA3_MIXED_FORK_EARLY=0|1  (needs MIXED_RESERVE != 0) 1: a mixed call whose prefill runs over dense
//                                  slots forks right after the list: the split and page copy on the side stream,
//                                  the decode part launched before the prefill, so it streams beside the copy.
//                                  0 (default): the copy first on the caller's stream. H200, v25 (reserve 20):
//                                  fa3api varlen_q_paged graph 170.9 -> 183.8 us (the copy 22 -> 37 us, sharing
//                                  the bandwidth with the decode; the prefill waits for it on its 112 SMs);
//                                  with 1 SM reserved 177.4 -> 163.3 us, but serving s01 / s02 2-3% slower
//   -DKSEEK_FA3_MIXED_EARLY_BATCH=32  (v26b; needs MIXED_RESERVE != 0) a slotted mixed call of at most this
//                                  many sequences forks early (as MIXED_FORK_EARLY) with 1 SM reserved; 0: never.
//                                  Few decodes stream beside the copy; the serving rows (60+ sequences) keep the
//                                  default order (measured in v25 at reserve 1: varlen_q_paged graph 177 -> 163
//                                  us, s01 / s02 2-3% slower)
//   -DKSEEK_FA3_MIXED_SMALL=0|1    1 (default since v25c): a mixed call over a dense cache with B x Hq <= the SM
//                                  count and seqlen_k <= 4096 runs whole on the bf16/fp16 prefill, its decodes as
//                                  128-row tiles of the one persistent launch (FlashAttention-3's way). H200 v25c
//                                  (as N=16 sequences, any cache): varlen_q_dense graph 76-78 -> 58-60 us (FA3
//                                  49-51); over page-16 caches much slower (varlen_q_paged 168 -> 319 us,
//                                  append_plain_varlen 63 -> 79): paged calls keep the mixed path
// Probe-only build hooks (not variants of the shipped kernel): FA3_DEBUG_HANG (mbar_wait traps),
// FA3_REGS_24_240 (v4's register split), FA3_NO_RESCALE_SKIP (always rescale O).
#pragma once

#ifndef KSEEK_FA3_FORCE_FALLBACK
#define KSEEK_FA3_FORCE_FALLBACK 0
#endif
#ifndef KSEEK_FA3_VARIANT
#define KSEEK_FA3_VARIANT 2
#endif
#ifndef KSEEK_FA3_SCHED
#define KSEEK_FA3_SCHED auto
#endif
#ifndef KSEEK_FA3_BN
#define KSEEK_FA3_BN 0
#endif
#ifndef KSEEK_FA3_ORDER
#define KSEEK_FA3_ORDER section
#endif
#ifndef KSEEK_FA3_SECTION_MB
#define KSEEK_FA3_SECTION_MB 16
#endif
#ifndef KSEEK_FA3_OSTORE
#define KSEEK_FA3_OSTORE tma
#endif
#ifndef KSEEK_FA3_PAGEIDS
#define KSEEK_FA3_PAGEIDS ldg
#endif
#ifndef KSEEK_FA3_DECODE_SPLITS
#define KSEEK_FA3_DECODE_SPLITS ragged
#endif
#ifndef KSEEK_FA3_PAGE_GATHER
#define KSEEK_FA3_PAGE_GATHER 2
#endif
#ifndef KSEEK_FA3_GATHER_MAX_PAGE
#define KSEEK_FA3_GATHER_MAX_PAGE 16
#endif
#ifndef KSEEK_FA3_DECODE_FP8
#define KSEEK_FA3_DECODE_FP8 1
#endif
#ifndef KSEEK_FA3_DECODE_DV
#define KSEEK_FA3_DECODE_DV 1
#endif
#ifndef KSEEK_FA3_MIXED_GATHER
#define KSEEK_FA3_MIXED_GATHER 1
#endif
#ifndef KSEEK_FA3_MIXED_GATHER_MB
#define KSEEK_FA3_MIXED_GATHER_MB 1024
#endif
#ifndef KSEEK_FA3_MIXED_GATHER_SLOTS
#define KSEEK_FA3_MIXED_GATHER_SLOTS 0
#endif
#ifndef KSEEK_FA3_MIXED_BALANCE
#define KSEEK_FA3_MIXED_BALANCE 0
#endif
#ifndef KSEEK_FA3_MIXED_RESERVE
#define KSEEK_FA3_MIXED_RESERVE 20
#endif
#ifndef KSEEK_FA3_MIXED_FORK_EARLY
#define KSEEK_FA3_MIXED_FORK_EARLY 0
#endif
#ifndef KSEEK_FA3_MIXED_EARLY_BATCH
#define KSEEK_FA3_MIXED_EARLY_BATCH 32
#endif
#ifndef KSEEK_FA3_MIXED_SMALL
#define KSEEK_FA3_MIXED_SMALL 1
#endif
#ifndef KSEEK_FA3_DECODE_WIDE
#define KSEEK_FA3_DECODE_WIDE 1
#endif
#ifndef KSEEK_FA3_SPLIT_KEYS
#define KSEEK_FA3_SPLIT_KEYS 1024
#endif
#ifndef KSEEK_FA3_RAGGED_MIN_SPLITS
#define KSEEK_FA3_RAGGED_MIN_SPLITS 4
#endif

// A word-valued flag (SCHED, ORDER, OSTORE) selects the constant <prefix>_<word> below; any other
// word fails to compile with "identifier <prefix>_<word> is undefined".
#define FA3_PASTE_(a, b) a##b
#define FA3_PASTE(a, b) FA3_PASTE_(a, b)

namespace fa3 {
namespace build {

constexpr bool kForceFallback = KSEEK_FA3_FORCE_FALLBACK != 0;

constexpr int kVariant = KSEEK_FA3_VARIANT;
static_assert(kVariant >= 0 && kVariant <= 2, "KSEEK_FA3_VARIANT must be 0, 1 or 2");

enum Sched { sched_auto, sched_static, sched_dynamic };
constexpr Sched kSched = FA3_PASTE(sched_, KSEEK_FA3_SCHED);

constexpr int kBN = KSEEK_FA3_BN;
static_assert(kBN == 0 || kBN == 64 || kBN == 128 || kBN == 176 || kBN == 192,
              "KSEEK_FA3_BN must be 0 (the table), 64, 128, 176 or 192");

enum Order { order_section, order_flat };
constexpr Order kOrder = FA3_PASTE(order_, KSEEK_FA3_ORDER);

constexpr double kSectionMB = KSEEK_FA3_SECTION_MB;
static_assert(kSectionMB > 0.0, "KSEEK_FA3_SECTION_MB must be positive");

enum OStore { ostore_tma, ostore_densetma, ostore_direct };
constexpr OStore kOStore = FA3_PASTE(ostore_, KSEEK_FA3_OSTORE);

enum PageIds { pageids_ldg, pageids_warp };
constexpr PageIds kPageIds = FA3_PASTE(pageids_, KSEEK_FA3_PAGEIDS);

enum DecodeSplits { decsplits_model, decsplits_ragged };
constexpr DecodeSplits kDecodeSplits = FA3_PASTE(decsplits_, KSEEK_FA3_DECODE_SPLITS);
constexpr int kSplitKeys = KSEEK_FA3_SPLIT_KEYS;
static_assert(KSEEK_FA3_DECODE_WIDE >= 1, "KSEEK_FA3_DECODE_WIDE must be >= 1");
constexpr int kDecodeWide = KSEEK_FA3_DECODE_WIDE;
static_assert(kSplitKeys > 0, "KSEEK_FA3_SPLIT_KEYS must be positive");
constexpr int kRaggedMinSplits = KSEEK_FA3_RAGGED_MIN_SPLITS;
static_assert(kRaggedMinSplits >= 1, "KSEEK_FA3_RAGGED_MIN_SPLITS must be >= 1");

static_assert(KSEEK_FA3_PAGE_GATHER >= 0 && KSEEK_FA3_PAGE_GATHER <= 2, "KSEEK_FA3_PAGE_GATHER must be 0, 1 or 2");
static_assert(KSEEK_FA3_GATHER_MAX_PAGE >= 1, "KSEEK_FA3_GATHER_MAX_PAGE must be >= 1");

static_assert(KSEEK_FA3_DECODE_FP8 == 0 || KSEEK_FA3_DECODE_FP8 == 1, "KSEEK_FA3_DECODE_FP8 must be 0 or 1");
constexpr bool kDecodeFp8 = KSEEK_FA3_DECODE_FP8 != 0;

static_assert(KSEEK_FA3_DECODE_DV == 0 || KSEEK_FA3_DECODE_DV == 1, "KSEEK_FA3_DECODE_DV must be 0 or 1");
constexpr bool kDecodeDv = KSEEK_FA3_DECODE_DV != 0;

static_assert(KSEEK_FA3_MIXED_GATHER == 0 || KSEEK_FA3_MIXED_GATHER == 1, "KSEEK_FA3_MIXED_GATHER must be 0 or 1");
static_assert(KSEEK_FA3_MIXED_GATHER_MB > 0, "KSEEK_FA3_MIXED_GATHER_MB must be positive");
constexpr long long kMixedGatherBytes = (long long)KSEEK_FA3_MIXED_GATHER_MB << 20;
static_assert(KSEEK_FA3_MIXED_GATHER_SLOTS >= 0, "KSEEK_FA3_MIXED_GATHER_SLOTS must be >= 0");
constexpr int kMixedGatherSlots = KSEEK_FA3_MIXED_GATHER_SLOTS;
static_assert(KSEEK_FA3_MIXED_RESERVE >= -1, "KSEEK_FA3_MIXED_RESERVE must be -1 (probe), 0 (off) or an SM count");
constexpr int kMixedReserve = KSEEK_FA3_MIXED_RESERVE;
static_assert(KSEEK_FA3_MIXED_BALANCE == 0 || KSEEK_FA3_MIXED_BALANCE == 1, "KSEEK_FA3_MIXED_BALANCE must be 0 or 1");
constexpr bool kMixedBalance = KSEEK_FA3_MIXED_BALANCE != 0;
static_assert(KSEEK_FA3_MIXED_FORK_EARLY == 0 || KSEEK_FA3_MIXED_FORK_EARLY == 1, "KSEEK_FA3_MIXED_FORK_EARLY must be 0 or 1");
constexpr bool kMixedForkEarly = KSEEK_FA3_MIXED_FORK_EARLY != 0;
static_assert(KSEEK_FA3_MIXED_EARLY_BATCH >= 0, "KSEEK_FA3_MIXED_EARLY_BATCH must be >= 0");
constexpr int kMixedEarlyBatch = KSEEK_FA3_MIXED_EARLY_BATCH;
static_assert(KSEEK_FA3_MIXED_SMALL == 0 || KSEEK_FA3_MIXED_SMALL == 1, "KSEEK_FA3_MIXED_SMALL must be 0 or 1");
constexpr bool kMixedSmall = KSEEK_FA3_MIXED_SMALL != 0;
constexpr int kMixedSmallKeys = 4096;  // the longest cache a small mixed call may have (fa3_hopper.cu use_small_mixed)

}  // namespace build
}  // namespace fa3
