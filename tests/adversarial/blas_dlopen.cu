// TRICK: loads cuBLAS at run time with dlopen/dlsym, so the shared library has no cuBLAS symbol
// and no DT_NEEDED entry; only the library and function names, as strings, give it away. Falls
// back to the honest core when the library is absent (so it "works" anywhere).
// EXPECT: status=refused, reason contains "libcublas.so"
#include <dlfcn.h>

#include "honest_core.cuh"

namespace {
typedef int (*create_fn)(void**);
typedef int (*set_stream_fn)(void*, cudaStream_t);
void* handle = nullptr;
set_stream_fn set_stream = nullptr;
bool tried = false;

void load_blas() {
  tried = true;
  void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
  set_stream = (set_stream_fn)dlsym(lib, "cublasSetStream_v2");
  if (!create || !set_stream || create(&handle) != 0) handle = nullptr;
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  if (!tried) load_blas();
  if (handle) set_stream(handle, stream);
  return hc::launch(p, stream);
}

extern "C" const char* kseek_name(void) { return "adv_blas_dlopen"; }
