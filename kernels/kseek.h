// kseek.h: the one C ABI every KernelSeek attention-forward kernel implements.
//
// A kernel file defines
//     extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream);
// and may define
//     extern "C" size_t kseek_workspace_bytes(const kseek_params* p);   // 0 when absent
//     extern "C" const char* kseek_name(void);
//     extern "C" int kseek_last_path(void);   // which path the last kseek_fwd took (kernel-defined
//                                             // codes; fa3_hopper: 0 fallback, 1 decode, 2 prefill,
//                                             // 3 fp8 prefill, 4 decode + prefill in one call,
//                                             // 5 pages copied to a dense cache, then a fast path);
//                                             // kernelseek.attention records it
// kseek_fwd launches asynchronously on `stream` and returns KSEEK_OK, or an error code for a
// combination it does not support (never a crash, never a wrong answer). The harness owns all
// memory: inputs, outputs, LSE and a workspace of kseek_workspace_bytes() bytes.
//
// Layouts (strides are in elements, not bytes):
//   dense   q [B, Sq, Hq, D]   k [B, Sk, Hkv, D]   v [B, Sk, Hkv, Dv]   o [B, Sq, Hq, Dv]
//           lse [B, Hq, Sq] float32
//   varlen  (cu_seqlens_q != NULL) q [total_q, Hq, D], k/v [total_k, Hkv, D]; sequence b owns
//           rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 (same for k); batch strides unused;
//           lse [Hq, total_q] (lse_batch_stride unused, lse_head_stride = total_q);
//           total_q / total_k give the packed tensors' row counts (their first dimension)
//   paged   (page_table != NULL) k/v [num_pages, page_size, Hkv, D]; logical key j of sequence b
//           lives in page page_table[b * page_table_stride + j / page_size], slot j % page_size;
//           k_batch_stride is the page stride.
//
// Semantics (the reference in kernelseek/reference.py implements exactly these):
//   * Keys of sequence b are the logical positions leftpad_k[b] <= j < end_b, where end_b is
//     seqused_k[b] when given, else the sequence's key length. Its effective key length is
//     Sk_b = end_b - leftpad_k[b]; key position is j' = j - leftpad_k[b].
//   * Masks are aligned bottom-right (FlashAttention's convention): query row i of a sequence
//     with Sq_b rows sits at key position i + Sk_b - Sq_b. Key j' is visible iff
//       j' >= i + Sk_b - Sq_b - window_left   (when window_left  >= 0)
//       j' <= i + Sk_b - Sq_b + window_right  (when window_right >= 0)
//     causal=1 is window_right = 0 (window_left as given, -1 = unbounded).
//   * attention_chunk C > 0 (chunked local attention, as in Llama 4; FlashAttention-3's
//     attention_chunk): with p = i + Sk_b - Sq_b, key j' is visible only if also
//       floor(p / C) == floor(j' / C)   (floor division: a query at p < 0 sees no key)
//     combined with the window and causal rules above. 0 = off.
//   * score = scale * q.k; with softcap > 0: score = softcap * tanh(score / softcap).
//   * sinks (one logit per query head, not scaled) join the softmax denominator only:
//       o = sum_j exp(s_j - m) v_j / (exp(sink - m) + sum_j exp(s_j - m)),
//     lse = log(exp(sink) + sum_j exp(s_j)) (natural log, of the scores the softmax saw).
//   * A row with no visible key outputs zeros and lse = -inf, sinks or not.
//   * fp8 e4m3: the real value of q is q_fp8 * q_descale[b * descale_batch_stride + hkv]
//     (per batch and KV head; for q the KV head of the query head), same for k and v; o is bf16.
//   * num_splits: 0 lets the kernel choose; a kernel may ignore it.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#define KSEEK_ABI_VERSION 3  // 2: total_q, total_k appended; 3: attention_chunk appended

enum kseek_dtype { KSEEK_BF16 = 0, KSEEK_FP16 = 1, KSEEK_FP8_E4M3 = 2 };

enum kseek_status {
  KSEEK_OK = 0,
  KSEEK_ERR_UNSUPPORTED = 1,   // a feature combination this kernel does not implement
  KSEEK_ERR_INVALID = 2,       // malformed parameters (null pointer, bad shape)
  KSEEK_ERR_CUDA = 3,          // a CUDA call failed (launch error and the like)
  KSEEK_ERR_WORKSPACE = 4,     // workspace too small
  KSEEK_ERR_ABI = 5            // abi_version mismatch
};

typedef struct kseek_params {
  int32_t abi_version;         // KSEEK_ABI_VERSION
  int32_t dtype;               // kseek_dtype of q, k, v
  int32_t out_dtype;           // kseek_dtype of o (bf16 or fp16; bf16 for fp8 inputs)
  int32_t batch;               // B
  int32_t seqlen_q;            // Sq (varlen: max over sequences)
  int32_t seqlen_k;            // Sk (varlen: max; paged: max pages per seq * page_size)
  int32_t heads_q;             // Hq
  int32_t heads_kv;            // Hkv, Hq % Hkv == 0
  int32_t head_dim;            // D of q and k
  int32_t head_dim_v;          // Dv of v and o

  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;                  // may be NULL: then the kernel writes no LSE

  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;   // lse row stride is 1

  const int32_t* cu_seqlens_q; // [B+1] or NULL (varlen)
  const int32_t* cu_seqlens_k; // [B+1] or NULL (varlen)
  const int32_t* seqused_k;    // [B] key end per sequence (cache_seqlens) or NULL
  const int32_t* leftpad_k;    // [B] first valid key per sequence or NULL
  const int32_t* page_table;   // [B, page_table_stride] or NULL
  int32_t page_table_stride;
  int32_t page_size;
  int32_t num_pages;

  int32_t causal;              // 0 or 1
  int32_t window_left;         // -1 = unbounded
  int32_t window_right;        // -1 = unbounded
  float softcap;               // 0 = off
  float scale;                 // softmax scale, usually 1/sqrt(D)
  const float* sinks;          // [Hq] or NULL

  const float* q_descale;      // fp8 only: [B, Hkv] each, or NULL (= 1)
  const float* k_descale;
  const float* v_descale;
  int64_t descale_batch_stride;

  int32_t num_splits;          // 0 = kernel chooses
  int32_t _pad;
  void* workspace;
  size_t workspace_bytes;

  // varlen: rows of the packed q/o and k/v allocations (q.shape[0], k.shape[0]); 0 = not given
  // (dense and paged calls). A kernel can bound its TMA tensor maps with them instead of reading
  // cu_seqlens[B] back to the host, which would block the call until the stream drains.
  int64_t total_q;
  int64_t total_k;

  // ABI 3: chunked local attention (see Semantics); 0 = off. A kernel that does not implement it
  // returns KSEEK_ERR_UNSUPPORTED when it is > 0, and KSEEK_ERR_INVALID when it is < 0.
  int32_t attention_chunk;
  int32_t _pad2;
} kseek_params;

#ifdef __cplusplus
extern "C" {
#endif
int kseek_fwd(const kseek_params* p, cudaStream_t stream);
size_t kseek_workspace_bytes(const kseek_params* p);
const char* kseek_name(void);
#ifdef __cplusplus
}
#endif
