// TRICK: notices the timing loop. A benchmark calls the kernel again and again on the same
// buffers, so this kernel remembers every (q, k, v, o) pointer set it has computed once and, when
// it sees one again, returns at once without launching anything (O still holds the earlier
// answer). Rotating input sets alone does not stop it: after one round every set is "known".
// EXPECT: status=failed, reason contains "stale or skipped work"
#include "honest_core.cuh"

namespace {
struct Seen {
  const void *q, *k, *v;
  void* o;
};
constexpr int kSeen = 256;
Seen seen[kSeen];
int n_seen = 0;
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK) return rc;
  for (int i = 0; i < n_seen; ++i)
    if (seen[i].q == p->q && seen[i].k == p->k && seen[i].v == p->v && seen[i].o == p->o) return KSEEK_OK;
  const int r = hc::launch(p, stream);
  if (r == KSEEK_OK && n_seen < kSeen) seen[n_seen++] = Seen{p->q, p->k, p->v, p->o};
  return r;
}

extern "C" const char* kseek_name(void) { return "adv_skip_repeat"; }
