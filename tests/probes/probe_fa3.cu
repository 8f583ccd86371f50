// probe_fa3.cu: the building blocks of the bf16/fp16 prefill of kernels/fa3_hopper/, then the whole
// kernel, on the GPU. Tests the Hopper building blocks one at a time against CPU references, then
// kseek_fwd end to end, and prints PASS/FAIL per block.
//
// Build and run (from the repository root; nvcc, sm_90a; tools/gpu_round.sh probes does this):
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O2 -o /tmp/probe_fa3 tests/probes/probe_fa3.cu && /tmp/probe_fa3
// Only the (f) section:  /tmp/probe_fa3 f      (the block tests (a)-(e), (a2), (b2) are skipped)
// A build variant (kernels/fa3_hopper/variants.cuh) runs (f) under another schedule: add e.g.
// -DKSEEK_FA3_SCHED=dynamic -DKSEEK_FA3_SECTION_MB=0.5 (every case through the tile counter, many
// short sections; each case launches the kernel again, so a counter that failed to reset would lose
// tiles on the next launch), -DKSEEK_FA3_SCHED=static, -DKSEEK_FA3_VARIANT=0 or 1, -DKSEEK_FA3_ORDER=flat.
// It #includes the kernel, so every test uses the kernel's own helpers (swz_offset, make_desc,
// desc_kmajor, desc_mnmajor, acc_row/acc_col, acc_to_a, the wgmma wrappers, mbarrier and TMA
// helpers, make_map) -- a FAIL here points at the exact helper the kernel relies on. Design and
// layouts: README_fa3.md.
//
//   (a) one SS wgmma GEMM (64 x 128 x D, D = 64, 128; A = rows 0-63 or 64-127 of a 128-row tile)
//       with the 128B-swizzled K-major layout and desc_kmajor  -> S = Q K^T's building block
//   (b) the RS form: A = P from registers via acc_to_a, B = V N-major (trans-b) via desc_mnmajor,
//       Dv = 64, 128; also tries LBO/SBO swapped (PROBE_TRY_SWAPPED=1) and reports which matches
//   (c) TMA 4D tile loads with SWIZZLE_128B through make_map, checked element by element against
//       swz_offset, including zero fill of rows past the end; [B,S,H,D] and [B,H,S,D] layouts
//   (d) the 2-stage K/V mbarrier ring with the kernel's warp specialization (setmaxnreg,
//       producer thread + 8 consumer warps), 7 tiles (phase wrap-around), weighted checksums
//   (e) the accumulator register -> (row, col) mapping (S[r][c] = 256 r + c, decoded)
//   (a2) SS wgmma with K tiles of BN rows (N = BN: 64, 80, 112, 128), (b2) pv_step (the PV wgmma
//       split into N = 128 / 64 / 32 pieces over 64-column V chunks) for DV = 64..256
//   (f) kseek_fwd end to end (fast path and fallback) against the CPU reference (probe_common.cuh):
//       window, softcap, sinks, seqused_k, leftpad_k (NaN in every key/value row outside the valid
//       range), varlen, every head dim, the persistent grid with more tiles than SMs
//   (g) a quick timing of the fast path (TFLOP/s), informational; PROBE_NO_BENCH=1 skips it
// FA3_DEBUG_HANG (trap after ~2^31 mbarrier polls) is OFF by default here: with it, ptxas spills
// ~600 bytes in the hd256 fwd_kernel (its consumer is near the register limit), so the probe would
// not test the production code generation. A hang is caught by SYNC_OR_DIE (20 s) or the run's
// time limit. Build with -DPROBE_DEBUG_HANG to turn it on.
#ifdef PROBE_DEBUG_HANG
#define FA3_DEBUG_HANG 1
#endif
#include "../../kernels/fa3_hopper/fa3_hopper.cu"
#include "probe_common.cuh"

#include <random>
#include <string>
#include <vector>

using bf16 = __nv_bfloat16;

__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// =============================================================================== (a) SS wgmma
template <int D>
__global__ void __launch_bounds__(128) k_ss(const bf16* A, const bf16* B, float* out, int half) {
  extern __shared__ uint8_t sm[];
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  const uint32_t sA = base, sB = base + 128 * D * 2;
  for (int e = threadIdx.x; e < 128 * D; e += 128) {
    const int r = e / D, c = e % D;
    *reinterpret_cast<bf16*>(gbase + fa3::swz_offset(r, c, 128)) = A[e];
    *reinterpret_cast<bf16*>(gbase + 128 * D * 2 + fa3::swz_offset(r, c, 128)) = B[e];
  }
  fence_proxy_async();  // generic-proxy stores -> read by the tensor core (async proxy)
  __syncthreads();
  float d[64];
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
  fa3::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    fa3::wgmma_ss<false>(d, fa3::desc_kmajor(sA + half * 64 * 128, 128, ks),
                              fa3::desc_kmajor(sB, 128, ks), ks > 0 ? 1 : 0);
  fa3::wgmma_commit();
  fa3::wgmma_wait<0>();
  fa3::fence_regs(d);
  const int t = threadIdx.x;
  for (int i = 0; i < 64; ++i) out[fa3::acc_row(t, i) * 128 + fa3::acc_col(t, i)] = d[i];
}

template <int D>
static void test_a(std::mt19937& rng) {
  std::uniform_int_distribution<int> u(-2, 2);
  std::vector<bf16> A(128 * D), B(128 * D);
  std::vector<float> Af(128 * D), Bf(128 * D);
  for (int i = 0; i < 128 * D; ++i) {
    Af[i] = (float)u(rng); Bf[i] = (float)u(rng);
    A[i] = __float2bfloat16(Af[i]); B[i] = __float2bfloat16(Bf[i]);
  }
  bf16 *dA, *dB; float* dO;
  CK(cudaMalloc(&dA, A.size() * 2)); CK(cudaMalloc(&dB, B.size() * 2)); CK(cudaMalloc(&dO, 64 * 128 * 4));
  CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
  const int smem = 2 * 128 * D * 2 + 1024;
  CK(cudaFuncSetAttribute(k_ss<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int half = 0; half < 2; ++half) {
    CK(cudaMemset(dO, 0xff, 64 * 128 * 4));
    k_ss<D><<<1, 128, smem>>>(dA, dB, dO, half);
    CK(cudaGetLastError()); SYNC_OR_DIE();
    std::vector<float> O(64 * 128);
    CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0; char first[160] = "";
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 128; ++c) {
        float ref = 0;
        for (int k = 0; k < D; ++k) ref += Af[(half * 64 + r) * D + k] * Bf[c * D + k];
        if (O[r * 128 + c] != ref && bad++ == 0)
          snprintf(first, sizeof first, "first bad (r=%d,c=%d): got %g want %g", r, c, O[r * 128 + c], ref);
      }
    char name[96], det[256];
    snprintf(name, sizeof name, "(a) SS wgmma m64n128k16 x%d, K-major 128B swizzle, D=%d, A rows %d-%d", D / 16, D, half * 64, half * 64 + 63);
    snprintf(det, sizeof det, "%d/%d wrong %s", bad, 64 * 128, first);
    report(name, bad == 0, det);
  }
  cudaFree(dA); cudaFree(dB); cudaFree(dO);
}

