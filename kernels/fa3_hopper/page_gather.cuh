// page_gather.cuh: paged calls copied to a dense cache first, then run on a dense fast path.
// gather_pages (-DKSEEK_FA3_PAGE_GATHER=1|2, variants.cuh; 2 the default since v14): every sequence of a
// paged call no fast path reads in place (fp8 K/V over pages, page sizes not a multiple of 8, paged left
// padding: 0.007-0.42x of FA3 on the naive fallback, session 11), and with 2 the paged prefills over pages
// of <= KSEEK_FA3_GATHER_MAX_PAGE rows too. gather_listed (-DKSEEK_FA3_MIXED_GATHER=1, the default since
// v15): a mixed call's long sequences only, into dense slots.
//
// The rows of each sequence's logical cache (positions 0 <= j < Sk, kseek.h) go to a dense
// K [B, Sk, Hkv, D] and V [B, Sk, Hkv, Dv] at the start of the workspace: the used keys
// (leftpad_b <= j < end_b) copied from their pages, the kZeroTail rows after the end zeroed (a dense
// path reads whole tiles and multiplies masked keys' V by P = 0: a NaN there would survive that), the
// rest (never read) left as they are.
// The call then runs as a dense-cache call (same seqused_k, leftpad_k, descales) on whichever fast
// path takes it; the rest of the workspace is that path's. Cost: one more read and write of the cache
// rows, about 3x the bytes of reading the pages in place.
#pragma once
#include <cstdint>

#include "../kseek.h"
#include "variants.cuh"

namespace pg {

struct Args {
  const char* k;
  const char* v;
  char* k2;                        // dense copies (workspace)
  char* v2;
  const int32_t* pt;
  const int32_t* seqused;
  const int32_t* leftpad;
  int64_t pt_stride;
  int64_t k_page, k_row, k_head;   // source strides, bytes
  int64_t v_page, v_row, v_head;
  int page_size, seqlen_k, hkv;
  int k_chunks, v_chunks;          // 16-byte chunks per K row and per V row of one head
};

// The copy works in blocks of kRows logical rows (one CTA each), not one CTA per page: with 256-row
// pages a 2-sequence call was 12 CTAs on 132 SMs (H200 hopper grid, session 14: d256 p256 0.08 -> 0.38 ms).
// Rows are read from their pages one by one (a page id per row, from L1), so a block may span pages.
constexpr int kRows = 16;
// Rows the fast paths read past a sequence's end: the prefill's last K/V tile (BN <= 192 rows) reads
// whole tiles (masked keys; V rows past the end zeroed in shared memory, NaN-safe only if they exist),
// the decode reads no row past the end. Rows [end, end + kZeroTail) are written as zeros, rows past
// that are never read and are not written; rows before the first stored key (leftpad) are never read.
constexpr int kZeroTail = 256;

// Logical rows [r0, min(r0 + kRows, lim)) of sequence b's cache into dense row block `dst_b`: used rows
// (leftpad_b <= j < end_b) copied from their pages, the others zeroed; no page id read for an unused row.
__device__ __forceinline__ void copy_rows(const Args& a, int r0, int b, int dst_b, int lim) {
  const int r1 = min(lim, r0 + kRows);
  if (r0 >= r1) return;
  const int end = a.seqused ? min(a.seqused[b], a.seqlen_k) : a.seqlen_k;
  const int lp = a.leftpad ? a.leftpad[b] : 0;
  const int32_t* ptrow = a.pt + (int64_t)b * a.pt_stride;
  const int rows = r1 - r0;
  for (int half = 0; half < 2; ++half) {                   // K, then V
    const int nc = half ? a.v_chunks : a.k_chunks;
    const char* src = half ? a.v : a.k;
    char* dst = half ? a.v2 : a.k2;
    const int64_t sp = half ? a.v_page : a.k_page, sr = half ? a.v_row : a.k_row, sh = half ? a.v_head : a.k_head;
    const int n = rows * a.hkv * nc;                       // <= 16 rows x 65535 heads x 32 chunks: int
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int c = i % nc;
      const int t = i / nc;
      const int h = t % a.hkv;
      const int j = r0 + t / a.hkv;
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (j >= lp && j < end) {
        const int64_t page = __ldg(ptrow + j / a.page_size);
        x = __ldg(reinterpret_cast<const uint4*>(src + page * sp + (int64_t)(j % a.page_size) * sr + h * sh) + c);
      }
      reinterpret_cast<uint4*>(dst + (((int64_t)dst_b * a.seqlen_k + j) * a.hkv + h) * nc * 16)[c] = x;
    }
  }
}

