// TRICK: none. The control: the shared honest core (honest_core.cuh) called plainly. It proves
// that every failure of the other kernels comes from their trick, not from the core they wrap.
// EXPECT: status=passed
#include "honest_core.cuh"

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) { return hc::launch(p, stream); }

extern "C" const char* kseek_name(void) { return "adv_control_honest"; }
