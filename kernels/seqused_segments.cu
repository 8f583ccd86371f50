// seqused_segments.cu: flash_attn_varlen_func's seqused_q as 2B varlen segments, in one launch
// (kernelseek/attention_plan.py _seqused_segments; the torch ops it replaces serve CPU tensors).
//
// Sequence b of a packed batch (cu_q, cu_k [B+1]) becomes segment 2b, its first u_b = clamp(seqused_q[b],
// 0, len_b) rows with its keys (seqused_k[b], or all of them when used_k is NULL), and segment 2b+1, the
// rest of its rows with no key, which kseek.h answers with O = 0 and lse = -inf. No row moves.
//   out[0 .. 2B]          cu_q2:  cu_q[b], cu_q[b] + u_b, ..., cu_q[B]
//   out[2B+1 .. 4B+1]     cu_k2:  cu_k[b], cu_k[b+1], ..., cu_k[B]
//   out[4B+2 .. 6B+1]     used2:  used_k[b] (or cu_k[b+1] - cu_k[b]), 0, ...
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void __launch_bounds__(256) seqused_segments_kernel(const int32_t* cu_q, const int32_t* seqused_q,
                                                               const int32_t* cu_k, const int32_t* used_k, int batch,
                                                               int32_t* out) {
  int32_t* cu_q2 = out;
  int32_t* cu_k2 = out + 2 * batch + 1;
  int32_t* used2 = out + 4 * batch + 2;
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= batch; b += gridDim.x * blockDim.x) {
    if (b == batch) {
      cu_q2[2 * batch] = cu_q[batch];
      cu_k2[2 * batch] = cu_k[batch];
      continue;
    }
    const int32_t q0 = cu_q[b], len = cu_q[b + 1] - q0;
    const int32_t u = min(max(seqused_q[b], 0), len);
    cu_q2[2 * b] = q0;
    cu_q2[2 * b + 1] = q0 + u;
    cu_k2[2 * b] = cu_k[b];
    cu_k2[2 * b + 1] = cu_k[b + 1];
    used2[2 * b] = used_k ? used_k[b] : cu_k[b + 1] - cu_k[b];
    used2[2 * b + 1] = 0;
  }
}

// 0 ok, 2 invalid arguments, 3 a CUDA launch error.
extern "C" int kseek_seqused_segments(const int32_t* cu_q, const int32_t* seqused_q, const int32_t* cu_k,
                                      const int32_t* used_k, int batch, int32_t* out, cudaStream_t stream) {
  if (batch < 0 || cu_q == nullptr || seqused_q == nullptr || cu_k == nullptr || out == nullptr) return 2;
  const int blocks = (batch + 1 + 255) / 256;
  seqused_segments_kernel<<<blocks < 1024 ? blocks : 1024, 256, 0, stream>>>(cu_q, seqused_q, cu_k, used_k, batch, out);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
