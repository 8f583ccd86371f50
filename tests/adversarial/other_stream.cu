// TRICK: launches its work on another stream and returns before it finishes. The work waits for
// the caller's stream (so it reads finished inputs and computes the right answer), but it is
// never joined back: events recorded on the caller's stream around a batch of calls see almost
// nothing, so the measured time is the launch overhead, not the attention.
// EXPECT: status=failed, reason contains "work escapes the timed stream"
#include "honest_core.cuh"

namespace {
cudaStream_t side = nullptr;
cudaEvent_t ready = nullptr;
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK) return rc;
  if (!side) {
    // Non-blocking: no implicit synchronization with the legacy default stream either.
    if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) return KSEEK_ERR_CUDA;
    if (cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) != cudaSuccess) return KSEEK_ERR_CUDA;
  }
  if (cudaEventRecord(ready, stream) != cudaSuccess) return KSEEK_ERR_CUDA;
  if (cudaStreamWaitEvent(side, ready, 0) != cudaSuccess) return KSEEK_ERR_CUDA;
  return hc::launch(p, side);   // never joined back into `stream`
}

extern "C" const char* kseek_name(void) { return "adv_other_stream"; }
