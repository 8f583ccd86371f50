// TRICK: none: an honest kernel (kernels/naive_fwd.cu, unchanged) compiled under a file name that
// names a library. nvcc names the file's anonymous namespace after the file
// (`_GLOBAL__N__<hash>_<len>_nocublas_cu_<hash>`), so the library name reaches every kernel symbol and
// the binary's strings; a name is not a use, and the constraint check must not refuse it.
// EXPECT: status=passed
#include "../../kernels/naive_fwd.cu"
