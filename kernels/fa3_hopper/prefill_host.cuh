// prefill_host.cuh: the host side of the bf16/fp16 prefill: does the fast kernel take this call
// (fast_ok), the varlen row totals, the tensor maps and kernel arguments of one call
// (prepare_launch), and the launch of one instantiation (start). The tile-choice table and the
// schedule choice that pick the instantiation live in the dispatch file, fa3_hopper.cu.
#pragma once
#include <atomic>
#include <string.h>

#include "prefill_kernel.cuh"
#include "variants.cuh"

namespace fa3 {

// Set by kseek_fwd: 1 = the last call launched a fast kernel (prefill, fp8 or decode), 0 = the
// fallback (the probes read it).
inline int g_last_path = -1;

// Tensor map of a [B, S, H, Dtot] 16-bit tensor whose box is 64 columns x `rows` rows of one head
// and batch, 128B swizzle (make_map_4d).
inline bool make_map(CUtensorMap* map, bool f16, const void* ptr, int64_t dtot, int64_t s,
                     int64_t h, int64_t bsz, int64_t rs, int64_t hs, int64_t bs, int rows,
                     int* swap) {
  return make_map_4d(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, dtot,
                     s, h, bsz, rs, hs, bs, 64, rows, CU_TENSOR_MAP_SWIZZLE_128B, swap);
}

// Head dims the prefill kernels (bf16/fp16 and fp8) are built for.
inline bool shape_ok(int d, int dv) {
  if (d == dv) return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
  return d == 192 && dv == 128;
}

// A paged cache the bf16/fp16 prefill reads in place: pages of a multiple of 8 rows (each box of
// gcd(BN, page_size) rows starts on a swizzle atom and stays in its page), no packed keys, no
// leftpad (a box would straddle two pages), the pool's page count given (the maps' extent).
inline bool pages_ok(const kseek_params* p) {
  return p->page_size > 0 && p->page_size % 8 == 0 && p->page_table_stride > 0 && p->num_pages > 0 &&
         !p->cu_seqlens_k && !p->leftpad_k;
}

// Rows per TMA box of a paged K/V block of `bn` keys: gcd(bn, page_size).
inline int page_box_rows(int bn, int page_size) {
  int x = bn, y = page_size;
  while (y) {
    const int t = x % y;
    x = y;
    y = t;
  }
  return x;
}

// What both prefill paths need of a call besides its dtypes (inputs already validated by kseek_fwd).
// Queries and keys are each dense or packed (cu_seqlens), independently; keys may be paged (bf16/fp16
// only: the fp8 path refuses pages and half-packed calls itself).
inline bool prefill_ok(const kseek_params* p) {
  if (!shape_ok(p->head_dim, p->head_dim_v)) return false;
  if (p->page_table && !pages_ok(p)) return false;
  if (!isfinite(p->softcap)) return false;
  if (!(p->scale > 0.f) || !isfinite(p->scale)) return false;
  if (p->softcap > 0.f && !isfinite(p->scale / p->softcap)) return false;
  if (p->seqlen_k <= 0 || p->seqlen_q <= 0) return false;
  if (p->seqlen_q >= (1 << 28) || p->seqlen_k >= (1 << 28)) return false;  // int math in the kernel
  // o is written two elements (4 bytes) at a time
  if ((reinterpret_cast<uintptr_t>(p->o) & 3) != 0) return false;
  if ((p->o_row_stride | p->o_head_stride) & 1) return false;
  if (!p->cu_seqlens_q && (p->o_batch_stride & 1)) return false;
  return device_is_sm90(current_device());
}

// Does the bf16/fp16 prefill kernel take this call?
inline bool fast_ok(const kseek_params* p) {
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return false;
  if (p->out_dtype != p->dtype) return false;
  return prefill_ok(p);
}

// Varlen: the tensor maps need the packed row counts. A map whose row extent is larger than the
// allocation (e.g. the bound B * seqlen) would let TMA read past the allocation (TMA only zero-fills
// past the MAP's extent), so it is not safe. ABI 2 gives the allocations' rows (total_q, total_k:
// q.shape[0], k.shape[0]); maps bounded by them stay inside the allocations and the call stays
// asynchronous and capturable (varlen output leaves by per-sequence direct stores, never a TMA box,
// so rows past cu_seqlens_q[B] are not written). Without them (0: an ABI-1 caller) we read
// cu_seqlens_q[B] and cu_seqlens_k[B]: two 4-byte cudaMemcpyAsync on `stream` +
// cudaStreamSynchronize(stream). HOST COST: that call blocks until all earlier work on the stream
// has finished (row 18 of bench26: 0.04 ms per call, NOTES v12), and it cannot run under CUDA-graph
// capture (a capturing stream takes the fallback).
inline bool varlen_totals(const kseek_params* p, cudaStream_t stream, int64_t* tq, int64_t* tk) {
  const bool vq = p->cu_seqlens_q != nullptr, vk = p->cu_seqlens_k != nullptr;
  if ((!vq || p->total_q > 0) && (!vk || p->total_k > 0)) {
    if (vq) *tq = p->total_q;
    if (vk) *tk = p->total_k;
    // < 2^28 as below: per-sequence lengths (<= totals) keep the kernel's int math in range
    return *tq < (1 << 28) && *tk < (1 << 28);
  }
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (st != cudaStreamCaptureStatusNone) return false;
  int32_t v[2] = {0, 0};
  if ((vq && cudaMemcpyAsync(&v[0], p->cu_seqlens_q + p->batch, sizeof(int32_t), cudaMemcpyDeviceToHost,
                             stream) != cudaSuccess) ||
      (vk && cudaMemcpyAsync(&v[1], p->cu_seqlens_k + p->batch, sizeof(int32_t), cudaMemcpyDeviceToHost,
                             stream) != cudaSuccess) ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (vq) *tq = v[0];
  if (vk) *tk = v[1];
  // < 2^28: per-sequence lengths (<= totals) keep the kernel's int math row + diag + window in range
  return *tq > 0 && *tk > 0 && *tq < (1 << 28) && *tk < (1 << 28);
}

// The Args fields shared by the bf16/fp16 and fp8 launches: outputs, sequence metadata, window,
// softcap and the softmax multipliers (scores kept in log2 units).
inline void fill_args(const kseek_params* p, bool varlen, Args& a) {
  a.o = p->o;
  a.lse = p->lse;
  a.o_bs = p->o_batch_stride;
  a.o_rs = p->o_row_stride;
  a.o_hs = p->o_head_stride;
  a.lse_bs = p->lse_batch_stride;
  a.lse_hs = p->lse_head_stride;
  a.cu_q = p->cu_seqlens_q;
  a.cu_k = p->cu_seqlens_k;
  a.seqused = p->seqused_k;
  a.leftpad = p->leftpad_k;
  a.sinks = p->sinks;
  a.sq = p->seqlen_q;
  a.sk = p->seqlen_k;
  a.group = p->heads_q / p->heads_kv;
  a.wl = clamp_window(p->window_left);
  a.wr = p->causal ? 0 : clamp_window(p->window_right);
  a.chunk = clamp_chunk(p->attention_chunk);
  a.dv = p->head_dim_v;
  // Keys past a sequence's end inside the map are real memory (next sequence, unused cache slots,
  // keys of leftpad'ed tails) that may hold NaN/Inf: zero those V rows in shared memory. Without
  // varlen/seqused/leftpad, rows past Sk are outside the map and TMA zero-fills them.
  a.vzero = (varlen || p->seqused_k || p->leftpad_k || p->page_table) ? 1 : 0;
  a.pt = nullptr;  // set by the bf16/fp16 prepare_launch for a paged cache
  a.pt_stride = a.psz = a.prow = 0;
  a.ids = nullptr;
#if KSEEK_FA3_MIXED_GATHER
  a.kslot = 0;
#endif
  const float kLog2e = 1.4426950408889634f;
  if (p->softcap > 0.f) {
    a.softcap_on = 1;
    a.cap_in = p->scale / p->softcap;
    a.cap_out = p->softcap * kLog2e;  // capped scores are kept in log2 units
    a.scale_log2 = 1.f;
    a.lse_mul = 0.6931471805599453f;
  } else {
    a.softcap_on = 0;
    a.cap_in = a.cap_out = 0.f;
    a.scale_log2 = p->scale * kLog2e;
    a.lse_mul = p->scale;
  }
}

// (batch, head) pairs per section of the persistent tile order (tile_at): sections whose K/V
// (keys x (D + Dv) x 2 bytes per KV head) fit in KSEEK_FA3_SECTION_MB (default 16) of the 50 MB
// L2, whole GQA groups each. Built with -DKSEEK_FA3_ORDER=flat: one section (query tile outermost
// over all pairs, v3/v4's default).
inline int section_pairs(const kseek_params* p, int d, int dv) {
  const int all = p->heads_q * p->batch;
  if (build::kOrder == build::order_flat) return all;
  const int group = p->heads_q / p->heads_kv;
  const double kv_bytes = (double)p->seqlen_k * (d + dv) * 2.0;  // one KV head of one sequence
  const double budget = build::kSectionMB * (1 << 20);
  int kv_heads = (int)(budget / (kv_bytes > 1.0 ? kv_bytes : 1.0));
  if (kv_heads < 1) kv_heads = 1;
  const double pairs = (double)kv_heads * group;
  return pairs >= all ? all : (int)pairs;
}

// Opt a kernel in to `bytes` of dynamic shared memory (above 48 KB it must), once per device:
// `done` is the caller's per-device flag array. False when the runtime refuses (error cleared).
template <class Kernel>
inline bool smem_opt_in(Kernel* fn, int bytes, int (&done)[kMaxDev]) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (dev < 0 || dev >= kMaxDev || !done[dev]) {
    if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    if (dev >= 0 && dev < kMaxDev) done[dev] = 1;
  }
  return true;
}

// A launch's status: KSEEK_OK; -1 for a launch-configuration error (e.g. not enough shared
// memory), which leaves no sticky state, so the call is retried on the fallback; else an error.
inline int launch_status(cudaError_t e) {
  if (e == cudaSuccess) return KSEEK_OK;
  if (e == cudaErrorInvalidConfiguration || e == cudaErrorInvalidValue ||
      e == cudaErrorNoKernelImageForDevice || e == cudaErrorLaunchOutOfResources)
    return -1;
  return KSEEK_ERR_CUDA;
}

#if KSEEK_FA3_MIXED_GATHER
// Set by fa3_hopper.cu's run_mixed around the prefill launch over its dense slots (Args::kslot);
// host-only, per thread (one kseek_fwd at a time per thread).
inline thread_local int g_kslot = 0;
#endif
// > 0: the persistent grid of the next launches is capped at this many CTAs (a mixed call's prefill part
// beside its decode part, fa3_hopper.cu run_mixed; KSEEK_FA3_MIXED_RESERVE); host-only, per thread
inline thread_local int g_grid_cap = 0;

// Everything one prefill launch passes: the tensor maps, the kernel arguments and the grid.
struct Launch {
  CUtensorMap tq, tk, tv, to;
  Args a;
  dim3 grid;
};

// The maps, arguments and persistent grid of one call for the <T, D, DV, BN> kernels; false when
// the fast path cannot take it (a map the driver refuses, too many tiles, no SM count).
// `ids`: a mixed call's device list of the sequences this launch runs (Args::ids), else NULL.
template <typename T, int D, int DV, int BN>
bool prepare_launch(const kseek_params* p, int64_t rows_q, int64_t rows_k, const int32_t* ids, Launch& l) {
  constexpr bool F16 = std::is_same<T, __half>::value;
  Args& a = l.a;
  const bool varlen = p->cu_seqlens_q != nullptr;
  const bool paged = p->page_table != nullptr;
  const int64_t nb = varlen ? 1 : p->batch;  // varlen: one packed "batch" of total rows
  // keys: one packed "batch", B dense sequences, or the page pool (num_pages "batches" of page_size
  // rows, read in boxes of prow rows)
  const int64_t kb = p->cu_seqlens_k ? 1 : (paged ? p->num_pages : p->batch);
  const int64_t krows = paged ? p->page_size : rows_k;
  const int kbox = paged ? page_box_rows(BN, p->page_size) : BN;
  // KSEEK_FA3_PAGEIDS=warp issues one box per lane: never more boxes per chunk than lanes (page
  // size % 8 == 0 keeps it <= 24 today; this keeps it true if that rule changes)
  if (paged && build::kPageIds == build::pageids_warp && BN / kbox > 32) return false;
  // (host cost: three cuTensorMapEncodeTiled calls per kseek_fwd, a few microseconds; cacheable)
  // The maps use the TRUE head dims (96: the second 64-column box is zero-filled past column 96).
  if (!make_map(&l.tq, F16, p->q, p->head_dim, rows_q, p->heads_q, nb, p->q_row_stride,
                p->q_head_stride, p->q_batch_stride, kBM, &a.q_swap) ||
      !make_map(&l.tk, F16, p->k, p->head_dim, krows, p->heads_kv, kb, p->k_row_stride,
                p->k_head_stride, p->k_batch_stride, kbox, &a.k_swap) ||
      !make_map(&l.tv, F16, p->v, p->head_dim_v, krows, p->heads_kv, kb, p->v_row_stride,
                p->v_head_stride, p->v_batch_stride, kbox, &a.v_swap))
    return false;
  fill_args(p, varlen || p->cu_seqlens_k != nullptr, a);
  if (paged) {
    a.pt = p->page_table;
    a.pt_stride = p->page_table_stride;
    a.psz = p->page_size;
    a.prow = kbox;
  }
  a.ids = ids;
#if KSEEK_FA3_MIXED_GATHER
  a.kslot = g_kslot;
#endif
  // O's map (64-row boxes, one per consumer warpgroup) where the staging fits: dense layouts, and
  // (KSEEK_FA3_OSTORE=tma) packed queries, over their rows_q packed rows (the epilogue stores only boxes
  // that lie inside their sequence)
  memset(&l.to, 0, sizeof(l.to));
  a.o_tma = 0;
  a.o_swap = 0;
  if (Smem<D, DV, BN>::kOStage &&
      (build::kOStore == build::ostore_tma || (!varlen && build::kOStore == build::ostore_densetma)))
    a.o_tma = make_map(&l.to, F16, p->o, p->head_dim_v, rows_q, p->heads_q, nb, p->o_row_stride,
                       p->o_head_stride, p->o_batch_stride, 64, &a.o_swap) ? 1 : 0;

  a.heads = p->heads_q;
  a.batch = p->batch;
  a.m_blocks = (p->seqlen_q + kBM - 1) / kBM;
  const int64_t tiles = (int64_t)a.m_blocks * p->heads_q * p->batch;
  if (tiles <= 0 || tiles >= (int64_t)1 << 31) return false;
  a.tiles = (int)tiles;
  a.sec = section_pairs(p, D, DV);
  static std::atomic<unsigned> launches{0};  // rotates the scheduler's counter slots
  a.slot = (int)(launches.fetch_add(1, std::memory_order_relaxed) % kSchedSlots);
  const int sms = sm_count(current_device());
  if (sms <= 0) return false;
  const int ctas = g_grid_cap > 0 && g_grid_cap < sms ? g_grid_cap : sms;
  l.grid = dim3((unsigned)(tiles < ctas ? tiles : ctas));  // persistent: one CTA per SM at most
  return true;
}

// Launch one instantiation (the >48 KB dynamic shared memory opt-in once per device).
template <typename T, int D, int DV, int BN, int VAR, bool DYN, bool PG = false>
int start(const Launch& l, cudaStream_t stream) {
  constexpr int smem = Smem<D, DV, BN>::kTotal;
  static int attr_done[kMaxDev] = {0};
  if (!smem_opt_in(fwd_kernel<T, D, DV, BN, VAR, DYN, PG>, smem, attr_done)) return -1;
  fwd_kernel<T, D, DV, BN, VAR, DYN, PG><<<l.grid, kThreads, smem, stream>>>(l.tq, l.tk, l.tv, l.to, l.a);
  return launch_status(cudaGetLastError());
}

}  // namespace fa3
