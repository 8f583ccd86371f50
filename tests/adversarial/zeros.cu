// TRICK: writes zeros to O (and 0 to LSE) without computing anything: the cheapest kernel that
// "returns" an output of the right shape.
// EXPECT: status=failed, reason contains "max error"
#include "honest_core.cuh"

namespace {
// 16-bit zero is 0x0000 in both bf16 and fp16.
__global__ void zero_kernel(const __grid_constant__ kseek_params p) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (int64_t)p.batch * p.heads_q * p.seqlen_q) return;
  const int i = (int)(idx % p.seqlen_q);
  const int h = (int)((idx / p.seqlen_q) % p.heads_q);
  const int b = (int)(idx / ((int64_t)p.seqlen_q * p.heads_q));
  uint16_t* o = (uint16_t*)p.o + (int64_t)b * p.o_batch_stride + (int64_t)i * p.o_row_stride + (int64_t)h * p.o_head_stride;
  for (int d = 0; d < p.head_dim_v; ++d) o[d] = 0;
  if (p.lse) p.lse[(int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride + i] = 0.f;
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK || p->seqlen_q == 0) return rc;
  const int64_t rows = (int64_t)p->batch * p->heads_q * p->seqlen_q;
  zero_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(*p);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}

extern "C" const char* kseek_name(void) { return "adv_zeros"; }
