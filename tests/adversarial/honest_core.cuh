// honest_core.cuh: a small, slow, CORRECT attention forward that the adversarial kernels wrap.
//
// Same approach as kernels/naive_fwd.cu (fp32 arithmetic, exact expf/logf, bottom-right aligned
// masks), cut down to what the adversarial grid needs: dense bf16/fp16 q/k/v, GQA/MQA, causal and
// local windows, softcap, custom scale, LSE. Everything else (varlen, paged KV, seqused_k,
// leftpad_k, sinks, fp8) returns KSEEK_ERR_UNSUPPORTED, never a wrong answer.
//
// One thread per (query row, query head, sequence), online softmax over the visible keys with the
// output accumulator in a per-thread array. Deliberately simple and slow (tens to hundreds of
// microseconds on the adversarial grid): every cheat's hidden work is then far larger than the
// launch overhead, so a cheat that hides it cannot be mistaken for an honest fast kernel.
//
// The cheats change behaviour only through hc::Opts (all defaults = honest), so each adversarial
// file shows its trick in a few lines.
#pragma once
#include "kseek.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

namespace hc {

constexpr int kMaxDim = 256;
constexpr int kThreads = 64;

struct Opts {
  int row_limit = -1;            // >= 0: query rows i >= row_limit are left unwritten
  int key_limit = -1;            // >= 0: keys j >= key_limit are ignored (dropped, not masked)
  bool fp8_operands = false;     // round q, k, v and the softmax weights P through fp8 e4m3
  bool skip_if_written = false;  // a row whose output is not NaN (not poisoned) is left as it is
  const int* skip_if_set = nullptr;  // device flag: when it holds a nonzero value, compute nothing
};

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ float round_fp8(float x) {
  return static_cast<float>(__nv_fp8_e4m3(x));
}

template <typename T, typename TO>
__global__ void __launch_bounds__(kThreads) attention_kernel(const __grid_constant__ kseek_params p, Opts opt) {
  if (opt.skip_if_set && *opt.skip_if_set) return;   // decided on the GPU by an earlier kernel
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t rows = (int64_t)p.batch * p.heads_q * p.seqlen_q;
  if (idx >= rows) return;
  const int i = (int)(idx % p.seqlen_q);
  const int h = (int)((idx / p.seqlen_q) % p.heads_q);
  const int b = (int)(idx / ((int64_t)p.seqlen_q * p.heads_q));
  const int hkv = h / (p.heads_q / p.heads_kv);
  const int sq = p.seqlen_q, sk = p.seqlen_k;
  if (opt.row_limit >= 0 && i >= opt.row_limit) return;

  TO* o = (TO*)p.o + (int64_t)b * p.o_batch_stride + (int64_t)i * p.o_row_stride + (int64_t)h * p.o_head_stride;
  float* lse = p.lse ? p.lse + (int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride + i : nullptr;
  if (opt.skip_if_written && !isnan(to_float(o[0]))) return;

  // visible keys: bottom-right aligned, causal = right window 0
  int wl = p.window_left, wr = p.window_right;
  if (p.causal) wr = 0;
  const int64_t diag = (int64_t)i + sk - sq;
  int64_t lo = 0, hi = (int64_t)sk - 1;
  if (wl >= 0) lo = max(lo, diag - wl);
  if (wr >= 0) hi = min(hi, diag + wr);
  if (opt.key_limit >= 0) hi = min(hi, (int64_t)opt.key_limit - 1);
  if (hi < lo) {
    for (int d = 0; d < p.head_dim_v; ++d) store(o + d, 0.f);
    if (lse) *lse = -INFINITY;
    return;
  }

  const T* q = (const T*)p.q + (int64_t)b * p.q_batch_stride + (int64_t)i * p.q_row_stride + (int64_t)h * p.q_head_stride;
  const T* K = (const T*)p.k + (int64_t)b * p.k_batch_stride + (int64_t)hkv * p.k_head_stride;
  const T* V = (const T*)p.v + (int64_t)b * p.v_batch_stride + (int64_t)hkv * p.v_head_stride;
  float qf[kMaxDim], acc[kMaxDim];
  for (int d = 0; d < p.head_dim; ++d) {
    const float x = to_float(q[d]);
    qf[d] = opt.fp8_operands ? round_fp8(x) : x;
  }
  for (int d = 0; d < p.head_dim_v; ++d) acc[d] = 0.f;

  float m = -INFINITY, l = 0.f;
  for (int64_t j = lo; j <= hi; ++j) {
    const T* kr = K + j * p.k_row_stride;
    const T* vr = V + j * p.v_row_stride;
    float s = 0.f;
    for (int d = 0; d < p.head_dim; ++d) {
      const float x = to_float(kr[d]);
      s = fmaf(qf[d], opt.fp8_operands ? round_fp8(x) : x, s);
    }
    s *= p.scale;
    if (p.softcap > 0.f) s = p.softcap * tanhf(s / p.softcap);
    const float mn = fmaxf(m, s);
    const float corr = expf(m - mn);  // 0 on the first key (m = -inf)
    const float e = expf(s - mn);
    l = l * corr + e;
    const float pw = opt.fp8_operands ? round_fp8(e) : e;
    for (int d = 0; d < p.head_dim_v; ++d) {
      const float x = to_float(vr[d]);
      acc[d] = fmaf(pw, opt.fp8_operands ? round_fp8(x) : x, acc[d] * corr);
    }
    m = mn;
  }
  const float inv = 1.f / l;
  for (int d = 0; d < p.head_dim_v; ++d) store(o + d, acc[d] * inv);
  if (lse) *lse = m + logf(l);
}

// KSEEK_OK when this core computes `p` exactly; otherwise the status to return.
inline int check(const kseek_params* p) {
  if (!p) return KSEEK_ERR_INVALID;
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (p->batch <= 0 || p->seqlen_q < 0 || p->seqlen_k < 0) return KSEEK_ERR_INVALID;
  if (p->heads_q <= 0 || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return KSEEK_ERR_INVALID;
  if (!p->q || !p->k || !p->v || !p->o) return KSEEK_ERR_INVALID;
  if (p->head_dim <= 0 || p->head_dim > kMaxDim || p->head_dim_v <= 0 || p->head_dim_v > kMaxDim)
    return KSEEK_ERR_UNSUPPORTED;
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return KSEEK_ERR_UNSUPPORTED;
  if (p->out_dtype != KSEEK_BF16 && p->out_dtype != KSEEK_FP16) return KSEEK_ERR_UNSUPPORTED;
  if (p->cu_seqlens_q || p->cu_seqlens_k || p->page_table || p->seqused_k || p->leftpad_k || p->sinks)
    return KSEEK_ERR_UNSUPPORTED;
  if (p->attention_chunk < 0) return KSEEK_ERR_INVALID;
  if (p->attention_chunk > 0) return KSEEK_ERR_UNSUPPORTED;  // ABI 3's chunked attention: not here
  return KSEEK_OK;
}

template <typename T, typename TO>
int launch_typed(const kseek_params* p, cudaStream_t stream, Opts opt) {
  const int64_t rows = (int64_t)p->batch * p->heads_q * p->seqlen_q;
  const unsigned blocks = (unsigned)((rows + kThreads - 1) / kThreads);
  attention_kernel<T, TO><<<blocks, kThreads, 0, stream>>>(*p, opt);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}

// Launch the core on `stream` (asynchronous). Returns a kseek_status.
inline int launch(const kseek_params* p, cudaStream_t stream, Opts opt = Opts()) {
  const int rc = check(p);
  if (rc != KSEEK_OK) return rc;
  if (p->seqlen_q == 0) return KSEEK_OK;
  const bool in16 = p->dtype == KSEEK_FP16, out16 = p->out_dtype == KSEEK_FP16;
  if (!in16 && !out16) return launch_typed<__nv_bfloat16, __nv_bfloat16>(p, stream, opt);
  if (!in16 && out16) return launch_typed<__nv_bfloat16, __half>(p, stream, opt);
  if (in16 && !out16) return launch_typed<__half, __nv_bfloat16>(p, stream, opt);
  return launch_typed<__half, __half>(p, stream, opt);
}

}  // namespace hc

// Every adversarial kernel (and the honest core) needs no workspace.
extern "C" size_t kseek_workspace_bytes(const kseek_params* p) {
  (void)p;
  return 0;
}
