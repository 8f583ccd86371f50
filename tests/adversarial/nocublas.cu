// TRICK: none: an honest kernel (kernels/naive_fwd.cu, unchanged) compiled under a file name that
// names a library. nvcc names a file's anonymous namespace after the file
// (`_GLOBAL__N__<hash>_<len>_nocublas_cu_<hash>`), so the library name reaches the symbols and strings
// of every kernel defined in one: here the small kernel below (naive_fwd.cu kept its kernel in an
// anonymous namespace too, until it moved into kernels/naive_core.cuh's `naive` namespace). A name is
// not a use: the constraint check must not refuse it.
// EXPECT: status=passed
#include "../../kernels/naive_fwd.cu"

namespace {
// Never launched: it only carries the file's name into the binary, as any kernel of this file would.
__global__ void file_named_kernel(int* flag) {
  if (flag) *flag = 1;
}
}  // namespace

// Keeps the kernel referenced (its host stub and registration stay), without launching it.
extern "C" const void* kseek_extra_kernel_address(void) { return (const void*)file_named_kernel; }
