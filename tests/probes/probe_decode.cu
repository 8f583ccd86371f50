// probe_decode.cu: tests dec::run (decode.cuh of kernels/fa3_hopper/, #included with the rest of
// the kernel) against the CPU reference of kseek.h's semantics (probe_common.cuh), then times the
// five bench decode shapes.
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O2 -o /tmp/probe_decode tests/probes/probe_decode.cu
//   /tmp/probe_decode            (all)     /tmp/probe_decode check   (tests only)   /tmp/probe_decode time
//
// Every test poisons O, LSE and the workspace with NaN, writes NaN into every unused page and every
// slot outside [leftpad, seqused) (so a read of one shows up as NaN), and in strided layouts checks
// that the gaps between O / LSE elements were not written. One [PASS]/[FAIL] line per test.
// Design, split heuristic and workspace layout: README_decode.md.
#include "../../kernels/fa3_hopper/fa3_hopper.cu"
#include "probe_common.cuh"

#include <cuda_fp16.h>
#include <string>
#include <vector>

// ---- host 16-bit conversions ------------------------------------------------------------------
static uint16_t f2bf(float f) {  // round to nearest even
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f2h(float f) {
  __half h = __float2half_rn(f);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
static float h2f(uint16_t u) {
  __half h;
  memcpy(&h, &u, 2);
  return __half2float(h);
}
static const uint16_t kNaN16[2] = {0x7fc0, 0x7e00};  // bf16, fp16

// ---- random numbers -----------------------------------------------------------------------------
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 12345) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  double uni() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {  // sum of 4 uniforms, unit variance
    double x = uni() + uni() + uni() + uni() - 2.0;
    return x * sqrt(3.0);
  }
  int below(int n) { return (int)(next() % (uint64_t)n); }
};

// ---- one test case --------------------------------------------------------------------------------
struct Case {
  std::string name;
  int dtype = KSEEK_BF16;
  int B = 2, Sq = 1, Hq = 8, Hkv = 2, D = 128;
  int Sk = 128;          // key capacity per sequence (paged: pages_per_seq * ps)
  int ps = 16;           // 0 = dense KV
  std::vector<int> seqused, leftpad;  // empty = not given
  int causal = 0, wl = -1, wr = -1;
  float softcap = 0.f;
  int sinks = 0;         // 0 none, 1 N(0,1), 2 large (+6), 3 very large (+60)
  bool lse = true;
  int splits = 0;
  float qmul = 1.f;      // multiplies q (peakier softmax)
  bool strided = false;  // non-contiguous q/k/v/o/lse strides
  int ws_mode = 0;       // 0 as asked, 1 no workspace
  bool abi = false;      // call kseek_fwd instead of dec::run
};

static size_t span(int64_t n0, int64_t s0, int64_t n1, int64_t s1, int64_t n2, int64_t s2, int64_t last) {
  return (size_t)((n0 - 1) * s0 + (n1 - 1) * s1 + (n2 - 1) * s2 + last);
}