// Row block x of sequence b's cache: the rows the fast paths read (see kZeroTail), into dense slot `dst_b`.
__device__ __forceinline__ void copy_block(const Args& a, int x, int b, int dst_b) {
  const int end = a.seqused ? min(a.seqused[b], a.seqlen_k) : a.seqlen_k;
  const int lp = a.leftpad ? a.leftpad[b] : 0;
  if ((x + 1) * kRows <= lp) return;                       // before the first stored key: never read
  copy_rows(a, x * kRows, b, dst_b, min(a.seqlen_k, end + kZeroTail));
}

#if KSEEK_FA3_PAGE_GATHER
// One CTA per (row block x, sequence b): every sequence into its own dense slot.
__global__ void __launch_bounds__(256) gather_pages(const Args a) { copy_block(a, blockIdx.x, blockIdx.y, blockIdx.y); }
#endif

#if KSEEK_FA3_MIXED_GATHER
// KSEEK_FA3_MIXED_GATHER: one CTA per (row block x, list position j): sequence ids[1 + j] into dense
// slot j, for j < ids[0] (the mixed call's long sequences that got a slot), so a 32k-capacity table
// with 2k used keys copies ~2k rows, not 32k.
__global__ void __launch_bounds__(256) gather_listed(const Args a, const int32_t* ids) {
  const int j = blockIdx.y;
  if (j >= __ldg(ids)) return;
  copy_block(a, blockIdx.x, __ldg(ids + 1 + j), j);
}
#endif

inline int esize(const kseek_params* p) { return p->dtype == KSEEK_FP8_E4M3 ? 1 : 2; }
inline size_t round256(size_t x) { return (x + 255) / 256 * 256; }
inline size_t k_bytes(const kseek_params* p) {
  return round256((size_t)p->batch * p->seqlen_k * p->heads_kv * p->head_dim * esize(p));
}
inline size_t v_bytes(const kseek_params* p) {
  return round256((size_t)p->batch * p->seqlen_k * p->heads_kv * p->head_dim_v * esize(p));
}
inline size_t bytes(const kseek_params* p) { return k_bytes(p) + v_bytes(p); }

// Can the pages be copied with 16-byte loads and stores? (Every head dim of the fast paths is a
// multiple of 16 bytes per row; the source strides and pointers must keep that alignment.)
inline bool copyable(const kseek_params* p) {
  if (!p->page_table || p->cu_seqlens_k || p->page_size <= 0 || p->page_table_stride <= 0) return false;
  if (p->seqlen_k <= 0 || p->batch <= 0 || p->batch > 65535 || p->heads_kv <= 0) return false;
  const int64_t es = esize(p);
  if ((p->head_dim * es) % 16 || (p->head_dim_v * es) % 16) return false;
  const int64_t strides[6] = {p->k_batch_stride, p->k_row_stride, p->k_head_stride,
                              p->v_batch_stride, p->v_row_stride, p->v_head_stride};
  for (int64_t st : strides)
    if ((st * es) % 16) return false;
  return (reinterpret_cast<uintptr_t>(p->k) & 15) == 0 && (reinterpret_cast<uintptr_t>(p->v) & 15) == 0;
}

