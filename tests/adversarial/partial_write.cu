// TRICK: computes and writes only the first half of the query rows (every head, every sequence)
// and leaves the rest of O and LSE as it found them: half the work, hoping nobody looks there.
// EXPECT: status=failed, reason contains "NaN"
#include "honest_core.cuh"

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  hc::Opts opt;
  if (p) opt.row_limit = (p->seqlen_q + 1) / 2;
  return hc::launch(p, stream, opt);
}

extern "C" const char* kseek_name(void) { return "adv_partial_write"; }
