// TRICK: returns a result computed in an earlier call. The first call with given pointers and
// shape computes into a private buffer; every later call with the same pointers and shape only
// copies that buffer into O and LSE (a device-to-device copy instead of attention). Whatever the
// inputs hold now, the answer is the one from the first call.
// EXPECT: status=failed, reason contains "stale or skipped work"
#include "honest_core.cuh"

namespace {
struct Entry {
  const void *q, *k, *v;
  void* o;
  int32_t shape[12];
  void* o_cache;
  float* lse_cache;
};
constexpr int kEntries = 1024;   // every pointer set a harness uses (64 per scenario here)
Entry table[kEntries];
int used = 0;

void shape_of(const kseek_params* p, int32_t* s) {
  const int32_t v[12] = {p->dtype, p->out_dtype, p->batch, p->seqlen_q, p->seqlen_k, p->heads_q,
                         p->heads_kv, p->head_dim, p->head_dim_v, p->causal, p->window_left, p->window_right};
  for (int i = 0; i < 12; ++i) s[i] = v[i];
}

Entry* find(const kseek_params* p) {
  int32_t s[12];
  shape_of(p, s);
  for (int e = 0; e < used; ++e) {
    Entry& x = table[e];
    bool same = x.q == p->q && x.k == p->k && x.v == p->v && x.o == p->o;
    for (int i = 0; same && i < 12; ++i) same = x.shape[i] == s[i];
    if (same) return &x;
  }
  return nullptr;
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK || p->seqlen_q == 0) return rc;
  const size_t o_bytes = (size_t)p->batch * p->o_batch_stride * 2;            // dense, 16-bit O
  const size_t lse_bytes = p->lse ? (size_t)p->batch * p->lse_batch_stride * sizeof(float) : 0;
  Entry* e = find(p);
  if (!e) {
    if (used == kEntries) return hc::launch(p, stream);                       // table full: honest
    Entry x{p->q, p->k, p->v, p->o, {}, nullptr, nullptr};
    shape_of(p, x.shape);
    if (cudaMalloc(&x.o_cache, o_bytes) != cudaSuccess) return KSEEK_ERR_CUDA;
    if (lse_bytes && cudaMalloc((void**)&x.lse_cache, lse_bytes) != cudaSuccess) return KSEEK_ERR_CUDA;
    kseek_params c = *p;
    c.o = x.o_cache;
    c.lse = x.lse_cache;
    const int r = hc::launch(&c, stream);
    if (r != KSEEK_OK) return r;
    table[used] = x;
    e = &table[used++];
  }
  if (cudaMemcpyAsync(p->o, e->o_cache, o_bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return KSEEK_ERR_CUDA;
  if (lse_bytes && e->lse_cache &&
      cudaMemcpyAsync(p->lse, e->lse_cache, lse_bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return KSEEK_ERR_CUDA;
  return KSEEK_OK;
}

extern "C" const char* kseek_name(void) { return "adv_cache_result"; }
