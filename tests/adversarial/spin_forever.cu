// TRICK: hangs: one thread spins on the GPU's global timer for 25 s before the (correct) attention
// runs, far past the harness's per-scenario timeout (the GPU test uses 8 s). The spin is bounded
// so that the GPU recovers on its own even if nothing kills the process; the worker is killed
// and the run goes on.
// EXPECT: status=timeout, reason contains "no reply within", scenarios="common_128", timeout=8
#include "honest_core.cuh"

namespace {
constexpr unsigned long long kSpinNs = 25ull * 1000 * 1000 * 1000;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) __nanosleep(100000);
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK) return rc;
  spin_kernel<<<1, 1, 0, stream>>>(kSpinNs);
  if (cudaGetLastError() != cudaSuccess) return KSEEK_ERR_CUDA;
  return hc::launch(p, stream);
}

extern "C" const char* kseek_name(void) { return "adv_spin_forever"; }
