// TRICK: reads out of bounds: one thread dereferences a pointer 1 TiB past the end of q (an
// address nothing is mapped at), as a kernel with a broken index computation would. The launch
// succeeds; the fault surfaces at the next synchronization as a sticky CUDA error that poisons
// the whole CUDA context: the worker must report it, exit, and the next scenario (two are run)
// must get a fresh worker.
// EXPECT: status=error, reason contains "illegal memory access|illegal address|unspecified launch failure", scenarios="common_128,awkward_113x203"
#include "honest_core.cuh"

namespace {
__global__ void oob_kernel(const void* base, float* sink) {
  const volatile float* bad = (const volatile float*)((const char*)base + (1ull << 40));
  const float x = *bad;
  if (x == 1234.5f) *sink = x;   // never true in practice; keeps the load
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK) return rc;
  oob_kernel<<<1, 1, 0, stream>>>(p->q, p->lse);
  if (cudaGetLastError() != cudaSuccess) return KSEEK_ERR_CUDA;
  return hc::launch(p, stream);
}

extern "C" const char* kseek_name(void) { return "adv_oob_read"; }
