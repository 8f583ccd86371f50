// naive_fwd.cu: a simple, slow, CORRECT attention forward implementing kernels/kseek.h.
//
// It is the reference-quality starting point: every feature of the ABI (bf16/fp16/fp8 e4m3 with
// descales, varlen, paged KV, seqused_k, leftpad_k, GQA/MQA, bottom-right causal and local
// windows, softcap, custom scale, sinks, head dims up to 256 (16-bit: q/k up to 576 and v up to 512, a second
// instantiation, for FlashAttention-3's qv), LSE) and no tensor cores.
//
// One block of 128 threads per (query row, query head, sequence): grid = (seqlen_q, Hq, B).
//   pass 1: thread t scores keys lo+t, lo+t+128, ... keeping an online (max, sum of exp) in fp32;
//           the block combines them into the row's max m and denominator l.
//   pass 2: keys in chunks of 128: thread t writes p = exp(s - m) of one key to shared memory,
//           then thread t accumulates output dims t and t+128 over the chunk (coalesced V reads).
// Scores are computed twice (once per pass); nothing is stored between passes, so the kernel
// needs no workspace. All arithmetic is fp32 with accurate expf/logf/tanhf.
//
// The kernel itself lives in naive_core.cuh (namespace naive), which kernels/fa3_hopper/ includes
// too, as its fallback; this file is its ABI entry.
#include "kseek.h"
#include "naive_core.cuh"

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  if (const int st = naive::check_params(p); st != KSEEK_OK) return st;
  if (p->seqlen_q == 0) return KSEEK_OK;  // nothing to compute
  switch (p->dtype) {
    case KSEEK_BF16: return naive::launch_out<__nv_bfloat16>(p, stream);
    case KSEEK_FP16: return naive::launch_out<__half>(p, stream);
    default: return naive::launch_out<__nv_fp8_e4m3>(p, stream);
  }
}

extern "C" size_t kseek_workspace_bytes(const kseek_params* p) {
  (void)p;
  return 0;
}

extern "C" const char* kseek_name(void) { return "naive_fwd"; }
