// TRICK: memoizes on input content with the fingerprint computed ON THE GPU, so nothing is read back
// and no call waits for the device (written after the defence, so the defence was not shaped by it).
// Per call, on the caller's stream: a one-block kernel hashes 256 evenly spaced 8-byte words of each
// of q, k and v (with the pointers and the shape, salted on the host) and looks the hash up in a
// table in device memory; it sets a device flag when the hash is known. The attention kernel (the
// honest core) reads the flag and returns at once when it is set; a copy kernel then copies the
// stored O and LSE of that entry out, or, on a miss, stores the freshly computed ones. Every
// decision is made on the device, so the host sees the same launches on a hit and on a miss.
// EXPECT: status=failed, reason contains "stale or skipped work"
// Caught by: fresh content for every timed call (nothing is ever found in the table, so it computes
// every timed call) and the near-repeat traps (a changed q row or key row falls between the
// sampled words, the old entry is hit, the stale O is copied out, and the check fails). A memoizer
// that hashes every byte of its inputs is never caught this way, and never faster than honest.
#include "honest_core.cuh"

namespace {
constexpr int kSlots = 16;
constexpr int kSamples = 256;

struct Table {
  unsigned long long hash[kSlots];   // 0 = empty
  int next;                          // round-robin victim
  int hit;                           // 1 when this call's inputs were seen before
  int slot;                          // the entry hit, or the entry to store into
};

__device__ unsigned long long mix(unsigned long long h, unsigned long long x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// One block of kSamples threads: hash the samples, then thread 0 looks the hash up.
__global__ void fingerprint(const unsigned long long* q, size_t nq, const unsigned long long* k, size_t nk,
                            const unsigned long long* v, size_t nv, unsigned long long salt, Table* t) {
  __shared__ unsigned long long part[kSamples];
  const int i = threadIdx.x;
  unsigned long long h = mix(salt, i);
  h = mix(h, nq ? q[(size_t)i * nq / kSamples] : 0);
  h = mix(h, nk ? k[(size_t)i * nk / kSamples] : 0);
  h = mix(h, nv ? v[(size_t)i * nv / kSamples] : 0);
  part[i] = h;
  __syncthreads();
  if (i) return;
  unsigned long long all = salt | 1;
  for (int j = 0; j < kSamples; ++j) all = mix(all, part[j]);
  all |= 1;                                          // never 0 (= empty)
  t->hit = 0;
  for (int s = 0; s < kSlots; ++s)
    if (t->hash[s] == all) { t->hit = 1; t->slot = s; return; }
  t->slot = t->next;
  t->next = (t->next + 1) % kSlots;
  t->hash[t->slot] = all;
}

// On a hit: stored -> out. On a miss: out -> stored (the entry just claimed).
__global__ void copy_out_or_store(unsigned char* o, const size_t ob, unsigned char* lse, const size_t lb,
                                  unsigned char* store, const Table* t) {
  unsigned char* so = store + (size_t)t->slot * (ob + lb);
  unsigned char* sl = so + ob;
  const bool hit = t->hit;
  for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < ob + lb; j += (size_t)gridDim.x * blockDim.x) {
    if (j < ob) {
      if (hit) o[j] = so[j]; else so[j] = o[j];
    } else if (lse) {
      if (hit) lse[j - ob] = sl[j - ob]; else sl[j - ob] = lse[j - ob];
    }
  }
}

Table* d_table = nullptr;
unsigned char* d_store = nullptr;
size_t store_entry = 0;
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  int rc = hc::check(p);
  if (rc != KSEEK_OK || p->seqlen_q == 0) return rc;
  const size_t ob = (size_t)p->batch * p->o_batch_stride * 2;                   // dense 16-bit O
  const size_t lb = p->lse ? (size_t)p->batch * p->lse_batch_stride * sizeof(float) : 0;
  if (store_entry != ob + lb) {                     // a new shape: a new table (host knows shapes only)
    cudaFree(d_store);
    cudaFree(d_table);
    if (cudaMalloc(&d_store, kSlots * (ob + lb)) != cudaSuccess || cudaMalloc(&d_table, sizeof(Table)) != cudaSuccess)
      return KSEEK_ERR_CUDA;
    cudaMemsetAsync(d_table, 0, sizeof(Table), stream);
    store_entry = ob + lb;
  }
  const size_t eb = p->dtype == KSEEK_FP8_E4M3 ? 1 : 2;
  const size_t nq = (size_t)p->batch * p->q_batch_stride * eb / 8;
  const size_t nk = (size_t)p->batch * p->k_batch_stride * eb / 8;
  const size_t nv = (size_t)p->batch * p->v_batch_stride * eb / 8;
  unsigned long long salt = 1469598103934665603ull;
  const unsigned long long words[] = {(unsigned long long)p->q, (unsigned long long)p->k, (unsigned long long)p->v,
                                      (unsigned long long)p->o, (unsigned long long)p->seqlen_q,
                                      (unsigned long long)p->seqlen_k, (unsigned long long)p->heads_q};
  for (unsigned long long w : words) salt = (salt ^ w) * 1099511628211ull;
  fingerprint<<<1, kSamples, 0, stream>>>((const unsigned long long*)p->q, nq, (const unsigned long long*)p->k, nk,
                                          (const unsigned long long*)p->v, nv, salt, d_table);
  hc::Opts opt;
  opt.skip_if_set = &d_table->hit;                  // a device address: the core reads the flag itself
  rc = hc::launch(p, stream, opt);
  if (rc != KSEEK_OK) return rc;
  copy_out_or_store<<<264, 256, 0, stream>>>((unsigned char*)p->o, ob, (unsigned char*)p->lse, lb, d_store, d_table);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}

extern "C" const char* kseek_name(void) { return "adv_memo_gpu"; }
