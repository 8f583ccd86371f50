// TRICK: correct on common shapes, wrong on awkward lengths: like a 64x64-tiled kernel without
// bounds handling, it drops the last partial tile, i.e. query rows past floor(Sq/64)*64 are never
// written and keys past floor(Sk/64)*64 are ignored. Scenarios with Sq and Sk multiples of 64
// (common_*) pass; the awkward_* ones must fail.
// EXPECT: status=failed, reason contains "max error", where="awkward"
#include "honest_core.cuh"

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  hc::Opts opt;
  if (p && p->seqlen_q % 64) opt.row_limit = p->seqlen_q / 64 * 64;
  if (p && p->seqlen_k % 64) opt.key_limit = p->seqlen_k / 64 * 64;
  return hc::launch(p, stream, opt);
}

extern "C" const char* kseek_name(void) { return "adv_awkward_tail"; }
