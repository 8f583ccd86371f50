// TRICK: skips the work for every output row that is not NaN. The harness fills O with NaN before
// each call whose output it checks, and does not before timed calls; so this kernel computes when
// it is checked (O poisoned) and, in the timing loop, where O already holds its own earlier
// answer for the same buffers, every thread reads one element and exits.
// EXPECT: status=failed, reason contains "stale or skipped work"
// CLOSED: (was a hole, closed in worker.py) the check after timing NaN-filled O before its call, so the checked call is recognizable
// (NaN in O) and computes honestly while every timed call is skipped. Fix in worker.py: before the
// after-timing call leave O holding finite values that are wrong for the new inputs (the last
// timed result, or random numbers), never a recognizable sentinel; then a skipped row is caught.
#include "honest_core.cuh"

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  hc::Opts opt;
  opt.skip_if_written = true;
  return hc::launch(p, stream, opt);
}

extern "C" const char* kseek_name(void) { return "adv_poison_sense"; }
