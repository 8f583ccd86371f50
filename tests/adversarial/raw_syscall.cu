// TRICK: no forbidden import at all: its host code makes the system call itself, with an inline
// `syscall` instruction (write(2, ...) here; the same instruction reaches any descriptor, mmap or
// ptrace), so no import check can see it.
// EXPECT: status=refused, reason contains "`syscall` instruction"
// CLOSED: the host-code gate disassembles every executable section and refuses a syscall, sysenter or
// int 0x80 instruction; the same bytes hidden inside another instruction and reached by a jump kill the
// worker (its seccomp filter on the candidate's pages, kernelseek/syscall_filter.py).
#include "honest_core.cuh"

namespace {
long raw_write(long fd, const void* buf, long n) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(1L), "D"(fd), "S"(buf), "d"(n) : "rcx", "r11", "memory");
  return ret;
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  raw_write(2, "adv_raw_syscall\n", 16);
  return hc::launch(p, stream);
}

extern "C" const char* kseek_name(void) { return "adv_raw_syscall"; }