static void run_case(const Case& c, uint64_t seed) {
  Rng rng(seed);
  const bool f16 = c.dtype == KSEEK_FP16;
  auto to16 = [&](float x) { return f16 ? f2h(x) : f2bf(x); };
  auto from16 = [&](uint16_t u) { return f16 ? h2f(u) : bf2f(u); };
  const int B = c.B, Sq = c.Sq, Hq = c.Hq, Hkv = c.Hkv, D = c.D, G = Hq / Hkv;
  const bool paged = c.ps > 0;
  const int ps = paged ? c.ps : 1;
  const int pps = paged ? (c.Sk + ps - 1) / ps : 0;
  const int Sk = paged ? pps * ps : c.Sk;
  const int num_pages = paged ? B * pps + 3 : 0;  // 3 pages nobody uses

  // strides (elements)
  int64_t q_hs = D, q_rs = (int64_t)Hq * D, q_bs = (int64_t)Sq * Hq * D;
  int64_t k_hs = D, k_rs = (int64_t)Hkv * D, k_bs = paged ? (int64_t)ps * Hkv * D : (int64_t)Sk * Hkv * D;
  int64_t v_hs = k_hs, v_rs = k_rs, v_bs = k_bs;
  int64_t o_hs = D, o_rs = (int64_t)Hq * D, o_bs = (int64_t)Sq * Hq * D;
  int64_t l_hs = Sq, l_bs = (int64_t)Hq * Sq;
  if (c.strided) {
    q_hs = D + 8; q_rs = Hq * q_hs + 16; q_bs = Sq * q_rs + 8;
    k_bs = paged ? (int64_t)ps * Hkv * D + 64 : (int64_t)Sk * Hkv * D + 64;
    v_hs = (int64_t)(paged ? ps : Sk) * D; v_rs = D; v_bs = Hkv * v_hs + 128;  // head-major V
    o_hs = D + 2; o_rs = Hq * o_hs + 4; o_bs = Sq * o_rs + 6;
    l_hs = Sq + 1; l_bs = Hq * l_hs + 3;
  }
  const int nkv = paged ? num_pages : B;
  const int rows_kv = paged ? ps : Sk;
  const size_t nq = span(B, q_bs, Sq, q_rs, Hq, q_hs, D);
  const size_t nk = span(nkv, k_bs, rows_kv, k_rs, Hkv, k_hs, D);
  const size_t nv = span(nkv, v_bs, rows_kv, v_rs, Hkv, v_hs, D);
  const size_t no = span(B, o_bs, Sq, o_rs, Hq, o_hs, D);
  const size_t nl = span(B, l_bs, Hq, l_hs, Sq, 1, 1);

  std::vector<uint16_t> hq(nq, kNaN16[f16]), hk(nk, kNaN16[f16]), hv(nv, kNaN16[f16]);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < Sq; ++i)
      for (int h = 0; h < Hq; ++h)
        for (int d = 0; d < D; ++d)
          hq[b * q_bs + i * q_rs + h * q_hs + d] = to16((float)(rng.normal() * c.qmul));

  // page table: a shuffled permutation of the pool
  std::vector<int> perm(num_pages), table((size_t)B * (pps > 0 ? pps : 1), 0);
  for (int i = 0; i < num_pages; ++i) perm[i] = i;
  for (int i = num_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  for (int b = 0; b < B; ++b)
    for (int pg = 0; pg < pps; ++pg) table[(size_t)b * pps + pg] = perm[b * pps + pg];

  std::vector<int> end(B), lp(B);
  for (int b = 0; b < B; ++b) {
    end[b] = c.seqused.empty() ? Sk : c.seqused[b];
    lp[b] = c.leftpad.empty() ? 0 : c.leftpad[b];
  }
  auto koff = [&](int b, int j, int h) -> int64_t {  // logical key j (before leftpad removal)
    if (paged) return (int64_t)table[(size_t)b * pps + j / ps] * k_bs + (int64_t)(j % ps) * k_rs + (int64_t)h * k_hs;
    return (int64_t)b * k_bs + (int64_t)j * k_rs + (int64_t)h * k_hs;
  };
  auto voff = [&](int b, int j, int h) -> int64_t {
    if (paged) return (int64_t)table[(size_t)b * pps + j / ps] * v_bs + (int64_t)(j % ps) * v_rs + (int64_t)h * v_hs;
    return (int64_t)b * v_bs + (int64_t)j * v_rs + (int64_t)h * v_hs;
  };
  for (int b = 0; b < B; ++b)
    for (int j = lp[b]; j < end[b]; ++j)
      for (int h = 0; h < Hkv; ++h)
        for (int d = 0; d < D; ++d) {
          hk[koff(b, j, h) + d] = to16((float)rng.normal());
          hv[voff(b, j, h) + d] = to16((float)rng.normal());
        }
  std::vector<float> sinks(Hq);
  for (int h = 0; h < Hq; ++h)
    sinks[h] = (float)(rng.normal() + (c.sinks == 2 ? 6.0 : c.sinks == 3 ? 60.0 : 0.0));

  // device buffers
  uint16_t *dq, *dk, *dv, *d_o;
  float *dl, *dsink = nullptr;
  int *dtab = nullptr, *dused = nullptr, *dlp = nullptr;
  CK(cudaMalloc(&dq, nq * 2));
  CK(cudaMalloc(&dk, nk * 2));
  CK(cudaMalloc(&dv, nv * 2));
  CK(cudaMalloc(&d_o, no * 2));
  CK(cudaMalloc(&dl, nl * 4));
  CK(cudaMemcpy(dq, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), nv * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_o, 0xff, no * 2));  // NaN poison (0xffff is NaN in bf16 and fp16)
  CK(cudaMemset(dl, 0xff, nl * 4));   // NaN
  if (paged) {
    CK(cudaMalloc(&dtab, table.size() * 4));
    CK(cudaMemcpy(dtab, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  }
  if (!c.seqused.empty()) {
    CK(cudaMalloc(&dused, B * 4));
    CK(cudaMemcpy(dused, c.seqused.data(), B * 4, cudaMemcpyHostToDevice));
  }
  if (!c.leftpad.empty()) {
    CK(cudaMalloc(&dlp, B * 4));
    CK(cudaMemcpy(dlp, c.leftpad.data(), B * 4, cudaMemcpyHostToDevice));
  }
  if (c.sinks) {
    CK(cudaMalloc(&dsink, Hq * 4));
    CK(cudaMemcpy(dsink, sinks.data(), Hq * 4, cudaMemcpyHostToDevice));
  }

  kseek_params p;
  memset(&p, 0, sizeof(p));
  p.abi_version = KSEEK_ABI_VERSION;
  p.dtype = p.out_dtype = c.dtype;
  p.batch = B;
  p.seqlen_q = Sq;
  p.seqlen_k = Sk;
  p.heads_q = Hq;
  p.heads_kv = Hkv;
  p.head_dim = p.head_dim_v = D;
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = d_o;
  p.lse = c.lse ? dl : nullptr;
  p.q_batch_stride = q_bs; p.q_row_stride = q_rs; p.q_head_stride = q_hs;
  p.k_batch_stride = k_bs; p.k_row_stride = k_rs; p.k_head_stride = k_hs;
  p.v_batch_stride = v_bs; p.v_row_stride = v_rs; p.v_head_stride = v_hs;
  p.o_batch_stride = o_bs; p.o_row_stride = o_rs; p.o_head_stride = o_hs;
  p.lse_batch_stride = l_bs; p.lse_head_stride = l_hs;
  p.seqused_k = dused;
  p.leftpad_k = dlp;
  p.page_table = dtab;
  p.page_table_stride = paged ? pps : 0;
  p.page_size = paged ? ps : 0;
  p.num_pages = num_pages;
  p.causal = c.causal;
  p.window_left = c.wl;
  p.window_right = c.wr;
  p.softcap = c.softcap;
  p.scale = 1.f / sqrtf((float)D);
  p.sinks = dsink;
  p.num_splits = c.splits;

  const bool sup = dec::supported(&p);
  const int ns = sup ? dec::choose_splits(&p) : 0;
  size_t wsb = dec::workspace_bytes(&p);
  void* dws = nullptr;
  if (c.ws_mode == 0 && wsb) {
    CK(cudaMalloc(&dws, wsb));
    CK(cudaMemset(dws, 0xff, wsb));  // NaN: the kernel must not rely on workspace contents
  }
  p.workspace = dws;
  p.workspace_bytes = c.ws_mode == 0 ? wsb : 0;

  const int rc = c.abi ? kseek_fwd(&p, 0) : dec::run(&p, 0);
  cudaError_t ce = cudaDeviceSynchronize();
  std::vector<uint16_t> ho(no);
  std::vector<float> hl(nl);
  if (ce == cudaSuccess) {
    CK(cudaMemcpy(ho.data(), d_o, no * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl.data(), dl, nl * 4, cudaMemcpyDeviceToHost));
  }

  // reference and comparison
  const double scale = p.scale;
  const double atol = f16 ? 4e-3 : 2e-2, rtol = f16 ? 4e-3 : 1.6e-2;
  double max_err = 0.0, max_lse_err = 0.0;
  long bad = 0;
  char first[256] = "";
  std::vector<char> logical_o(no, 0), logical_l(nl, 0);
  std::vector<double> acc(D);
  for (int b = 0; b < B && ce == cudaSuccess && rc == KSEEK_OK; ++b) {
    const int sk = std::max(0, end[b] - lp[b]);
    for (int i = 0; i < Sq; ++i) {
      long lo, hi;
      ref_visible(i, Sq, sk, c.wl, c.wr, c.causal, &lo, &hi);
      for (int hh = 0; hh < Hq; ++hh) {
        const int h = hh / G;
        const uint16_t* qrow = &hq[b * q_bs + i * q_rs + hh * q_hs];
        const double ref_lse = ref_row(
            D, D, lo, hi, scale, c.softcap, c.sinks ? &sinks[hh] : nullptr, [&](int d) { return from16(qrow[d]); },
            [&](long jp, int d) { return from16(hk[koff(b, (int)jp + lp[b], h) + d]); },
            [&](long jp, int d) { return from16(hv[voff(b, (int)jp + lp[b], h) + d]); }, acc.data());
        const int64_t ob = b * o_bs + i * o_rs + hh * o_hs;
        for (int d = 0; d < D; ++d) {
          logical_o[ob + d] = 1;
          const double got = from16(ho[ob + d]);
          const double err = fabs(got - acc[d]);
          if (!(err <= atol + rtol * fabs(acc[d]))) {  // NaN fails too
            if (!bad++)
              snprintf(first, sizeof(first), "o[b=%d,i=%d,h=%d,d=%d] = %g, want %g", b, i, hh, d, got, acc[d]);
          }
          if (err == err) max_err = std::max(max_err, err);
          else max_err = INFINITY;
        }
        if (c.lse) {
          const int64_t lb = b * l_bs + hh * l_hs + i;
          logical_l[lb] = 1;
          const double got = hl[lb];
          bool ok;
          if (ref_lse == -INFINITY) ok = got == -INFINITY;
          else {
            const double err = fabs(got - ref_lse);
            ok = err <= 2e-3 + 1e-4 * fabs(ref_lse);
            if (err == err) max_lse_err = std::max(max_lse_err, err);
          }
          if (!ok) {
            if (!bad) snprintf(first, sizeof(first), "lse[b=%d,h=%d,i=%d] = %g, want %g", b, hh, i, got, ref_lse);
            ++bad;
          }
        }
      }
    }
  }
  // gaps between logical elements must keep their poison; without LSE, nothing is written there
  long stray = 0;
  if (ce == cudaSuccess && rc == KSEEK_OK) {
    for (size_t e = 0; e < no; ++e)
      if (!logical_o[e] && ho[e] != 0xffff) ++stray;
    for (size_t e = 0; e < nl; ++e) {
      uint32_t u;
      memcpy(&u, &hl[e], 4);
      if (!logical_l[e] && u != 0xffffffffu) ++stray;
    }
  }
  const bool ok = ce == cudaSuccess && rc == KSEEK_OK && bad == 0 && stray == 0;
  if (ok) ++g_pass;
  else ++g_fail;
  printf("[%s] %-44s splits=%-3d max|do|=%.2e max|dlse|=%.2e", ok ? "PASS" : "FAIL", c.name.c_str(), ns,
         max_err, max_lse_err);
  if (rc != KSEEK_OK) printf("  run() returned %d%s", rc, sup ? "" : " (unsupported)");
  if (ce != cudaSuccess) printf("  CUDA: %s", cudaGetErrorString(ce));
  if (bad) printf("  %ld bad, first %s", bad, first);
  if (stray) printf("  %ld stray writes", stray);
  printf("\n");
  fflush(stdout);
  if (ce != cudaSuccess) {
    printf("the CUDA context is lost; stopping\n");
    printf("ALL PASS: no -- %d failure(s) before the context was lost\n", g_fail);
    fflush(stdout);
    exit(1);
  }
  cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(d_o); cudaFree(dl);
  if (dsink) cudaFree(dsink);
  if (dtab) cudaFree(dtab);
  if (dused) cudaFree(dused);
  if (dlp) cudaFree(dlp);
  if (dws) cudaFree(dws);
}

static void unsupported_case(const char* name, void (*edit)(kseek_params&)) {
  kseek_params p;
  memset(&p, 0, sizeof(p));
  p.abi_version = KSEEK_ABI_VERSION;
  p.dtype = p.out_dtype = KSEEK_BF16;
  p.batch = 1; p.seqlen_q = 1; p.seqlen_k = 64; p.heads_q = 4; p.heads_kv = 1; p.head_dim = p.head_dim_v = 128;
  static __align__(16) char dummy[64];
  p.q = p.k = p.v = p.o = dummy;  // never dereferenced: refused before any launch
  p.q_row_stride = p.q_head_stride = 128; p.q_batch_stride = 512;
  p.k_row_stride = p.v_row_stride = 128; p.k_head_stride = p.v_head_stride = 128;
  p.k_batch_stride = p.v_batch_stride = 64 * 128;
  p.o_row_stride = p.o_head_stride = 128; p.o_batch_stride = 512;
  p.scale = 0.088f;
  edit(p);
  // dec::run, not kseek_fwd: kseek_fwd would hand a call the decode path refuses to the prefill or
  // fallback paths, which would run on the dummy host pointers above (and lose the context).
  const bool sup = dec::supported(&p);
  const int rc = dec::run(&p, 0);
  const bool ok = !sup && rc == KSEEK_ERR_UNSUPPORTED && cudaGetLastError() == cudaSuccess;
  if (ok) ++g_pass;
  else ++g_fail;
  printf("[%s] refuse: %-36s rc=%d\n", ok ? "PASS" : "FAIL", name, rc);
  fflush(stdout);
}

static void checks() {
  printf("== correctness (CPU double reference) ==\n");
  fflush(stdout);
  uint64_t seed = 1;
  auto go = [&](const Case& c) { run_case(c, seed++); };
  std::vector<int> used5 = {0, 1, 17, 100, 256}, lp5 = {0, 3, 16, 50, 5}, used5b = {37, 200, 256, 64, 5};

  // paged basics (bf16, D=128, G=4, page 16), split counts 0, 1, 3 and more splits than pages
  for (int s : {0, 1, 3, 40}) {
    Case c; c.name = "paged full B3 Sk256 splits" + std::to_string(s); c.B = 3; c.Sk = 256; c.splits = s; go(c);
  }
  for (int s : {0, 1, 3, 40}) {
    Case c; c.name = "paged seqused{0,1,17,100,256} splits" + std::to_string(s);
    c.B = 5; c.Sk = 256; c.seqused = used5; c.splits = s; go(c);
  }
  for (int s : {1, 3}) {
    Case c; c.name = "paged leftpad+seqused splits" + std::to_string(s);
    c.B = 5; c.Sk = 256; c.seqused = used5b; c.leftpad = lp5; c.splits = s; go(c);
  }
  { Case c; c.name = "paged seqused lse=NULL splits1"; c.B = 5; c.Sk = 256; c.seqused = used5; c.lse = false; c.splits = 1; go(c); }
  { Case c; c.name = "paged seqused lse=NULL splits3"; c.B = 5; c.Sk = 256; c.seqused = used5; c.lse = false; c.splits = 3; go(c); }
  { Case c; c.name = "paged long Sk4096 auto splits"; c.B = 2; c.Sk = 4096; c.seqused = {4096, 3001}; go(c); }
  { Case c; c.name = "paged Sk2000 splits 7 qmul3"; c.B = 2; c.Sk = 2000; c.seqused = {1999, 1001}; c.splits = 7; c.qmul = 3.f; go(c); }

  // causal, Sq 1..4 (rows i see keys up to i + Sk - Sq)
  for (int sq = 1; sq <= 4; ++sq)
    for (int s : {1, 3}) {
      Case c; c.name = "causal Sq" + std::to_string(sq) + " G4 seqused splits" + std::to_string(s);
      c.B = 5; c.Sq = sq; c.Sk = 256; c.seqused = used5; c.causal = 1; c.splits = s; go(c);
    }
  { Case c; c.name = "causal Sq4 leftpad seqused{2,..} splits0"; c.B = 3; c.Sq = 4; c.Sk = 64; c.seqused = {2, 40, 64};
    c.leftpad = {0, 7, 1}; c.causal = 1; go(c); }  // Sq > Sk_b: leading rows see no key
  // windows
  { Case c; c.name = "window L40 (non-causal) Sq2 splits3"; c.B = 3; c.Sq = 2; c.Sk = 256; c.seqused = {256, 100, 3};
    c.wl = 40; c.splits = 3; go(c); }
  { Case c; c.name = "window L20 causal Sq4 splits0"; c.B = 3; c.Sq = 4; c.Sk = 512; c.seqused = {512, 77, 20};
    c.wl = 20; c.causal = 1; go(c); }
  { Case c; c.name = "window L-1 R5 Sq4 splits1"; c.B = 2; c.Sq = 4; c.Sk = 128; c.seqused = {128, 30}; c.wr = 5; c.splits = 1; go(c); }
  { Case c; c.name = "window L0 R0 Sq3 splits2"; c.B = 2; c.Sq = 3; c.Sk = 128; c.seqused = {128, 2}; c.wl = 0; c.wr = 0;
    c.splits = 2; go(c); }
  { Case c; c.name = "window L1000 R3 leftpad splits0"; c.B = 2; c.Sq = 2; c.Sk = 2048; c.seqused = {2048, 1500};
    c.leftpad = {300, 9}; c.wl = 1000; c.wr = 3; go(c); }
  // softcap, sinks
  for (int s : {1, 4}) {
    Case c; c.name = "softcap 5 qmul4 splits" + std::to_string(s); c.B = 3; c.Sk = 256; c.seqused = {256, 33, 0};
    c.softcap = 5.f; c.qmul = 4.f; c.splits = s; go(c);
  }
  for (int s : {1, 3}) {
    Case c; c.name = "sinks N(0,1) seqused splits" + std::to_string(s); c.B = 5; c.Sk = 256; c.seqused = used5;
    c.sinks = 1; c.splits = s; go(c);
  }
  for (int s : {1, 3}) {
    Case c; c.name = "sinks +6 causal Sq2 splits" + std::to_string(s); c.B = 5; c.Sq = 2; c.Sk = 256; c.seqused = used5;
    c.sinks = 2; c.causal = 1; c.splits = s; go(c);
  }
  for (int s : {1, 5}) {
    Case c; c.name = "sinks +60 (dominant) splits" + std::to_string(s); c.B = 2; c.Sk = 128; c.seqused = {128, 1};
    c.sinks = 3; c.splits = s; go(c);
  }
  { Case c; c.name = "softcap 30 + sinks + window splits3"; c.B = 2; c.Sq = 3; c.Sk = 256; c.seqused = {256, 90};
    c.softcap = 30.f; c.sinks = 1; c.wl = 50; c.causal = 1; c.qmul = 2.f; c.splits = 3; go(c); }
  // GQA packing: G in {1, 4, 8, 16, 32}, Sq*G up to 64 (several 16-row tiles)
  { Case c; c.name = "G1 (MHA) Sq1 Hq4"; c.Hq = 4; c.Hkv = 4; c.Sk = 192; c.seqused = {150, 192}; go(c); }
  { Case c; c.name = "G1 Sq16 causal (M=16)"; c.Hq = 2; c.Hkv = 2; c.Sq = 16; c.Sk = 160; c.seqused = {160, 20}; c.causal = 1; c.splits = 3; go(c); }
  { Case c; c.name = "G8 Sq1 splits0"; c.Hq = 16; c.Hkv = 2; c.Sk = 256; c.seqused = {256, 129}; go(c); }
  { Case c; c.name = "G8 Sq2 causal (M=16) splits3"; c.Hq = 16; c.Hkv = 2; c.Sq = 2; c.Sk = 256; c.seqused = {256, 129}; c.causal = 1; c.splits = 3; go(c); }
  { Case c; c.name = "G8 Sq4 causal (M=32) splits1"; c.Hq = 16; c.Hkv = 2; c.Sq = 4; c.Sk = 256; c.seqused = {256, 3}; c.causal = 1; c.splits = 1; go(c); }
  { Case c; c.name = "G8 Sq8 causal (M=64) splits3"; c.Hq = 16; c.Hkv = 2; c.Sq = 8; c.Sk = 256; c.seqused = {256, 5}; c.causal = 1; c.splits = 3; go(c); }
  { Case c; c.name = "G4 Sq16 window (M=64) splits0"; c.Sq = 16; c.Sk = 512; c.seqused = {512, 300}; c.wl = 64; c.causal = 1; go(c); }
  { Case c; c.name = "G32 (MQA) Sq2 (M=64) splits2"; c.Hq = 32; c.Hkv = 1; c.Sq = 2; c.Sk = 128; c.seqused = {100, 128}; c.splits = 2; go(c); }
  { Case c; c.name = "G6 Sq3 (M=18, tile split mid-row)"; c.Hq = 12; c.Hkv = 2; c.Sq = 3; c.Sk = 128; c.seqused = {128, 50}; c.causal = 1; c.splits = 2; go(c); }
  // fp16
  { Case c; c.name = "fp16 paged seqused splits0"; c.dtype = KSEEK_FP16; c.B = 5; c.Sk = 256; c.seqused = used5; go(c); }
  { Case c; c.name = "fp16 causal Sq3 sinks splits3"; c.dtype = KSEEK_FP16; c.B = 5; c.Sq = 3; c.Sk = 256; c.seqused = used5;
    c.causal = 1; c.sinks = 1; c.splits = 3; go(c); }
  { Case c; c.name = "fp16 softcap splits1"; c.dtype = KSEEK_FP16; c.Sk = 128; c.softcap = 10.f; c.qmul = 3.f; c.splits = 1; go(c); }
  // head dims 64 and 256
  for (int d : {64, 256})
    for (int s : {0, 1, 3}) {
      Case c; c.name = "D" + std::to_string(d) + " paged seqused splits" + std::to_string(s); c.D = d; c.B = 5; c.Sk = 256;
      c.seqused = used5; c.splits = s; go(c);
    }
  { Case c; c.name = "D256 fp16 causal Sq4 G8 (M=32)"; c.dtype = KSEEK_FP16; c.D = 256; c.Hq = 16; c.Hkv = 2; c.Sq = 4;
    c.Sk = 128; c.seqused = {128, 60}; c.causal = 1; c.splits = 2; go(c); }
  { Case c; c.name = "D64 dense leftpad sinks"; c.D = 64; c.ps = 0; c.B = 3; c.Sk = 300; c.seqused = {300, 45, 17};
    c.leftpad = {0, 40, 17}; c.sinks = 1; go(c); }
  // page sizes
  for (int pss : {8, 24, 64, 1}) {
    Case c; c.name = "page size " + std::to_string(pss) + " leftpad seqused splits3"; c.ps = pss; c.B = 3; c.Sk = 192;
    c.seqused = {192, 101, 9}; c.leftpad = {5, 0, 8}; c.splits = 3; go(c);
  }
  // dense KV
  for (int s : {0, 1, 3}) {
    Case c; c.name = "dense seqused leftpad splits" + std::to_string(s); c.ps = 0; c.B = 5; c.Sk = 256;
    c.seqused = used5b; c.leftpad = lp5; c.splits = s; go(c);
  }
  { Case c; c.name = "dense full causal Sq4 splits0"; c.ps = 0; c.B = 2; c.Sq = 4; c.Sk = 1000; c.causal = 1; go(c); }
  { Case c; c.name = "dense Sk=1"; c.ps = 0; c.B = 2; c.Sk = 1; go(c); }
  // strided layouts, no workspace, the kseek ABI wrapper
  { Case c; c.name = "strided paged (V head-major) splits3"; c.strided = true; c.B = 3; c.Sq = 2; c.Sk = 128;
    c.seqused = {128, 50, 0}; c.causal = 1; c.splits = 3; go(c); }
  { Case c; c.name = "strided dense splits1 sinks"; c.strided = true; c.ps = 0; c.B = 2; c.Sk = 100; c.sinks = 1; c.splits = 1; go(c); }
  { Case c; c.name = "splits3 without workspace (falls to 1)"; c.ws_mode = 1; c.B = 2; c.Sk = 256; c.splits = 3; go(c); }
  { Case c; c.name = "kseek_fwd wrapper, splits 5"; c.abi = true; c.B = 2; c.Sk = 512; c.seqused = {512, 200}; c.splits = 5; go(c); }
  { Case c; c.name = "all sequences empty"; c.B = 2; c.Sk = 64; c.seqused = {0, 0}; c.sinks = 1; c.splits = 2; go(c); }

  // refusals
  unsupported_case("fp8", [](kseek_params& p) { p.dtype = KSEEK_FP8_E4M3; p.out_dtype = KSEEK_BF16; });
  unsupported_case("D=96", [](kseek_params& p) { p.head_dim = p.head_dim_v = 96; });
  unsupported_case("Sq*G = 68", [](kseek_params& p) { p.heads_q = 4; p.seqlen_q = 17; });
  unsupported_case("varlen", [](kseek_params& p) { static int cu[2] = {0, 1}; p.cu_seqlens_q = cu; p.cu_seqlens_k = cu; });
  unsupported_case("odd k stride", [](kseek_params& p) { p.k_row_stride = 130; });
}

// ---- timing of the bench decode shapes ---------------------------------------------------------
__global__ void fill_bf16(uint16_t* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 32) * 2246822519u ^ seed * 3266489917u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    const float f = ((float)(h & 0xffffff) / 16777216.f - 0.5f) * 4.f;  // uniform(-2, 2)
    uint32_t u = __float_as_uint(f);
    x[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

static void timing() {
  printf("== timing: bench decode rows (bf16, D=128, Hq=32, Hkv=8, Sq=1, page 16, shuffled table) ==\n");
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s, %d SMs, CTAs/SM for D=128 bf16: %d\n", prop.name, prop.multiProcessorCount,
         dec::prepare<__nv_bfloat16, 128>(dev));
  fflush(stdout);
  struct Row { int row, B, Sk; } rows[] = {{20, 16, 8192}, {21, 64, 4096}, {22, 128, 1024}, {23, 256, 2048}, {24, 4, 32768}};
  const int Hq = 32, Hkv = 8, D = 128, ps = 16;
  for (const Row& r : rows) {
    const int pps = r.Sk / ps, num_pages = r.B * pps;
    const size_t nkv = (size_t)num_pages * ps * Hkv * D;
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    const int copies = free_b > 2 * (2 * nkv * 2) + ((size_t)1 << 30) ? 2 : 1;
    uint16_t *dk[2], *dv[2], *dq, *d_o;
    int* dtab[2];
    float* dl;
    CK(cudaMalloc(&dq, (size_t)r.B * Hq * D * 2));
    CK(cudaMalloc(&d_o, (size_t)r.B * Hq * D * 2));
    CK(cudaMalloc(&dl, (size_t)r.B * Hq * 4));
    fill_bf16<<<1024, 256>>>(dq, (size_t)r.B * Hq * D, 7);
    Rng rng(r.row);
    for (int c = 0; c < copies; ++c) {
      CK(cudaMalloc(&dk[c], nkv * 2));
      CK(cudaMalloc(&dv[c], nkv * 2));
      fill_bf16<<<4096, 256>>>(dk[c], nkv, 100 + c);
      fill_bf16<<<4096, 256>>>(dv[c], nkv, 200 + c);
      std::vector<int> t(num_pages);
      for (int i = 0; i < num_pages; ++i) t[i] = i;
      for (int i = num_pages - 1; i > 0; --i) std::swap(t[i], t[rng.below(i + 1)]);
      CK(cudaMalloc(&dtab[c], num_pages * 4));
      CK(cudaMemcpy(dtab[c], t.data(), num_pages * 4, cudaMemcpyHostToDevice));
    }
    CK(cudaGetLastError());
    kseek_params p;
    memset(&p, 0, sizeof(p));
    p.abi_version = KSEEK_ABI_VERSION;
    p.dtype = p.out_dtype = KSEEK_BF16;
    p.batch = r.B; p.seqlen_q = 1; p.seqlen_k = r.Sk; p.heads_q = Hq; p.heads_kv = Hkv; p.head_dim = p.head_dim_v = D;
    p.q = dq; p.o = d_o; p.lse = dl;
    p.q_head_stride = D; p.q_row_stride = Hq * D; p.q_batch_stride = Hq * D;
    p.k_head_stride = p.v_head_stride = D; p.k_row_stride = p.v_row_stride = Hkv * D;
    p.k_batch_stride = p.v_batch_stride = (int64_t)ps * Hkv * D;
    p.o_head_stride = D; p.o_row_stride = Hq * D; p.o_batch_stride = Hq * D;
    p.lse_head_stride = 1; p.lse_batch_stride = Hq;
    p.page_table_stride = pps; p.page_size = ps; p.num_pages = num_pages;
    p.scale = 1.f / sqrtf((float)D);
    p.window_left = p.window_right = -1;
    p.num_splits = 0;
    p.k = dk[0]; p.v = dv[0]; p.page_table = dtab[0];  // workspace_bytes needs a complete call
    const size_t wsb = dec::workspace_bytes(&p);
    void* dws = nullptr;
    if (wsb) CK(cudaMalloc(&dws, wsb));
    p.workspace = dws;
    p.workspace_bytes = wsb;
    const int ns = dec::choose_splits(&p);
    auto call = [&](int c) {
      p.k = dk[c]; p.v = dv[c]; p.page_table = dtab[c];
      const int rc = dec::run(&p, 0);
      if (rc != KSEEK_OK) {
        printf("run() returned %d\n", rc);
        fflush(stdout);
        exit(1);
      }
    };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto time_ms = [&](int iters) {  // warm-up, then iters back-to-back calls rotating the copies
      for (int it = 0; it < 5; ++it) call(it % copies);
      CK(cudaDeviceSynchronize());
      CK(cudaEventRecord(e0));
      for (int it = 0; it < iters; ++it) call(it % copies);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms = 0.f;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      return ms / iters;
    };
    const double bytes = 2.0 * nkv * 2;
    const float ms = time_ms(50);
    printf("[TIME] r%d B=%-3d Sk=%-5d splits=%-3d %.4f ms/call  %.3f TB/s of K+V  (%d input cop%s, %.2f GB K+V each)\n",
           r.row, r.B, r.Sk, ns, ms, bytes / (ms * 1e-3) / 1e12, copies, copies == 1 ? "y" : "ies", bytes / 1e9);
    fflush(stdout);
    // explicit split counts (to tune choose_splits): TB/s per count
    printf("[SWEEP] r%d", r.row);
    for (int s : {1, 2, 4, 8, 16, 32}) {
      kseek_params q = p;
      q.num_splits = s;
      const size_t need = dec::workspace_bytes(&q);
      void* w = nullptr;
      if (need) CK(cudaMalloc(&w, need));
      kseek_params saved = p;
      p.num_splits = s;
      p.workspace = w;
      p.workspace_bytes = need;
      const float m = time_ms(20);
      printf("  s%d %.3f", s, bytes / (m * 1e-3) / 1e12);
      fflush(stdout);
      p = saved;
      if (w) CK(cudaFree(w));
    }
    printf("  (TB/s)\n");
    fflush(stdout);

    // spot check: copy 0, sequences 0 and B-1, all heads, against the CPU (informational [PASS]/[FAIL])
    call(0);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> hk(nkv), hv(nkv), hq((size_t)r.B * Hq * D), ho((size_t)r.B * Hq * D);
    std::vector<int> t(num_pages);
    std::vector<float> hl((size_t)r.B * Hq);
    CK(cudaMemcpy(hk.data(), dk[0], nkv * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data(), dv[0], nkv * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq.data(), dq, hq.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ho.data(), d_o, ho.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl.data(), dl, hl.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(t.data(), dtab[0], num_pages * 4, cudaMemcpyDeviceToHost));
    double max_err = 0.0, max_lerr = 0.0;
    std::vector<double> acc(D);
    for (int b : {0, r.B - 1})
      for (int hh = 0; hh < Hq; ++hh) {
        const int h = hh / (Hq / Hkv);
        auto kv_off = [&](long j) { return ((size_t)t[b * pps + j / ps] * ps + j % ps) * Hkv * D + (size_t)h * D; };
        const double lse = ref_row(
            D, D, 0, r.Sk - 1, p.scale, 0.0, nullptr, [&](int d) { return bf2f(hq[((size_t)b * Hq + hh) * D + d]); },
            [&](long j, int d) { return bf2f(hk[kv_off(j) + d]); }, [&](long j, int d) { return bf2f(hv[kv_off(j) + d]); },
            acc.data());
        for (int d = 0; d < D; ++d) {
          const double err = fabs(bf2f(ho[((size_t)b * Hq + hh) * D + d]) - acc[d]);
          max_err = err == err ? std::max(max_err, err) : INFINITY;
        }
        const double lerr = fabs(hl[(size_t)b * Hq + hh] - lse);
        max_lerr = lerr == lerr ? std::max(max_lerr, lerr) : INFINITY;
      }
    const bool ok = max_err <= 1e-2 && max_lerr <= 2e-3;
    if (ok) ++g_pass;
    else ++g_fail;
    printf("[%s] r%d output spot check (b=0 and b=B-1, all heads): max|do|=%.2e max|dlse|=%.2e\n", ok ? "PASS" : "FAIL",
           r.row, max_err, max_lerr);
    fflush(stdout);

    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    for (int c = 0; c < copies; ++c) {
      CK(cudaFree(dk[c]));
      CK(cudaFree(dv[c]));
      CK(cudaFree(dtab[c]));
    }
    CK(cudaFree(dq));
    CK(cudaFree(d_o));
    CK(cudaFree(dl));
    if (dws) CK(cudaFree(dws));
  }
}

int main(int argc, char** argv) {
  const bool do_check = argc < 2 || !strcmp(argv[1], "check");
  const bool do_time = argc < 2 || !strcmp(argv[1], "time");
  CK(cudaFree(0));
  print_variant();
  if (do_check) checks();
  if (do_time) timing();
  return finish();
}
