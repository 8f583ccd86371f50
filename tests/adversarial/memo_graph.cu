// TRICK: behaves only while eager. When its call is being captured into a CUDA graph (a benchmark's
// graph timing, a serving engine's decode graph), it captures no attention at all, only a copy of
// the last output it computed eagerly for these pointers; every replay then replays that copy, at
// the cost of a memcpy, whatever the inputs hold by then. Graphs keep fixed pointers, so a harness
// that replays a graph over unchanged inputs cannot tell.
// EXPECT: status=failed, reason contains "CUDA-graph replay"
// Caught by: graph timing with the defence (graph_timing.time_graph): the content of every set is
// refreshed between replays and sampled replayed outputs are verified: the copied answer is stale.
#include "honest_core.cuh"

namespace {
struct Saved {
  void* o;
  void* copy;
  size_t bytes;
};
constexpr int kSaved = 256;
Saved saved[kSaved];
int n_saved = 0;

Saved* find(void* o) {
  for (int i = 0; i < n_saved; ++i)
    if (saved[i].o == o) return &saved[i];
  return nullptr;
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  int rc = hc::check(p);
  if (rc != KSEEK_OK || p->seqlen_q == 0) return rc;
  const size_t ob = (size_t)p->batch * p->o_batch_stride * 2;                // dense 16-bit O
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream, &capturing);
  Saved* s = find(p->o);
  if (capturing == cudaStreamCaptureStatusActive && s && s->bytes == ob)
    return cudaMemcpyAsync(p->o, s->copy, ob, cudaMemcpyDeviceToDevice, stream) == cudaSuccess ? KSEEK_OK
                                                                                             : KSEEK_ERR_CUDA;
  rc = hc::launch(p, stream);
  if (rc != KSEEK_OK || capturing != cudaStreamCaptureStatusNone) return rc;
  if (!s && n_saved < kSaved) {
    s = &saved[n_saved++];
    s->o = p->o;
    s->bytes = 0;
    s->copy = nullptr;
  }
  if (s && s->bytes != ob) {
    cudaFree(s->copy);
    s->bytes = cudaMalloc(&s->copy, ob) == cudaSuccess ? ob : 0;
  }
  if (s && s->bytes) cudaMemcpyAsync(s->copy, p->o, ob, cudaMemcpyDeviceToDevice, stream);
  return KSEEK_OK;
}

extern "C" const char* kseek_name(void) { return "adv_memo_graph"; }
