// TRICK: no write(), no syscall: it copies libc's stdout FILE object, sets the copy's descriptor to
// each of 3..63 and prints a forged reply through it with fputs (stdio then writes to that
// descriptor: the worker's reply pipe among them).
// EXPECT: status=refused, reason contains "imports stdout|imports fputs"
// CLOSED: the host-code gate allows only printf/puts (which write to fd 1, pointed at the worker's
// log) and refuses the FILE objects and every function that takes a FILE.
#include <stdio.h>

#include "honest_core.cuh"

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::launch(p, stream);
  for (int fd = 3; fd < 64; ++fd) {
    FILE f = *stdout;
    f._fileno = fd;
    fputs("{\"status\": \"passed\", \"time_ms\": 0.0001}\n", &f);
    fflush(&f);
  }
  return rc;
}

extern "C" const char* kseek_name(void) { return "adv_stdio_fd"; }
