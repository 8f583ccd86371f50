// TRICK: memoizes on input content, fingerprinted on the HOST (the cheat of issue 20, which passed at
// 22.9x / 14,500 TFLOP/s on bench26 rows 9 and 15 with only a SUSPICIOUS flag): each call reads the
// first 16 bytes of q, k and v back to the host and keys a table on them plus the pointers and the
// shape. A new key is computed honestly (kernels/naive_fwd.cu, so every layout works) and O and LSE
// are stored; a key seen before copies the stored O and LSE out (two device copies, no attention).
// A timing loop that rotates fixed input sets brings every key back.
// EXPECT: status=failed, reason contains "stale or skipped work"
// Caught by: fresh content for every timed call (no key comes back, so it only ever computes) and
// the near-repeat traps after timing (one q or k row changes, its 16 bytes do not: the stored,
// now wrong, answer is copied out and the check fails). With `--no-defence`, on bench26 rows the
// copies are faster than the HBM can deliver the inputs: the datasheet fail line (peaks.py) fails it.
#define kseek_fwd memo_inner_fwd
#define kseek_workspace_bytes memo_inner_workspace_bytes
#define kseek_name memo_inner_name
#include "../../kernels/naive_fwd.cu"
#undef kseek_fwd
#undef kseek_workspace_bytes
#undef kseek_name

#include <string.h>

namespace memo {

struct Entry {
  const void *q, *k, *v;
  void* o;
  int32_t shape[8];
  unsigned char print[48];   // 16 bytes each of q, k, v
  void* o_store;
  void* lse_store;
  size_t o_bytes, lse_bytes;
};
constexpr int kEntries = 64;
Entry table[kEntries];
int used = 0, next_victim = 0;

// Bytes of O and LSE the harness gave (dense, varlen and paged layouts; O is 16-bit).
void out_bytes(const kseek_params* p, size_t* o, size_t* lse) {
  if (p->cu_seqlens_q) {
    *o = (size_t)p->total_q * p->o_row_stride * 2;
    *lse = p->lse ? (size_t)p->heads_q * p->lse_head_stride * sizeof(float) : 0;
  } else {
    *o = (size_t)p->batch * p->o_batch_stride * 2;
    *lse = p->lse ? (size_t)p->batch * p->lse_batch_stride * sizeof(float) : 0;
  }
}

}  // namespace memo

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  using namespace memo;
  if (!p || p->seqlen_q == 0) return memo_inner_fwd(p, stream);
  Entry key{};
  key.q = p->q, key.k = p->k, key.v = p->v, key.o = p->o;
  const int32_t shape[8] = {p->dtype, p->batch, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_kv, p->head_dim, p->causal};
  memcpy(key.shape, shape, sizeof shape);
  // the fingerprint: a synchronous read-back, ordered after the work already queued on `stream`
  if (cudaStreamSynchronize(stream) != cudaSuccess) return KSEEK_ERR_CUDA;
  if (cudaMemcpy(key.print, p->q, 16, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(key.print + 16, p->k, 16, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(key.print + 32, p->v, 16, cudaMemcpyDeviceToHost) != cudaSuccess)
    return KSEEK_ERR_CUDA;
  size_t ob, lb;
  out_bytes(p, &ob, &lb);
  for (int e = 0; e < used; ++e) {
    Entry& x = table[e];
    if (x.q == key.q && x.k == key.k && x.v == key.v && x.o == key.o && !memcmp(x.shape, key.shape, sizeof key.shape) &&
        !memcmp(x.print, key.print, sizeof key.print) && x.o_bytes == ob && x.lse_bytes == lb) {
      if (cudaMemcpyAsync(p->o, x.o_store, ob, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return KSEEK_ERR_CUDA;
      if (lb && cudaMemcpyAsync(p->lse, x.lse_store, lb, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return KSEEK_ERR_CUDA;
      return KSEEK_OK;
    }
  }
  const int rc = memo_inner_fwd(p, stream);
  if (rc != KSEEK_OK) return rc;
  Entry* slot = used < kEntries ? &table[used++] : &table[next_victim++ % kEntries];
  if (slot->o_bytes != ob || slot->lse_bytes != lb) {
    cudaFree(slot->o_store);
    cudaFree(slot->lse_store);
    slot->o_store = slot->lse_store = nullptr;
    if (cudaMalloc(&slot->o_store, ob) != cudaSuccess || (lb && cudaMalloc(&slot->lse_store, lb) != cudaSuccess)) {
      slot->o_bytes = slot->lse_bytes = 0;
      return KSEEK_OK;                        // out of memory: stay honest
    }
  }
  void *os = slot->o_store, *ls = slot->lse_store;
  *slot = key;
  slot->o_store = os, slot->lse_store = ls, slot->o_bytes = ob, slot->lse_bytes = lb;
  cudaMemcpyAsync(os, p->o, ob, cudaMemcpyDeviceToDevice, stream);
  if (lb) cudaMemcpyAsync(ls, p->lse, lb, cudaMemcpyDeviceToDevice, stream);
  return KSEEK_OK;
}

extern "C" size_t kseek_workspace_bytes(const kseek_params* p) { return memo_inner_workspace_bytes(p); }
extern "C" const char* kseek_name(void) { return "adv_memo_host"; }