// =============================================================================== (b) RS wgmma
template <int DV>
__global__ void __launch_bounds__(128) k_rs(const float* P, const bf16* V, float* out, uint32_t lbo,
                                            uint32_t sbo) {
  extern __shared__ uint8_t sm[];
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  for (int e = threadIdx.x; e < 128 * DV; e += 128) {
    const int r = e / DV, c = e % DV;  // r = key, c = value dim
    *reinterpret_cast<bf16*>(gbase + fa3::swz_offset(r, c, 128)) = V[e];
  }
  fence_proxy_async();
  __syncthreads();
  const int t = threadIdx.x;
  float s[64];
  for (int i = 0; i < 64; ++i) s[i] = P[fa3::acc_row(t, i) * 128 + fa3::acc_col(t, i)];
  uint32_t pa[8][4];
  fa3::acc_to_a<false>(s, pa);
  float o[DV / 2];
  for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
  fa3::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) fa3::wgmma_rs_tb<false>(o, pa[ks], fa3::make_desc(base + ks * 2048, lbo, sbo), 1);
  fa3::wgmma_commit();
  fa3::wgmma_wait<0>();
  fa3::fence_regs(o);
  for (int i = 0; i < DV / 2; ++i) out[fa3::acc_row(t, i) * DV + fa3::acc_col(t, i)] = o[i];
}

