// TRICK: calls cuBLAS directly (a vendor library doing the matrix products instead of the kernel).
// No cuBLAS headers exist here, so the entry points are declared by hand; the shared library is
// linked without -lcublas and leaves them undefined, to be resolved by whatever loads it. A real
// cheat would run QK^T and PV as batched GEMMs; this one creates a handle, binds the stream and
// lets the honest core compute, which is enough to be refused.
// EXPECT: status=refused, reason contains "cublasCreate_v2"
#include "honest_core.cuh"

extern "C" int cublasCreate_v2(void** handle);
extern "C" int cublasSetStream_v2(void* handle, cudaStream_t stream);

namespace {
void* handle = nullptr;
}

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  if (!handle && cublasCreate_v2(&handle) != 0) return KSEEK_ERR_CUDA;
  if (cublasSetStream_v2(handle, stream) != 0) return KSEEK_ERR_CUDA;
  return hc::launch(p, stream);
}

extern "C" const char* kseek_name(void) { return "adv_blas_direct"; }
