// TRICK: runs its own code when the library is loaded, before the harness calls anything: a
// constructor (here it only counts; a real one would set up a background thread or patch memory
// while the harness still trusts the process), and a global object whose initializer runs too.
// EXPECT: status=refused, reason contains ".init_array"
// CLOSED: the host-code gate allows only nvcc's load-time code in .init_array (frame_dummy and
// __sti____cudaRegisterAll) and refuses .preinit_array, .ctors and .dtors.
#include "honest_core.cuh"

namespace {
int loads = 0;
struct Early {
  Early() { ++loads; }
};
Early early;
}  // namespace

__attribute__((constructor)) static void adv_at_load(void) { ++loads; }

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) { return hc::launch(p, stream); }

extern "C" const char* kseek_name(void) { return "adv_load_ctor"; }
