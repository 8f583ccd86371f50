// probe_common.cuh: what the three probes (probe_fa3.cu, probe_decode.cu, probe_fp8.cu) share: the
// test harness (CK, report, pass/fail counts, a GPU wait that gives up on a hang, the build variant
// in words) and the CPU reference of kseek.h's semantics for one query row, in double precision.
// Include it after the kernel (../../kernels/fa3_hopper/fa3_hopper.cu).
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

// ---- harness ------------------------------------------------------------------------------------
static int g_fail = 0, g_pass = 0;

// A failed CUDA call: the context is probably lost, so stop (results printed so far stand).
#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      printf("CUDA error %s at %s:%d: %s (%s)\n", cudaGetErrorName(e_), __FILE__, __LINE__,   \
             cudaGetErrorString(e_), #x);                                                      \
      printf("context is likely lost; stopping (earlier results above stand)\n");              \
      fflush(stdout);                                                                          \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

// One test's verdict: a [PASS] or [FAIL] line (flushed: a later hang keeps it).
static void report(const char* name, bool ok, const char* detail = "") {
  printf("[%s] %s %s\n", ok ? "PASS" : "FAIL", name, detail);
  if (ok) ++g_pass;
  else ++g_fail;
  fflush(stdout);
}

// The last line every probe prints; its exit status follows it.
static int finish() {
  if (g_fail == 0) printf("ALL PASS: 0 failure(s) (%d passed)\n", g_pass);
  else printf("FAILED: %d failure(s), %d passed\n", g_fail, g_pass);
  fflush(stdout);
  return g_fail ? 1 : 0;
}

// Wait for the GPU like cudaDeviceSynchronize, but give up after 20 s: a deadlocked kernel then
// costs the run 20 s and names its line, instead of eating the whole time limit silently.
static void sync_or_die(const char* file, int line) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(0);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) CK(e);
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) {
      printf("HANG: the GPU did not finish within 20 s (%s line %d); stopping\n", file, line);
      fflush(stdout);
      _exit(3);
    }
    usleep(200);
  }
}
#define SYNC_OR_DIE() sync_or_die(__FILE__, __LINE__)

// The build variant this probe was compiled as (kernels/fa3_hopper/variants.cuh), for its log.
static void print_variant() {
  static const char* const sched[] = {"auto", "static", "dynamic"};
  printf("build variant: KSEEK_FA3_VARIANT=%d KSEEK_FA3_SCHED=%s KSEEK_FA3_BN=%d KSEEK_FA3_ORDER=%s "
         "KSEEK_FA3_SECTION_MB=%g KSEEK_FA3_OSTORE=%s KSEEK_FA3_FORCE_FALLBACK=%d\n",
         fa3::build::kVariant, sched[fa3::build::kSched],
         fa3::build::kBN, fa3::build::kOrder == fa3::build::order_flat ? "flat" : "section",
         fa3::build::kSectionMB, fa3::build::kOStore == fa3::build::ostore_direct ? "direct" : "tma",
         (int)fa3::build::kForceFallback);
  fflush(stdout);
}

// ---- sequences of a prefill case ----------------------------------------------------------------
// The per-sequence lengths of a case of B sequences: dense = sq / sk each; varlen = sq / sk for even
// b, shorter for odd b; seqused_k ends a sequence's keys early and leftpad_k skips a prefix of them
// (deterministic offsets), so key j' (after leftpad) is stored at row krow(b, lpad[b] + j'). Rows are
// packed (varlen: cu_seqlens cuq / cuk) or [B, S] (dense).
struct Seqs {
  std::vector<int> qlen, klen, cuq, cuk, kend, lpad;
  int Sq, Sk;              // the call's seqlen_q / seqlen_k (varlen: the longest)
  int64_t rows_q, rows_k;  // stored rows of q and of k/v
  bool varlen;
  Seqs(int B, int sq, int sk, bool varlen_, bool seqused, bool leftpad)
      : qlen(B), klen(B), cuq(B + 1, 0), cuk(B + 1, 0), kend(B), lpad(B), varlen(varlen_) {
    for (int b = 0; b < B; ++b) {
      qlen[b] = (!varlen || b % 2 == 0) ? sq : std::max(1, sq / 3 + 5 * b);
      klen[b] = (!varlen || b % 2 == 0) ? sk : std::max(1, sk / 2 + 7 * b);
      cuq[b + 1] = cuq[b] + qlen[b];
      cuk[b + 1] = cuk[b] + klen[b];
      kend[b] = seqused ? klen[b] - (17 + 13 * b) % (klen[b] / 2 + 1) : klen[b];
      lpad[b] = leftpad ? (5 + 29 * b) % (kend[b] / 2 + 1) : 0;
    }
    Sq = varlen ? *std::max_element(qlen.begin(), qlen.end()) : sq;
    Sk = varlen ? *std::max_element(klen.begin(), klen.end()) : sk;
    rows_q = varlen ? cuq[B] : (int64_t)B * Sq;
    rows_k = varlen ? cuk[B] : (int64_t)B * Sk;
  }
  int64_t qrow(int b, int i) const { return varlen ? cuq[b] + i : (int64_t)b * Sq + i; }
  int64_t krow(int b, int j) const { return varlen ? cuk[b] + j : (int64_t)b * Sk + j; }
};

// ---- CPU reference (kseek.h semantics, double precision) ---------------------------------------
// The keys query row i of a sequence sees, as positions after leftpad (key j' is stored at
// leftpad + j'): bottom-right aligned, so row i sits at key i + sk - sq; causal = right window 0;
// a negative window is unbounded. Returns false when the row sees no key.
static bool ref_visible(long i, long sq, long sk, int wl, int wr, bool causal, long* lo, long* hi) {
  const long diag = i + sk - sq;
  if (causal) wr = 0;
  *lo = wl >= 0 ? std::max(0L, diag - wl) : 0;
  *hi = wr >= 0 ? std::min(sk - 1, diag + wr) : sk - 1;
  return *hi >= *lo;
}

// One query row: s_j = (q . k_j) * scale for keys j = lo..hi (softcap > 0: softcap * tanh(s /
// softcap)); a sink logit (sink != nullptr) joins the max and the denominator; o[0..dv) =
// sum_j p_j v_j with p = softmax. qd(d), kd(j, d), vd(j, d) read q, key j and value j (j a
// position after leftpad). Returns the LSE of the scores the softmax saw; a row with no key
// (hi < lo) gets o = 0 and -inf.
template <class Q, class K, class V>
static double ref_row(int d, int dv, long lo, long hi, double scale, double softcap, const float* sink, Q qd, K kd,
                      V vd, double* o) {
  for (int c = 0; c < dv; ++c) o[c] = 0.0;
  if (hi < lo) return -INFINITY;
  const long n = hi - lo + 1;
  double* s = (double*)malloc(sizeof(double) * n);
  double m = -INFINITY;
  for (long j = lo; j <= hi; ++j) {
    double x = 0.0;
    for (int c = 0; c < d; ++c) x += (double)qd(c) * (double)kd(j, c);
    x *= scale;
    if (softcap > 0.0) x = softcap * tanh(x / softcap);
    s[j - lo] = x;
    m = std::max(m, x);
  }
  if (sink) m = std::max(m, (double)*sink);
  double den = sink ? exp((double)*sink - m) : 0.0;
  for (long j = lo; j <= hi; ++j) {
    const double e = exp(s[j - lo] - m);
    den += e;
    for (int c = 0; c < dv; ++c) o[c] += e * (double)vd(j, c);
  }
  for (int c = 0; c < dv; ++c) o[c] /= den;
  free(s);
  return m + log(den);
}
