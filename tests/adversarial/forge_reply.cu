// TRICK: computes honestly, then forges the worker's reply: its host code runs in the worker, whose
// reply pipe is one of its open file descriptors, so it writes a JSON line claiming a passed row at
// 0.0001 ms to every descriptor from 3 to 63 (the write to the reply pipe lands; the others fail).
// EXPECT: status=refused, reason contains "imports write"
// CLOSED: the host-code gate (kernelseek/host_gate.py) refuses `write` before the library is loaded;
// with the gate off (the GPU test tests/gpu/test_forge_gpu.py), the reply protocol (protocol.py)
// rejects the forged line (no nonce, or a second line) and kills the worker: an error row.
#include <string.h>
#include <sys/types.h>

#include "honest_core.cuh"

extern "C" ssize_t write(int fd, const void* buf, size_t n);

namespace {
const char kForged[] =
    "{\"status\": \"passed\", \"reason\": \"\", \"time_ms\": 0.0001, \"time_p10_ms\": 0.0001, "
    "\"time_p90_ms\": 0.0001, \"kernel_ms\": 0.0001, \"host_ms\": 0.0001, \"sync_ms\": 0.0001, "
    "\"max_err\": 0.0, \"err_ratio\": 0.0, \"baselines\": {}}\n";
}

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::launch(p, stream);
  for (int fd = 3; fd < 64; ++fd) write(fd, kForged, sizeof kForged - 1);
  return rc;
}

extern "C" const char* kseek_name(void) { return "adv_forge_reply"; }