template <int DV>
static void test_b(std::mt19937& rng) {
  std::uniform_int_distribution<int> u(-2, 2);
  std::vector<float> P(64 * 128), Vf(128 * DV);
  std::vector<bf16> V(128 * DV);
  for (auto& x : P) x = (float)u(rng);
  for (int i = 0; i < 128 * DV; ++i) { Vf[i] = (float)u(rng); V[i] = __float2bfloat16(Vf[i]); }
  float *dP, *dO; bf16* dV;
  CK(cudaMalloc(&dP, P.size() * 4)); CK(cudaMalloc(&dV, V.size() * 2)); CK(cudaMalloc(&dO, 64 * DV * 4));
  CK(cudaMemcpy(dP, P.data(), P.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dV, V.data(), V.size() * 2, cudaMemcpyHostToDevice));
  const int smem = 128 * DV * 2 + 1024;
  CK(cudaFuncSetAttribute(k_rs<DV>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  // the kernel's encoding (desc_mnmajor: LBO = 64-column chunk stride, SBO = 8-key stride), then swapped
  const uint64_t kd = fa3::desc_mnmajor(0, 128, 0);
  const uint32_t lbo0 = (uint32_t)((kd >> 16) & 0x3FFF) << 4, sbo0 = (uint32_t)((kd >> 32) & 0x3FFF) << 4;
  const uint32_t variants[2][2] = {{lbo0, sbo0}, {sbo0, lbo0}};
  // The swapped encoding was seen on the H200 (2026-11-30) to fault (illegal address) and lose the
  // context, so it only runs when asked: PROBE_TRY_SWAPPED=1.
  const int nvar = getenv("PROBE_TRY_SWAPPED") ? 2 : 1;
  for (int v = 0; v < nvar; ++v) {
    CK(cudaMemset(dO, 0xff, 64 * DV * 4));
    k_rs<DV><<<1, 128, smem>>>(dP, dV, dO, variants[v][0], variants[v][1]);
    CK(cudaGetLastError()); SYNC_OR_DIE();
    std::vector<float> O(64 * DV);
    CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0; char first[160] = "";
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < DV; ++c) {
        float ref = 0;
        for (int k = 0; k < 128; ++k) ref += P[r * 128 + k] * Vf[k * DV + c];
        if (O[r * DV + c] != ref && bad++ == 0)
          snprintf(first, sizeof first, "first bad (r=%d,c=%d): got %g want %g", r, c, O[r * DV + c], ref);
      }
    char name[160], det[256];
    snprintf(name, sizeof name, "(b) RS wgmma m64n%dk16 x8, A=P regs, B=V N-major trans-b, LBO=%u SBO=%u%s", DV,
             variants[v][0], variants[v][1], v == 0 ? " (kernel's encoding)" : " (swapped; informational)");
    snprintf(det, sizeof det, "%d/%d wrong %s", bad, 64 * DV, first);
    if (v == 0) report(name, bad == 0, det);
    else printf("[%s] %s %s\n", bad == 0 ? "info-match" : "info-nomatch", name, det);
  }
  cudaFree(dP); cudaFree(dV); cudaFree(dO);
}

// =============================================================================== (c) TMA
__global__ void k_tma(const __grid_constant__ CUtensorMap map, uint16_t* out, int row0, int head,
                      int batch, int swap, int nchunks) {
  extern __shared__ uint8_t sm[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  const uint32_t b = fa3::smem_u32(&bar);
  const int bytes = nchunks * 128 * 128;
  for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(gbase)[i] = 0xdeadbeefu;
  if (threadIdx.x == 0) { fa3::mbar_init(b, 1); fa3::fence_mbar_init(); }
  fence_proxy_async();  // the 0xdeadbeef fill must not land after the TMA writes
  __syncthreads();
  if (threadIdx.x == 0) {
    fa3::mbar_arrive_expect_tx(b, bytes);
    for (int c = 0; c < nchunks; ++c) fa3::tma_tile(base + c * 128 * 128, &map, b, 64 * c, row0, head, batch, swap);
  }
  fa3::mbar_wait(b, 0);
  for (int i = threadIdx.x; i < bytes / 2; i += blockDim.x) out[i] = reinterpret_cast<uint16_t*>(gbase)[i];
}

static uint16_t tval(int b, int s, int h, int d) {  // nonzero, distinct enough to catch misplacement
  return (uint16_t)(1 + ((((b * 211 + s) * 7 + h) * 128 + d) % 65000));
}

static void test_c() {
  const int B = 2, S = 200, H = 3, D = 128;
  for (int layout = 0; layout < 2; ++layout) {  // 0: [B,S,H,D]  1: [B,H,S,D]
    std::vector<uint16_t> X((size_t)B * S * H * D);
    int64_t rs, hs, bs = (int64_t)S * H * D;
    if (layout == 0) { rs = H * D; hs = D; } else { rs = D; hs = (int64_t)S * D; }
    for (int b = 0; b < B; ++b) for (int s = 0; s < S; ++s) for (int h = 0; h < H; ++h) for (int d = 0; d < D; ++d)
      X[b * bs + s * rs + h * hs + d] = tval(b, s, h, d);
    uint16_t *dX, *dO;
    CK(cudaMalloc(&dX, X.size() * 2)); CK(cudaMalloc(&dO, 128 * D * 2));
    CK(cudaMemcpy(dX, X.data(), X.size() * 2, cudaMemcpyHostToDevice));
    CUtensorMap map; int swap = -1;
    const bool ok = fa3::make_map(&map, false, dX, D, S, H, B, rs, hs, bs, 128, &swap);
    char name[128];
    snprintf(name, sizeof name, "(c) TMA 4D box 64x128 SWIZZLE_128B, layout %s", layout ? "[B,H,S,D]" : "[B,S,H,D]");
    if (!ok) { report(name, false, "make_map (cuTensorMapEncodeTiled) refused"); continue; }
    const int smem = 2 * 128 * 128 + 1024;
    CK(cudaFuncSetAttribute(k_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int row0 = 136, head = 2, batch = 1;  // rows 200..263 are out of bounds -> zeros
    k_tma<<<1, 128, smem>>>(map, dO, row0, head, batch, swap, D / 64);
    CK(cudaGetLastError()); SYNC_OR_DIE();
    std::vector<uint16_t> O(128 * D);
    CK(cudaMemcpy(O.data(), dO, O.size() * 2, cudaMemcpyDeviceToHost));
    int bad = 0; char first[200] = "";
    for (int r = 0; r < 128; ++r)
      for (int c = 0; c < D; ++c) {
        const int s = row0 + r;
        const uint16_t want = s < S ? tval(batch, s, head, c) : 0;
        const uint16_t got = O[fa3::swz_offset(r, c, 128) / 2];
        if (got != want && bad++ == 0)
          snprintf(first, sizeof first, "first bad (row %d, col %d at byte %u): got 0x%04x want 0x%04x", r, c,
                   fa3::swz_offset(r, c, 128), got, want);
      }
    char det[300];
    snprintf(det, sizeof det, "map dim order %s; %d/%d wrong %s", swap ? "{D,H,S,B}" : "{D,S,H,B}", bad, 128 * D, first);
    report(name, bad == 0, det);
    cudaFree(dX); cudaFree(dO);
  }
}

// =============================================================================== (d) pipeline
// Same roles, barrier counts, parities and ring as fa3::fwd_kernel; consumers checksum the tiles.
__global__ void __launch_bounds__(384, 1) k_pipe(const __grid_constant__ CUtensorMap tk,
                                                 const __grid_constant__ CUtensorMap tv, int n_iter,
                                                 int swapk, int swapv, float* out) {
  constexpr int D = 128, KV = 128 * D * 2;
  extern __shared__ uint8_t sm[];
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  const uint32_t sK = base, sV = base + 2 * KV, bars = base + 4 * KV;
  const uint32_t KF = bars + 0, VF = bars + 16, KE = bars + 32, VE = bars + 48;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      fa3::mbar_init(KF + 8 * s, 1); fa3::mbar_init(VF + 8 * s, 1);
      fa3::mbar_init(KE + 8 * s, fa3::kConsumerWarps); fa3::mbar_init(VE + 8 * s, fa3::kConsumerWarps);
    }
    fa3::fence_mbar_init();
  }
  __syncthreads();
  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    fa3::setmaxnreg_dec<fa3::kProducerRegs>();
    if (threadIdx.x == 0) {
      for (int it = 0; it < n_iter; ++it) {
        const int stage = it & 1; const uint32_t ph = (it >> 1) & 1;
        fa3::mbar_wait(KE + 8 * stage, ph ^ 1);
        fa3::mbar_arrive_expect_tx(KF + 8 * stage, KV);
        for (int c = 0; c < 2; ++c) fa3::tma_tile(sK + stage * KV + c * 128 * 128, &tk, KF + 8 * stage, 64 * c, it * 128, 0, 0, swapk);
        fa3::mbar_wait(VE + 8 * stage, ph ^ 1);
        fa3::mbar_arrive_expect_tx(VF + 8 * stage, KV);
        for (int c = 0; c < 2; ++c) fa3::tma_tile(sV + stage * KV + c * 128 * 128, &tv, VF + 8 * stage, 64 * c, it * 128, 0, 0, swapv);
      }
    }
  } else {
    fa3::setmaxnreg_inc<fa3::kConsumerRegs>();
    const int ct = threadIdx.x - 128;  // 0..255: row ct/2, columns 64*(ct%2)..+63
    const int lane = threadIdx.x & 31;
    float sk = 0.f, sv = 0.f;
    for (int it = 0; it < n_iter; ++it) {
      const int stage = it & 1; const uint32_t ph = (it >> 1) & 1;
      fa3::mbar_wait(KF + 8 * stage, ph);
      float a = 0.f;
      for (int c = 0; c < 64; ++c)
        a += __bfloat162float(*reinterpret_cast<const bf16*>(gbase + stage * KV + fa3::swz_offset(ct / 2, 64 * (ct % 2) + c, 128)));
      sk += (float)(it + 1) * a;
      __syncwarp();
      if (lane == 0) fa3::mbar_arrive(KE + 8 * stage);
      fa3::mbar_wait(VF + 8 * stage, ph);
      a = 0.f;
      for (int c = 0; c < 64; ++c)
        a += __bfloat162float(*reinterpret_cast<const bf16*>(gbase + 2 * KV + stage * KV + fa3::swz_offset(ct / 2, 64 * (ct % 2) + c, 128)));
      sv += (float)(it + 1) * a;
      __syncwarp();
      if (lane == 0) fa3::mbar_arrive(VE + 8 * stage);
    }
    out[2 * ct] = sk;
    out[2 * ct + 1] = sv;
  }
}

static void test_d(std::mt19937& rng) {
  const int n_iter = 7, S = n_iter * 128, D = 128;
  std::uniform_int_distribution<int> u(0, 3);
  std::vector<float> Kf((size_t)S * D), Vf((size_t)S * D);
  std::vector<bf16> K(Kf.size()), V(Vf.size());
  for (size_t i = 0; i < Kf.size(); ++i) {
    Kf[i] = (float)u(rng); Vf[i] = (float)u(rng);
    K[i] = __float2bfloat16(Kf[i]); V[i] = __float2bfloat16(Vf[i]);
  }
  bf16 *dK, *dV; float* dO;
  CK(cudaMalloc(&dK, K.size() * 2)); CK(cudaMalloc(&dV, V.size() * 2)); CK(cudaMalloc(&dO, 512 * 4));
  CK(cudaMemcpy(dK, K.data(), K.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dV, V.data(), V.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dO, 0xff, 512 * 4));
  CUtensorMap tk, tv; int sk = 0, sv = 0;
  if (!fa3::make_map(&tk, false, dK, D, S, 1, 1, D, D, (int64_t)S * D, 128, &sk) ||
      !fa3::make_map(&tv, false, dV, D, S, 1, 1, D, D, (int64_t)S * D, 128, &sv)) {
    report("(d) 2-stage K/V mbarrier pipeline", false, "make_map refused");
    return;
  }
  const int smem = 4 * 128 * D * 2 + 128 + 1024;
  CK(cudaFuncSetAttribute(k_pipe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  k_pipe<<<1, 384, smem>>>(tk, tv, n_iter, sk, sv, dO);
  CK(cudaGetLastError()); SYNC_OR_DIE();
  std::vector<float> O(512);
  CK(cudaMemcpy(O.data(), dO, 512 * 4, cudaMemcpyDeviceToHost));
  int bad = 0; char first[160] = "";
  for (int ct = 0; ct < 256; ++ct) {
    double wk = 0, wv = 0;
    for (int it = 0; it < n_iter; ++it) {
      double a = 0, b = 0;
      for (int c = 0; c < 64; ++c) {
        const size_t idx = (size_t)(it * 128 + ct / 2) * D + 64 * (ct % 2) + c;
        a += Kf[idx]; b += Vf[idx];
      }
      wk += (it + 1) * a; wv += (it + 1) * b;
    }
    if ((O[2 * ct] != wk || O[2 * ct + 1] != wv) && bad++ == 0)
      snprintf(first, sizeof first, "first bad consumer thread %d: K %g want %g, V %g want %g", ct, O[2 * ct], wk, O[2 * ct + 1], wv);
  }
  char det[256];
  snprintf(det, sizeof det, "%d tiles, %d/256 consumer threads wrong %s", n_iter, bad, first);
  report("(d) 2-stage K/V mbarrier pipeline (producer WG + 2 consumer WGs, setmaxnreg)", bad == 0, det);
  cudaFree(dK); cudaFree(dV); cudaFree(dO);
}

// =============================================================================== (e) acc mapping
__global__ void __launch_bounds__(128) k_map(const bf16* A, const bf16* B, float* out) {
  extern __shared__ uint8_t sm[];
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  for (int e = threadIdx.x; e < 128 * 64; e += 128) {
    const int r = e / 64, c = e % 64;
    *reinterpret_cast<bf16*>(gbase + fa3::swz_offset(r, c, 128)) = A[e];
    *reinterpret_cast<bf16*>(gbase + 128 * 128 + fa3::swz_offset(r, c, 128)) = B[e];
  }
  fence_proxy_async();
  __syncthreads();
  float d[64];
  fa3::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
    fa3::wgmma_ss<false>(d, fa3::desc_kmajor(base, 128, ks), fa3::desc_kmajor(base + 128 * 128, 128, ks), ks > 0 ? 1 : 0);
  fa3::wgmma_commit();
  fa3::wgmma_wait<0>();
  fa3::fence_regs(d);
  for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = d[i];  // raw register order
}

static void test_e() {
  std::vector<bf16> A(128 * 64, __float2bfloat16(0.f)), B(128 * 64, __float2bfloat16(0.f));
  for (int r = 0; r < 128; ++r) { A[r * 64 + 0] = __float2bfloat16((float)(r % 64)); A[r * 64 + 1] = __float2bfloat16(1.f); }
  for (int c = 0; c < 128; ++c) { B[c * 64 + 0] = __float2bfloat16(256.f); B[c * 64 + 1] = __float2bfloat16((float)c); }
  bf16 *dA, *dB; float* dO;
  CK(cudaMalloc(&dA, A.size() * 2)); CK(cudaMalloc(&dB, B.size() * 2)); CK(cudaMalloc(&dO, 128 * 64 * 4));
  CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
  const int smem = 2 * 128 * 128 + 1024;
  CK(cudaFuncSetAttribute(k_map, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  k_map<<<1, 128, smem>>>(dA, dB, dO);
  CK(cudaGetLastError()); SYNC_OR_DIE();
  std::vector<float> O(128 * 64);
  CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0, shown = 0;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < 64; ++i) {
      const int v = (int)O[t * 64 + i], row = v / 256, col = v % 256;
      if (row != fa3::acc_row(t, i) || col != fa3::acc_col(t, i)) {
        if (shown++ < 8) printf("    thread %d reg %d holds (row %d, col %d); acc_row/acc_col say (%d, %d)\n", t, i, row, col,
                                fa3::acc_row(t, i), fa3::acc_col(t, i));
        ++bad;
      }
    }
  char det[128];
  snprintf(det, sizeof det, "%d/%d registers at the wrong (row, col)", bad, 128 * 64);
  report("(e) accumulator register -> (row, col) mapping (acc_row/acc_col)", bad == 0, det);
  cudaFree(dA); cudaFree(dB); cudaFree(dO);
}

// =============================================================================== (a2) SS, 64-key K tile
// S = Q K^T with K stored as a BN-row tile (chunk stride BN*128) through fa3::wgmma_ss (N = BN).
template <int D, int BN>
__global__ void __launch_bounds__(128) k_ss2(const bf16* A, const bf16* B, float* out) {
  extern __shared__ uint8_t sm[];
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  for (int e = threadIdx.x; e < 128 * D; e += 128) {
    const int r = e / D, c = e % D;
    *reinterpret_cast<bf16*>(gbase + fa3::swz_offset(r, c, 128)) = A[e];
  }
  for (int e = threadIdx.x; e < BN * D; e += 128) {
    const int r = e / D, c = e % D;
    *reinterpret_cast<bf16*>(gbase + 128 * D * 2 + fa3::swz_offset(r, c, BN)) = B[e];
  }
  fence_proxy_async();
  __syncthreads();
  float d[BN / 2];
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
  fa3::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    fa3::wgmma_ss<false>(d, fa3::desc_kmajor(base + 64 * 128, 128, ks),
                        fa3::desc_kmajor(base + 128 * D * 2, BN, ks), ks > 0 ? 1 : 0);
  fa3::wgmma_commit();
  fa3::wgmma_wait<0>();
  fa3::fence_regs(d);
  const int t = threadIdx.x;
  for (int i = 0; i < BN / 2; ++i) out[fa3::acc_row(t, i) * BN + fa3::acc_col(t, i)] = d[i];
}

template <int D, int BN>
static void test_a2(std::mt19937& rng) {
  std::uniform_int_distribution<int> u(-2, 2);
  std::vector<bf16> A(128 * D), B(BN * D);
  std::vector<float> Af(128 * D), Bf(BN * D);
  for (int i = 0; i < 128 * D; ++i) { Af[i] = (float)u(rng); A[i] = __float2bfloat16(Af[i]); }
  for (int i = 0; i < BN * D; ++i) { Bf[i] = (float)u(rng); B[i] = __float2bfloat16(Bf[i]); }
  bf16 *dA, *dB; float* dO;
  CK(cudaMalloc(&dA, A.size() * 2)); CK(cudaMalloc(&dB, B.size() * 2)); CK(cudaMalloc(&dO, 64 * BN * 4));
  CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dO, 0xff, 64 * BN * 4));
  const int smem = (128 + BN) * D * 2 + 1024;
  CK(cudaFuncSetAttribute(k_ss2<D, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  k_ss2<D, BN><<<1, 128, smem>>>(dA, dB, dO);
  CK(cudaGetLastError()); SYNC_OR_DIE();
  std::vector<float> O(64 * BN);
  CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0; char first[160] = "";
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < BN; ++c) {
      float ref = 0;
      for (int k = 0; k < D; ++k) ref += Af[(64 + r) * D + k] * Bf[c * D + k];
      if (O[r * BN + c] != ref && bad++ == 0)
        snprintf(first, sizeof first, "first bad (r=%d,c=%d): got %g want %g", r, c, O[r * BN + c], ref);
    }
  char name[128], det[256];
  snprintf(name, sizeof name, "(a2) SS wgmma_ss N=%d, K tile of %d rows, D=%d (A rows 64-127)", BN, BN, D);
  snprintf(det, sizeof det, "%d/%d wrong %s", bad, 64 * BN, first);
  report(name, bad == 0, det);
  cudaFree(dA); cudaFree(dB); cudaFree(dO);
}

// =============================================================================== (b2) pv_step
// O = P V with P 64 x BN from registers and V a BN-key x DV tile (chunk stride BN*128), through
// fa3::pv_step (N = 128 pieces + an N = 64 piece for an odd chunk count): the kernel's PV.
template <int DV, int BN>
__global__ void __launch_bounds__(128) k_rs2(const float* P, const bf16* V, float* out) {
  extern __shared__ uint8_t sm[];
  const uint32_t base = (fa3::smem_u32(sm) + 1023u) & ~1023u;
  uint8_t* gbase = sm + (base - fa3::smem_u32(sm));
  for (int e = threadIdx.x; e < BN * DV; e += 128) {
    const int r = e / DV, c = e % DV;
    *reinterpret_cast<bf16*>(gbase + fa3::swz_offset(r, c, BN)) = V[e];
  }
  fence_proxy_async();
  __syncthreads();
  const int t = threadIdx.x;
  float s[BN / 2];
  for (int i = 0; i < BN / 2; ++i) s[i] = P[fa3::acc_row(t, i) * BN + fa3::acc_col(t, i)];
  uint32_t pa[BN / 16][4];
  fa3::acc_to_a<false>(s, pa);
  float o[DV / 2];
  for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
  fa3::fence_regs(o);
  fa3::fence_regs(pa);
  fa3::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < BN / 16; ++ks) fa3::pv_step<false, DV, BN>(o, pa[ks], base, ks);
  fa3::wgmma_commit();
  fa3::wgmma_wait<0>();
  fa3::fence_regs(o);
  for (int i = 0; i < DV / 2; ++i) out[fa3::acc_row(t, i) * DV + fa3::acc_col(t, i)] = o[i];
}

template <int DV, int BN>
static void test_b2(std::mt19937& rng) {
  std::uniform_int_distribution<int> u(-2, 2);
  std::vector<float> P(64 * BN), Vf(BN * DV);
  std::vector<bf16> V(BN * DV);
  for (auto& x : P) x = (float)u(rng);
  for (int i = 0; i < BN * DV; ++i) { Vf[i] = (float)u(rng); V[i] = __float2bfloat16(Vf[i]); }
  float *dP, *dO; bf16* dV;
  CK(cudaMalloc(&dP, P.size() * 4)); CK(cudaMalloc(&dV, V.size() * 2)); CK(cudaMalloc(&dO, 64 * DV * 4));
  CK(cudaMemcpy(dP, P.data(), P.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dV, V.data(), V.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dO, 0xff, 64 * DV * 4));
  const int smem = BN * DV * 2 + 1024;
  CK(cudaFuncSetAttribute(k_rs2<DV, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  k_rs2<DV, BN><<<1, 128, smem>>>(dP, dV, dO);
  CK(cudaGetLastError()); SYNC_OR_DIE();
  std::vector<float> O(64 * DV);
  CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0; char first[160] = "";
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < DV; ++c) {
      float ref = 0;
      for (int k = 0; k < BN; ++k) ref += P[r * BN + k] * Vf[k * DV + c];
      if (O[r * DV + c] != ref && bad++ == 0)
        snprintf(first, sizeof first, "first bad (r=%d,c=%d): got %g want %g", r, c, O[r * DV + c], ref);
    }
  char name[128], det[256];
  snprintf(name, sizeof name, "(b2) pv_step DV=%d, V tile of %d keys (LBO=%d)", DV, BN, BN * 128);
  snprintf(det, sizeof det, "%d/%d wrong %s", bad, 64 * DV, first);
  report(name, bad == 0, det);
  cudaFree(dP); cudaFree(dV); cudaFree(dO);
}

// =============================================================================== (f) end to end
// Every feature the v2 fast path takes, against a double-precision CPU reference of kseek.h's
// semantics. K/V rows outside a sequence's valid key range [leftpad, end) are filled with NaN, so a
// kernel that reads them without masking them (or multiplies a NaN V row by P = 0) fails.
struct Cfg {
  int dtype, B, Sq, Sk, Hq, Hkv, D, Dv, causal, wl, wr;
  float softcap;
  int sinks, seqused, leftpad, varlen, expect_fast;
};

template <typename T> static float tof(T x);
template <> float tof<bf16>(bf16 x) { return __bfloat162float(x); }
template <> float tof<__half>(__half x) { return __half2float(x); }
template <typename T> static T fromf(float x);
template <> bf16 fromf<bf16>(float x) { return __float2bfloat16(x); }
template <> __half fromf<__half>(float x) { return __float2half(x); }

template <typename T>
static bool run_cfg(const Cfg& c, std::mt19937& rng, bool quiet = false) {
  const int B = c.B, Hq = c.Hq, Hkv = c.Hkv, D = c.D, Dv = c.Dv;
  const Seqs sl(B, c.Sq, c.Sk, c.varlen, c.seqused, c.leftpad);  // probe_common.cuh
  const std::vector<int>&qlen = sl.qlen, &klen = sl.klen, &cuq = sl.cuq, &cuk = sl.cuk, &kend = sl.kend, &lpad = sl.lpad;
  const int Sq = sl.Sq, Sk = sl.Sk;
  const int64_t rows_q = sl.rows_q, rows_k = sl.rows_k;
  auto qrow = [&](int b, int i) { return sl.qrow(b, i); };
  auto krow = [&](int b, int j) { return sl.krow(b, j); };

  const size_t nq = (size_t)rows_q * Hq * D, nk = (size_t)rows_k * Hkv * D, nv = (size_t)rows_k * Hkv * Dv,
               no = (size_t)rows_q * Hq * Dv, nl = (size_t)rows_q * Hq;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<T> q(nq), k(nk), v(nv), o(no);
  std::vector<float> qf(nq), kf(nk), vf(nv), lse(nl), sinks(Hq);
  for (size_t i = 0; i < nq; ++i) { q[i] = fromf<T>(nd(rng)); qf[i] = tof(q[i]); }
  for (size_t i = 0; i < nk; ++i) { k[i] = fromf<T>(nd(rng)); kf[i] = tof(k[i]); }
  for (size_t i = 0; i < nv; ++i) { v[i] = fromf<T>(nd(rng)); vf[i] = tof(v[i]); }
  for (int h = 0; h < Hq; ++h) sinks[h] = 3.f * nd(rng) + (h % 3 == 0 ? 6.f : 0.f);  // some dominate
  // NaN in every stored key/value row outside [leftpad, end) of its sequence
  const T nanv = fromf<T>(NAN);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < klen[b]; ++j)
      if (j < lpad[b] || j >= kend[b]) {
        for (int x = 0; x < Hkv * D; ++x) k[krow(b, j) * Hkv * D + x] = nanv;
        for (int x = 0; x < Hkv * Dv; ++x) v[krow(b, j) * Hkv * Dv + x] = nanv;
      }
  T *dq, *dk, *dv, *dout; float *dl, *dsink; int32_t *dcuq, *dcuk, *dused, *dlp;
  CK(cudaMalloc(&dq, nq * sizeof(T))); CK(cudaMalloc(&dk, nk * sizeof(T))); CK(cudaMalloc(&dv, nv * sizeof(T)));
  CK(cudaMalloc(&dout, no * sizeof(T))); CK(cudaMalloc(&dl, nl * 4)); CK(cudaMalloc(&dsink, Hq * 4));
  CK(cudaMalloc(&dcuq, (B + 1) * 4)); CK(cudaMalloc(&dcuk, (B + 1) * 4)); CK(cudaMalloc(&dused, B * 4)); CK(cudaMalloc(&dlp, B * 4));
  CK(cudaMemcpy(dq, q.data(), nq * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, k.data(), nk * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, v.data(), nv * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dsink, sinks.data(), Hq * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dcuq, cuq.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dcuk, cuk.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dused, kend.data(), B * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dlp, lpad.data(), B * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, no * sizeof(T))); CK(cudaMemset(dl, 0xff, nl * 4));
  kseek_params p;
  memset(&p, 0, sizeof p);
  p.abi_version = KSEEK_ABI_VERSION; p.dtype = c.dtype; p.out_dtype = c.dtype;
  p.batch = B; p.seqlen_q = Sq; p.seqlen_k = Sk; p.heads_q = Hq; p.heads_kv = Hkv; p.head_dim = D; p.head_dim_v = Dv;
  p.q = dq; p.k = dk; p.v = dv; p.o = dout; p.lse = dl;
  p.q_row_stride = (int64_t)Hq * D; p.q_head_stride = D; p.q_batch_stride = (int64_t)Sq * Hq * D;
  p.k_row_stride = (int64_t)Hkv * D; p.k_head_stride = D; p.k_batch_stride = (int64_t)Sk * Hkv * D;
  p.v_row_stride = (int64_t)Hkv * Dv; p.v_head_stride = Dv; p.v_batch_stride = (int64_t)Sk * Hkv * Dv;
  p.o_row_stride = (int64_t)Hq * Dv; p.o_head_stride = Dv; p.o_batch_stride = (int64_t)Sq * Hq * Dv;
  if (c.varlen) {
    p.cu_seqlens_q = dcuq; p.cu_seqlens_k = dcuk;
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = 0;  // unused
    p.lse_batch_stride = 0; p.lse_head_stride = rows_q;
  } else {
    p.lse_batch_stride = (int64_t)Hq * Sq; p.lse_head_stride = Sq;
  }
  if (c.seqused) p.seqused_k = dused;
  if (c.leftpad) p.leftpad_k = dlp;
  if (c.sinks) p.sinks = dsink;
  p.causal = c.causal; p.window_left = c.wl; p.window_right = c.wr; p.softcap = c.softcap;
  p.scale = 1.f / sqrtf((float)D);
  const int rc = kseek_fwd(&p, 0);
  CK(cudaGetLastError()); SYNC_OR_DIE();
  const int path = fa3::g_last_path;
  CK(cudaMemcpy(o.data(), dout, no * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lse.data(), dl, nl * 4, cudaMemcpyDeviceToHost));

  // CPU reference (probe_common.cuh: double precision, kseek.h semantics)
  const double otol = c.softcap > 0 ? 3e-2 : 2e-2, ltol = c.softcap > 0 ? 2e-2 : 1e-2;
  double max_err = 0, max_lse_err = 0; int bad = 0, empty_rows = 0; char first[240] = "";
  std::vector<double> oref(Dv);
  for (int b = 0; b < B; ++b) for (int h = 0; h < Hq; ++h) {
    const int hk = h / (Hq / Hkv);
    const int sq = qlen[b], sk = std::max(0, kend[b] - lpad[b]);
    for (int i = 0; i < sq; ++i) {
      const float* qr = &qf[qrow(b, i) * Hq * D + (size_t)h * D];
      long lo, hi;
      const bool has = ref_visible(i, sq, sk, c.wl, c.wr, c.causal, &lo, &hi);
      if (!has) ++empty_rows;
      const double lref = ref_row(
          D, Dv, lo, hi, p.scale, c.softcap, c.sinks ? &sinks[h] : nullptr, [&](int d) { return qr[d]; },
          [&](long j, int d) { return kf[krow(b, lpad[b] + j) * Hkv * D + (size_t)hk * D + d]; },
          [&](long j, int d) { return vf[krow(b, lpad[b] + j) * Hkv * Dv + (size_t)hk * Dv + d]; }, oref.data());
      const float lgot = c.varlen ? lse[(size_t)h * rows_q + cuq[b] + i] : lse[((size_t)b * Hq + h) * Sq + i];
      if (!has) { if (!(std::isinf(lgot) && lgot < 0) && bad++ == 0) snprintf(first, sizeof first, "lse (b%d h%d i%d) got %g want -inf", b, h, i, lgot); }
      else { const double e = fabs(lgot - lref); max_lse_err = std::max(max_lse_err, std::isnan(e) ? 1e30 : e);
             if (!(e <= ltol) && bad++ == 0) snprintf(first, sizeof first, "lse (b%d h%d i%d) got %g want %g", b, h, i, lgot, lref); }
      for (int d = 0; d < Dv; ++d) {
        const double ref = oref[d];
        const float got = tof(o[qrow(b, i) * Hq * Dv + (size_t)h * Dv + d]);
        const double e = fabs(got - ref);
        max_err = std::max(max_err, std::isnan(e) ? 1e30 : e);
        if (!(e <= otol + otol * fabs(ref)) && bad++ == 0)
          snprintf(first, sizeof first, "o (b%d h%d i%d d%d) got %g want %g", b, h, i, d, got, ref);
      }
    }
  }
  const bool path_ok = path == c.expect_fast;
  const bool ok = rc == KSEEK_OK && bad == 0 && path_ok;
  char name[300], det[500];
  snprintf(name, sizeof name, "(f) %s B=%d Sq=%d Sk=%d Hq=%d Hkv=%d D=%d Dv=%d causal=%d win=(%d,%d) softcap=%g%s%s%s%s",
           c.dtype == KSEEK_FP16 ? "fp16" : "bf16", B, Sq, Sk, Hq, Hkv, D, Dv, c.causal, c.wl, c.wr, c.softcap,
           c.sinks ? " sinks" : "", c.seqused ? " seqused_k" : "", c.leftpad ? " leftpad_k" : "", c.varlen ? " varlen" : "");
  snprintf(det, sizeof det, "rc=%d path=%s(want %s) max|do|=%.3g max|dlse|=%.3g empty_rows=%d bad=%d %s", rc,
           path == 1 ? "fast" : "fallback", c.expect_fast ? "fast" : "fallback", max_err, max_lse_err, empty_rows, bad, first);
  if (!quiet || !ok) report(name, ok, det);
  cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dl); cudaFree(dsink);
  cudaFree(dcuq); cudaFree(dcuk); cudaFree(dused); cudaFree(dlp);
  return ok;
}

static void test_f(std::mt19937& rng) {
  const int BF = KSEEK_BF16, FP = KSEEK_FP16;
  const Cfg cfgs[] = {
      // dtype, B, Sq, Sk, Hq, Hkv, D, Dv, causal, wl, wr, softcap, sinks, seqused, leftpad, varlen, expect_fast
      // ---- v1's configurations (must still pass) ----
      {BF, 1, 128, 128, 1, 1, 64, 64, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 128, 128, 1, 1, 128, 128, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 128, 384, 1, 1, 128, 128, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 256, 256, 2, 2, 128, 128, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 300, 513, 4, 2, 128, 128, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 300, 513, 4, 2, 64, 64, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 77, 1000, 4, 1, 128, 128, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 333, 100, 2, 1, 64, 64, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 3, 1, 257, 8, 2, 128, 128, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {FP, 2, 300, 513, 4, 2, 128, 128, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {FP, 1, 200, 200, 2, 2, 64, 64, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      // ---- v2: sliding window (tile skipping on both sides), causal + left window ----
      {BF, 2, 300, 513, 4, 2, 128, 128, 0, 100, 50, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 700, 1000, 2, 1, 64, 64, 1, 200, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 1000, 700, 2, 2, 128, 128, 0, 0, 0, 0.f, 0, 0, 0, 0, 1},     // window (0,0): diagonal only, empty rows
      {BF, 1, 256, 256, 2, 2, 128, 128, 0, -1, 130, 0.f, 0, 0, 0, 0, 1},   // right window only
      // ---- softcap ----
      {BF, 2, 300, 513, 4, 2, 128, 128, 1, -1, -1, 30.f, 0, 0, 0, 0, 1},
      {FP, 1, 200, 300, 2, 1, 64, 64, 0, -1, -1, 2.f, 0, 0, 0, 0, 1},      // saturating tanh
      // ---- sinks (incl. rows with no key: Sq > Sk causal) ----
      {BF, 1, 333, 100, 4, 2, 128, 128, 1, -1, -1, 0.f, 1, 0, 0, 0, 1},
      {FP, 2, 129, 640, 6, 2, 64, 64, 0, -1, -1, 0.f, 1, 0, 0, 0, 1},
      // ---- seqused_k / leftpad_k (NaN outside each sequence's keys) ----
      {BF, 3, 1, 700, 8, 2, 128, 128, 1, -1, -1, 0.f, 0, 1, 0, 0, 1},      // decode with cache_seqlens
      {BF, 3, 64, 700, 4, 1, 128, 128, 1, -1, -1, 0.f, 0, 1, 1, 0, 1},
      {FP, 2, 200, 513, 2, 2, 64, 64, 0, -1, -1, 0.f, 0, 0, 1, 0, 1},
      // ---- varlen (one stream sync per call) ----
      {BF, 3, 300, 513, 4, 2, 128, 128, 1, -1, -1, 0.f, 0, 0, 0, 1, 1},
      {BF, 4, 200, 150, 4, 4, 64, 64, 0, -1, -1, 0.f, 0, 0, 0, 1, 1},
      {FP, 3, 257, 400, 4, 2, 128, 128, 1, 64, -1, 10.f, 1, 1, 1, 1, 1},  // varlen + everything
      // ---- head dims 96, 192/128, 192, 256 ----
      {BF, 1, 100, 130, 2, 2, 96, 96, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 300, 513, 4, 2, 96, 96, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 300, 513, 4, 2, 192, 128, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {FP, 1, 200, 384, 2, 1, 192, 128, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 300, 513, 4, 2, 192, 192, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 1, 128, 64, 2, 2, 192, 192, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 300, 513, 4, 2, 256, 256, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {FP, 1, 200, 333, 2, 2, 256, 256, 0, -1, -1, 0.f, 0, 0, 0, 0, 1},
      {BF, 2, 190, 450, 4, 1, 256, 256, 1, 100, -1, 20.f, 1, 1, 1, 0, 1}, // hd256 + everything
      {BF, 3, 150, 300, 2, 1, 192, 128, 0, 40, 40, 0.f, 1, 0, 0, 1, 1},  // hd192/128 varlen window sinks
      // ---- v3 persistent grid: more tiles than SMs (132), so CTAs run several tiles each ----
      {BF, 2, 512, 512, 40, 8, 64, 64, 1, -1, -1, 0.f, 0, 0, 0, 0, 1},    // 320 tiles, causal GQA
      {FP, 3, 384, 300, 48, 16, 128, 128, 0, -1, -1, 0.f, 0, 0, 0, 0, 1}, // 432 tiles, Sq > Sk
      {BF, 5, 400, 450, 40, 8, 128, 128, 1, 64, -1, 0.f, 1, 1, 1, 1, 1},  // varlen: skipped tiles
      {BF, 2, 300, 300, 48, 48, 256, 256, 1, -1, -1, 0.f, 0, 0, 0, 0, 1}, // 288 tiles, hd256
      // v5: BN = 112 (D = Dv = 192) and BN = 80 (256) with partial key tiles, varlen, padding
      {BF, 3, 150, 300, 2, 1, 192, 192, 0, 40, 40, 0.f, 1, 0, 0, 1, 1},  // hd192 varlen window sinks
      {FP, 2, 257, 700, 4, 2, 192, 192, 1, -1, -1, 30.f, 0, 1, 1, 0, 1}, // hd192 causal cap seqused leftpad
      {BF, 3, 333, 555, 2, 2, 256, 256, 1, -1, -1, 0.f, 0, 0, 0, 1, 1},  // hd256 varlen causal
      {BF, 1, 640, 1100, 16, 4, 192, 192, 1, -1, -1, 0.f, 0, 0, 0, 0, 1}, // hd192 GQA, 80 tiles
      // ---- fallback ----
      {BF, 1, 100, 130, 2, 2, 80, 80, 0, -1, -1, 0.f, 0, 0, 0, 0, 0},     // D=80: fallback
      {BF, 1, 100, 130, 2, 2, 64, 128, 1, -1, -1, 0.f, 0, 0, 0, 0, 0},    // D != Dv (not 192/128)
  };
  for (const Cfg& c : cfgs) {
    if (c.dtype == KSEEK_FP16) run_cfg<__half>(c, rng);
    else run_cfg<bf16>(c, rng);
  }
}

// =============================================================================== (g) timing
static void bench(int D, int Dv, int causal, int wl = -1) {
  const int B = 2, S = 4096, H = 16;
  const size_t n = (size_t)B * S * H * D, nv = (size_t)B * S * H * Dv;
  bf16 *q, *k, *v, *o; float* l;
  CK(cudaMalloc(&q, n * 2)); CK(cudaMalloc(&k, n * 2)); CK(cudaMalloc(&v, nv * 2)); CK(cudaMalloc(&o, nv * 2));
  CK(cudaMalloc(&l, (size_t)B * H * S * 4));
  CK(cudaMemset(q, 0x3c, n * 2)); CK(cudaMemset(k, 0x3c, n * 2)); CK(cudaMemset(v, 0x3c, nv * 2));
  kseek_params p; memset(&p, 0, sizeof p);
  p.abi_version = KSEEK_ABI_VERSION; p.dtype = KSEEK_BF16; p.out_dtype = KSEEK_BF16;
  p.batch = B; p.seqlen_q = S; p.seqlen_k = S; p.heads_q = H; p.heads_kv = H; p.head_dim = D; p.head_dim_v = Dv;
  p.q = q; p.k = k; p.v = v; p.o = o; p.lse = l;
  p.q_batch_stride = p.k_batch_stride = (int64_t)S * H * D;
  p.v_batch_stride = p.o_batch_stride = (int64_t)S * H * Dv;
  p.q_row_stride = p.k_row_stride = H * D;
  p.v_row_stride = p.o_row_stride = H * Dv;
  p.q_head_stride = p.k_head_stride = D;
  p.v_head_stride = p.o_head_stride = Dv;
  p.lse_batch_stride = (int64_t)H * S; p.lse_head_stride = S;
  p.causal = causal; p.window_left = wl; p.window_right = -1; p.scale = 1.f / sqrtf((float)D);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) kseek_fwd(&p, 0);
  SYNC_OR_DIE();
  const int iters = 20;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) kseek_fwd(&p, 0);
  CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
  float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ms /= iters;
  // visible pairs (bottom-right causal / left window, Sq = Sk)
  double pairs = 0;
  for (int i = 0; i < S; ++i) {
    long lo = wl >= 0 ? std::max(0, i - wl) : 0, hi = causal ? i : S - 1;
    pairs += (double)(hi - lo + 1);
  }
  const double flops = 2.0 * B * H * pairs * (D + Dv);
  printf("[info] (g) VAR %d bf16 B=%d H=%d S=%d D=%d Dv=%d causal=%d wl=%d path=%s: %.3f ms/call, %.0f TFLOP/s\n",
         fa3::build::kVariant, B, H, S, D, Dv, causal, wl, fa3::g_last_path == 1 ? "fast" : "fallback", ms, flops / ms / 1e9);
  cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(l);
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s (sm_%d%d), %d SMs, smem/block optin %zu\n", prop.name, prop.major, prop.minor,
         prop.multiProcessorCount, prop.sharedMemPerBlockOptin);
  printf("cuTensorMapEncodeTiled entry point: %s\n", fa3::encode_fn() ? "found" : "NOT FOUND");
  print_variant();
  std::mt19937 rng(1234);
  const bool only_f = argc > 1 && strchr(argv[1], 'f');
  if (!only_f) {
    test_a<64>(rng);
    test_a<128>(rng);
    test_b<64>(rng);
    test_b<128>(rng);
    test_c();
    test_d(rng);
    test_e();
    test_a2<128, 64>(rng);   // the S wgmma of the D=256/192 kernels (BN = 64)
    test_a2<64, 64>(rng);
    test_a2<192, 128>(rng);  // 3 K chunks (D = 192, BN = 128)
    test_b2<64, 128>(rng);   // = v1's PV (must match (b))
    test_b2<128, 128>(rng);
    test_b2<128, 64>(rng);   // N = 128 over two 64-key chunks (LBO = 8192)
    test_b2<192, 64>(rng);   // N = 128 + N = 64 pieces
    test_b2<256, 64>(rng);   // two N = 128 pieces
    test_a2<256, 80>(rng);   // v5: the S wgmma of the D=256 kernel (BN = 80, m64n80k16)
    test_a2<192, 112>(rng);  // v5: D = Dv = 192 (BN = 112, m64n112k16)
    test_b2<256, 80>(rng);   // v5: P V with 5 k-steps over 80-key chunks (LBO = 10240)
    test_b2<192, 112>(rng);  // v5: 7 k-steps over 112-key chunks, N = 128 + 64 pieces
  }
  // (f) under the schedule this probe was built for (print_variant says which; the header lists the
  // builds tools/gpu_round.sh makes), then (g) timed unless PROBE_NO_BENCH is set.
  printf("== (f) end to end\n");
  fflush(stdout);
  test_f(rng);
  if (!getenv("PROBE_NO_BENCH")) {  // correctness only (the harness times bench26)
    printf("== (g) timings\n");
    bench(128, 128, 0);
    bench(128, 128, 1);
    bench(64, 64, 0);
    bench(256, 256, 1);
    bench(192, 128, 1);
    bench(128, 128, 1, 1024);
  }
  return finish();
}