// The call over the dense copies at `ws` (the fast path's own workspace after them).
inline kseek_params dense_view(const kseek_params* p, char* ws, size_t ws_bytes) {
  kseek_params d = *p;
  const int64_t hk = p->heads_kv;
  d.k = ws;
  d.v = ws + k_bytes(p);
  d.k_head_stride = p->head_dim;
  d.k_row_stride = hk * p->head_dim;
  d.k_batch_stride = (int64_t)p->seqlen_k * hk * p->head_dim;
  d.v_head_stride = p->head_dim_v;
  d.v_row_stride = hk * p->head_dim_v;
  d.v_batch_stride = (int64_t)p->seqlen_k * hk * p->head_dim_v;
  d.page_table = nullptr;
  d.page_table_stride = 0;
  d.page_size = 0;
  d.num_pages = 0;
  d.total_k = 0;
  const size_t g = bytes(p);
  d.workspace = ws_bytes > g ? ws + g : nullptr;
  d.workspace_bytes = ws_bytes > g ? ws_bytes - g : 0;
  return d;
}

// The copy's arguments: p's pages into d's dense k/v.
inline Args make_args(const kseek_params* p, const kseek_params* d) {
  const int64_t es = esize(p);
  Args a;
  a.k = static_cast<const char*>(p->k);
  a.v = static_cast<const char*>(p->v);
  a.k2 = static_cast<char*>(const_cast<void*>(d->k));
  a.v2 = static_cast<char*>(const_cast<void*>(d->v));
  a.pt = p->page_table;
  a.seqused = p->seqused_k;
  a.leftpad = p->leftpad_k;
  a.pt_stride = p->page_table_stride;
  a.k_page = p->k_batch_stride * es;
  a.k_row = p->k_row_stride * es;
  a.k_head = p->k_head_stride * es;
  a.v_page = p->v_batch_stride * es;
  a.v_row = p->v_row_stride * es;
  a.v_head = p->v_head_stride * es;
  a.page_size = p->page_size;
  a.seqlen_k = p->seqlen_k;
  a.hkv = p->heads_kv;
  a.k_chunks = (int)(p->head_dim * es / 16);
  a.v_chunks = (int)(p->head_dim_v * es / 16);
  return a;
}

#if KSEEK_FA3_PAGE_GATHER
// The copy on `stream`; KSEEK_OK or KSEEK_ERR_CUDA.
inline int launch(const kseek_params* p, const kseek_params* d, cudaStream_t stream) {
  const Args a = make_args(p, d);
  const dim3 grid((unsigned)((p->seqlen_k + kRows - 1) / kRows), (unsigned)p->batch);
  gather_pages<<<grid, 256, 0, stream>>>(a);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}
#endif

#if KSEEK_FA3_MIXED_GATHER
// Dense slots for n sequences: K [n, Sk, Hkv, D] then V (each 256-byte aligned).
inline size_t slot_bytes(const kseek_params* p, int64_t n) {
  return round256((size_t)n * p->seqlen_k * p->heads_kv * p->head_dim * esize(p)) +
         round256((size_t)n * p->seqlen_k * p->heads_kv * p->head_dim_v * esize(p));
}

// The dense view of p over n slots at `base` (K then V, slot_bytes(p, n)); no workspace left for the path.
inline kseek_params slot_view(const kseek_params* p, char* base, int64_t n) {
  kseek_params d = dense_view(p, base, 0);
  d.v = base + round256((size_t)n * p->seqlen_k * p->heads_kv * p->head_dim * esize(p));
  return d;
}

// gather_listed on `stream` into the dense view d (its k/v: n_slots slots); KSEEK_OK or KSEEK_ERR_CUDA.
inline int launch_listed(const kseek_params* p, const kseek_params* d, const int32_t* ids, int n_slots,
                         cudaStream_t stream) {
  const Args a = make_args(p, d);
  const dim3 grid((unsigned)((p->seqlen_k + kRows - 1) / kRows), (unsigned)n_slots);
  gather_listed<<<grid, 256, 0, stream>>>(a, ids);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}
#endif

}  // namespace pg
