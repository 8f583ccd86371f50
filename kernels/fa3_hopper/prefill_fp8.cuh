// prefill_fp8.cuh: the fp8 e4m3 prefill (fa3::f8::fwd_kernel<D, DV, BN, CW>): q, k, v e4m3 with
// per (batch, KV head) descales, o bf16. Same CTA shape, roles and masking rules as the bf16/fp16
// kernel (one CTA per 128-row query tile, not persistent); its own shared-memory layout, V
// transpose and fp8 wgmma. Host side: the tensor maps and the launch of one instantiation; the
// tile-choice table is in fa3_hopper.cu. Design notes: tests/probes/README_fp8.md.
//
//   * Shared memory tiles of 1-byte elements: a tile of R rows x C bytes is C/CW chunks of R x CW
//     bytes (CW = 128: 128B swizzle, one swizzle atom = 8 rows x 128 B; CW = 64: 64B swizzle,
//     atom 8 rows x 64 B), chunk c at c*R*CW; 16-byte unit u of row r stored at unit
//     u ^ (r % 8) (CW = 128) or u ^ ((r / 2) % 4) (CW = 64): TMA's SWIZZLE_128B / SWIZZLE_64B on
//     a box of CW bytes, and the canonical K-major swizzled layout wgmma reads.
//   * S = Q K^T: wgmma m64n{BN}k32 .e4m3.e4m3 SS, Q and K K-major as loaded (rows = M / N, the
//     head dim = K). One k-step = 32 bytes of a row.
//   * O += P V: fp8 wgmma takes K-major B only, so V ([key][dv] as loaded) is transposed in shared
//     memory by the producer warpgroup (ldmatrix.trans + prmt + stmatrix) into Vt [dv][key slot],
//     one chunk of BN bytes per row (CW = BN), read by wgmma m64nNk32 RS with P (e4m3) in
//     registers. The key order inside each 32-key k-step of Vt is permuted (see vt_key) so that
//     the S accumulator converts to the fp8 A fragment without any shuffle.
//   * Descales: q_descale*k_descale folded into the softmax multipliers (per CTA), v_descale into
//     the epilogue.
#pragma once
#include "prefill_host.cuh"

namespace fa3 {
namespace f8 {

constexpr int kProducerBar = 3;  // named barrier of the producer warpgroup (1, 2: consumers)
// setmaxnreg targets: the producer warpgroup transposes V (all 128 threads), so it gets 40 registers
// instead of 24; the pool at launch is 168 x 384, so consumers get 232 (128*40 + 256*232 = 64512).
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;

// ---- layouts -----------------------------------------------------------------------------------
// Byte offset of (row, col) in a tile of `rows` rows stored in chunks of cw (64 or 128) bytes.
__host__ __device__ __forceinline__ uint32_t swz8(int row, int col, int rows, int cw) {
  const int chunk = col / cw;
  const int in = col & (cw - 1);
  const int x = cw == 128 ? (row & 7) : ((row >> 1) & 3);
  return (uint32_t)(chunk * rows * cw + row * cw + (((in >> 4) ^ x) << 4) + (in & 15));
}

// Key (0..31, relative to the k-step) whose value sits in slot `slot` of a 32-slot k-step of Vt,
// and, equally, the S column that the fp8 A fragment's element `slot` carries (acc_to_a8).
// Slots 4q..4q+3 of each 16-slot half hold keys 2q, 2q+1, 2q+8, 2q+9 of that half: exactly the
// S columns thread q of a quad owns in the f32 accumulator (cols 8j + 2q + {0,1}, j = 0, 1).
__host__ __device__ __forceinline__ int vt_key(int slot) {
  const int half = slot & 16, q = (slot >> 2) & 3, i = slot & 3;
  return half + 2 * q + (i & 1) + 8 * (i >> 1);
}

// ---- wgmma descriptors for 1-byte K-major operands (PTX ISA "Matrix Descriptor Format") --------
// start >> 4 in bits 0-13; LBO (unused for swizzled K-major: a k-step never leaves the swizzle
// row) = 16 B; SBO = 8 rows * cw (next 8-row group); base offset 0 (every chunk is 1024-aligned);
// bits 62-63: 1 = 128B swizzle, 2 = 64B swizzle.
__host__ __device__ __forceinline__ uint64_t desc8(uint32_t saddr, int cw) {
  uint64_t d = (uint64_t)((saddr & 0x3FFFF) >> 4);
  d |= (uint64_t)1 << 16;
  d |= (uint64_t)((8 * cw) >> 4) << 32;
  d |= (uint64_t)(cw == 128 ? 1 : 2) << 62;
  return d;
}
// k-step ks (bytes 32ks..32ks+31 of every row) of a K-major tile of `rows` rows in cw chunks.
// Inside a swizzle row the step is a plain +32 on the start address (the XOR uses address bits).
__host__ __device__ __forceinline__ uint64_t desc8_k(uint32_t tile, int rows, int ks, int cw) {
  const int kb = 32 * ks;
  return desc8(tile + (uint32_t)((kb / cw) * rows * cw + (kb % cw)), cw);
}

// ---- fp8 wgmma (m64nNk32, f32 += e4m3 * e4m3; fp8 has no transpose immediates) ----------------
// SS: D[64 x N] (+)= A[64 x 32] (desc) * B[32 x N] (desc, K-major); N = 64 or 128
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  FA3_WGMMA("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n", "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
            64, ", %64, %65, p, 1, 1;\n}\n", "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  FA3_WGMMA("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n", "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3",
            32, ", %32, %33, p, 1, 1;\n}\n", "l"(da), "l"(db), "r"(scale_d));
}
// RS: D[64 x N] += A[64 x 32] (4 x b32 = 16 e4m3 per thread) * B[32 x N] (desc, K-major)
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
  FA3_WGMMA("", "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", 64, ", {%64,%65,%66,%67}, %68, 1, 1, 1;\n",
            "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
  FA3_WGMMA("", "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3", 32, ", {%32,%33,%34,%35}, %36, 1, 1, 1;\n",
            "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// ---- P (f32 accumulator) -> fp8 A fragments ----------------------------------------------------
// Four floats to one .b32 of four e4m3 (x0 in the low byte). cvt ... e4m3x2.f32 d, a, b puts a in
// the upper byte and b in the lower one. P is in [0, 1]: satfinite never clips it.
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
  return r;
}
// The fp8 A fragment of wgmma m64nNk32 (like mma.m16n8k32's per warp): a[0] = row r, k 4q..4q+3;
// a[1] = row r+8, k 4q..4q+3; a[2] = row r, k 16+4q..; a[3] = row r+8, k 16+4q.. (r = 16*warp +
// lane/4, q = lane%4, low byte = lowest k). With the slot -> key order of vt_key, k-step kk of a
// 64 x N S accumulator is its elements 16kk..16kk+15 in this order (no data leaves the thread).
template <int NS>
__device__ __forceinline__ void acc_to_a8(const float (&s)[NS], uint32_t (&a)[NS / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < NS / 16; ++kk) {
    const float* x = &s[16 * kk];
    a[kk][0] = pack_e4m3x4(x[0], x[1], x[4], x[5]);
    a[kk][1] = pack_e4m3x4(x[2], x[3], x[6], x[7]);
    a[kk][2] = pack_e4m3x4(x[8], x[9], x[12], x[13]);
    a[kk][3] = pack_e4m3x4(x[10], x[11], x[14], x[15]);
  }
}

// bytes of keys >= zr (rows past the sequence's end: may be NaN, and 0 * NaN = NaN in the MMA).
__device__ __forceinline__ uint32_t mask_keys(uint32_t r, int k, int zr) {
  return k >= zr ? 0u : (k + 1 >= zr ? (r & 0xFFFFu) : r);
}

// One warp's share of transposing a raw V tile (BN keys x DV bytes, chunks of CW bytes) into Vt
// (DV rows x BN key slots, one chunk of BN bytes). Work unit: 32 keys x 16 dv.
//   ldmatrix.x4.trans, matrix m = keys 32g+8m..+7 x dv 16h..16h+15 (lane t gives the row of key
//     32g+t): lane (p = t/4, q = t%4) gets r_m = {V[k][2p], V[k][2p+1], V[k+1][2p], V[k+1][2p+1]}
//     (dv relative to 16h, k = 32g + 8m + 2q);
//   prmt: w0 = {r0.b0, r0.b2, r1.b0, r1.b2} = Vt[16h+2p][slots 32g+4q..+3] (keys 2q, 2q+1, 2q+8,
//     2q+9: vt_key), w1 = same for row 16h+2p+1 (bytes 1, 3), w2/w3 = the same from r2/r3 for
//     slots 32g+16+4q..;
//   stmatrix.x4 (no trans): matrix j's row p is Vt row 16h + 2p + ((j&1) ^ (p>=4)), slots
//     32g + 16(j>>1)..+15 (lane t supplies the address of row t%8 of matrix t/8). Rows p >= 4 take
//     the odd row in matrices 0/2 (the prmt selectors swap w0/w1 for lanes 16..31) so that the 8
//     rows of one matrix fall in 8 different 16-byte bank groups of the swizzled Vt (with rows
//     16h+2p only, rows p and p+4 would share a group: a 2-way bank conflict on every store).
// zr < BN: keys zr..BN-1 are written as zeros.
template <int DV, int BN, int CW>
__device__ __forceinline__ void transpose_v(uint32_t raw, uint32_t vt, int warp, int lane, int zr) {
  constexpr int HB = DV / 16;
  constexpr int NBLK = (BN / 32) * HB;
  static_assert(NBLK % 4 == 0, "blocks split evenly over the 4 producer warps");
  const int q2 = 2 * (lane & 3);
  const int srow = 2 * (lane & 7) + (((lane >> 3) & 1) ^ ((lane >> 2) & 1));  // stmatrix row in 16 dv rows
  const int sslot = 16 * (lane >> 4);                                        // stmatrix slot in 32 slots
  const uint32_t sel_e = lane < 16 ? 0x6420u : 0x7531u;  // register for matrices 0/2: even row (p < 4)
  const uint32_t sel_o = lane < 16 ? 0x7531u : 0x6420u;  // matrices 1/3: odd row (p < 4)
#pragma unroll 1  // the producer has 40 registers: keep one block's state live at a time
  for (int i = 0; i < NBLK / 4; ++i) {
    const int blk = warp + 4 * i;
    const int g = blk / HB, h = blk - g * HB;
    uint32_t r[4];
    ldsm_x4_trans(r, raw + swz8(32 * g + lane, 16 * h, BN, CW));
    uint32_t r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
    if (zr < BN) {
      const int k = 32 * g + q2;
      r0 = mask_keys(r0, k, zr);
      r1 = mask_keys(r1, k + 8, zr);
      r2 = mask_keys(r2, k + 16, zr);
      r3 = mask_keys(r3, k + 24, zr);
    }
    stsm_x4(vt + swz8(16 * h + srow, 32 * g + sslot, DV, BN), prmt(r0, r1, sel_e), prmt(r0, r1, sel_o),
            prmt(r2, r3, sel_e), prmt(r2, r3, sel_o));
  }
}

// O (+)= P V for one 32-key k-step: N = 128 pieces over 128-row groups of Vt, plus an N = 64 piece
// (DV = 64, 192). O columns 128c.. are o[64c..64c+63] (acc_col: 8 columns per 4 elements).
template <int DV, int BN>
__device__ __forceinline__ void pv_step(float (&o)[DV / 2], const uint32_t (&pa)[4], uint32_t vt, int ks) {
  constexpr int NC = DV / 128;
#pragma unroll
  for (int c = 0; c < NC; ++c)
    wgmma_rs_e4m3(*reinterpret_cast<float(*)[64]>(&o[64 * c]), pa, desc8(vt + (uint32_t)(c * 128 * BN + 32 * ks), BN));
  if constexpr (DV % 128 == 64)
    wgmma_rs_e4m3(*reinterpret_cast<float(*)[32]>(&o[64 * NC]), pa, desc8(vt + (uint32_t)(NC * 128 * BN + 32 * ks), BN));
}

// ---- the kernel ----------------------------------------------------------------------------------
template <int D, int DV, int BN>
struct Smem {
  static constexpr int kQBytes = kBM * D;
  static constexpr int kKBytes = BN * D;    // one stage of K
  static constexpr int kVBytes = BN * DV;   // one stage of raw V (TMA)
  static constexpr int kVtBytes = DV * BN;  // one stage of transposed V (wgmma B)
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV = kK + kStages * kKBytes;
  static constexpr int kVt = kV + kStages * kVBytes;
  static constexpr int kBar = kVt + kStages * kVtBytes;
  // barriers: q_full, k_full[2], v_full[2] (raw V landed), k_empty[2], vt_full[2], vt_empty[2]
  static constexpr int kBarQ = kBar, kBarKF = kBar + 8, kBarVF = kBar + 24, kBarKE = kBar + 40,
                       kBarTF = kBar + 56, kBarTE = kBar + 72;
  static constexpr int kTotal = kBar + 128 + 1024;
  static_assert(kQBytes % 1024 == 0 && kKBytes % 1024 == 0 && kVBytes % 1024 == 0 && kVtBytes % 1024 == 0,
                "every tile and chunk starts on a 1024-byte boundary");
  static_assert(kTotal <= 227 * 1024, "shared memory per block");
};

struct Descales {
  const float* q;  // [B, Hkv] at b * bs + hkv, or NULL (= 1)
  const float* k;
  const float* v;
  int64_t bs;
};

// This CTA's sequence and key-tile range (same rules as fa3::fwd_kernel). Computed separately by
// each role after setmaxnreg (from global loads after __syncthreads, so the compiler cannot share
// them across the split): values live across setmaxnreg.dec would have to fit the producer's
// register budget, and ptxas spilled them when they were computed once before the split.
struct Seq {
  int sq, q_row0, k_row0, sk, diag, n_max, n_cnt;
};
template <int BN>
__device__ __forceinline__ Seq seq_range(const Args& a, int b, int m0) {
  Seq s;
  int cap = a.sk;
  s.sq = a.sq;
  s.q_row0 = s.k_row0 = 0;
  if (a.cu_q) {
    s.q_row0 = a.cu_q[b];
    s.sq = a.cu_q[b + 1] - s.q_row0;
    s.k_row0 = a.cu_k[b];
    cap = a.cu_k[b + 1] - s.k_row0;
  }
  const int kend = a.seqused ? a.seqused[b] : cap;
  const int lp = a.leftpad ? a.leftpad[b] : 0;
  s.k_row0 += lp;                  // TMA row coordinate of key j' = 0
  s.sk = max(0, kend - lp);        // effective key length Sk_b
  s.diag = s.sk - s.sq;            // key position of query row 0 (bottom-right alignment)
  const int row_last = min(m0 + kBM, s.sq) - 1;
  int lo = 0, hi = s.sk - 1;
  if (a.wl >= 0) lo = max(lo, m0 + s.diag - a.wl);
  if (a.wr >= 0) hi = min(hi, row_last + s.diag + a.wr);
  if (a.chunk > 0) {  // chunked local attention: the chunks of the tile's first and last rows
    lo = max(lo, chunk_lo(m0 + s.diag, a.chunk));
    hi = min(hi, chunk_lo(row_last + s.diag, a.chunk) + a.chunk - 1);
  }
  s.n_max = hi >= lo ? hi / BN + 1 : 0;
  s.n_cnt = hi >= lo ? s.n_max - lo / BN : 0;
  return s;
}

// D = padded q/k head dim, DV = padded v head dim (multiples of 64), BN = keys per tile (128, or
// 64 for DV >= 192), CW = chunk width of Q, K and raw V (128 when D and DV are multiples of 128,
// else 64). Same CTA shape, roles and masking rules as fa3::fwd_kernel.
template <int D, int DV, int BN, int CW>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ Args a,
               const __grid_constant__ Descales ds) {
  static_assert(D % CW == 0 && DV % CW == 0 && (CW == 64 || CW == 128), "chunking");
  static_assert(BN == 64 || BN == 128, "Vt rows are one swizzle chunk of BN bytes");
  constexpr int NS = BN / 2;
  using L = Smem<D, DV, BN>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::kQ, sK = base + L::kK, sV = base + L::kV, sVt = base + L::kVt;
  const uint32_t bar_q = base + L::kBarQ;

  const int m_block = (int)(gridDim.x - 1 - blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int m0 = m_block * kBM;
  // Varlen: this sequence may be shorter than the max (uniform over the CTA, before any barrier).
  if (m0 >= (a.cu_q ? a.cu_q[b + 1] - a.cu_q[b] : a.sq)) return;

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(base + L::kBarKF + 8 * s, 1);
      mbar_init(base + L::kBarVF + 8 * s, 1);
      mbar_init(base + L::kBarKE + 8 * s, kConsumerWarps);
      mbar_init(base + L::kBarTF + 8 * s, 128);  // every producer thread, after its stmatrix + fence
      mbar_init(base + L::kBarTE + 8 * s, kConsumerWarps);
    }
    fence_mbar_init();
  }
  __syncthreads();

  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    // ---------------------------------------------- producer warpgroup: TMA (thread 0) + V transpose
    setmaxnreg_dec<kProducerRegs>();
    const Seq S = seq_range<BN>(a, b, m0);
    if (S.n_cnt > 0) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      const int hkv = h / a.group, tb = a.cu_q ? 0 : b;
      if (threadIdx.x == 0) {
        prefetch_tmap(&tq);
        prefetch_tmap(&tk);
        prefetch_tmap(&tv);
        mbar_arrive_expect_tx(bar_q, L::kQBytes);
#pragma unroll
        for (int c = 0; c < D / CW; ++c) tma_tile(sQ + c * kBM * CW, &tq, bar_q, CW * c, S.q_row0 + m0, h, tb, a.q_swap);
      }
      // Tile j (K and raw V) is loaded one iteration ahead of its transpose. Raw V stage j&1 was
      // last read by the transpose of tile j-2, which every producer thread finished before the
      // named barrier that ends iteration j-2 (so no empty barrier is needed for raw V).
      for (int it = -1; it < S.n_cnt; ++it) {
        const int j = it + 1;
        if (threadIdx.x == 0 && j < S.n_cnt) {
          const int n_block = S.n_max - 1 - j;
          const int stage = j & 1;
          const uint32_t ph = (j >> 1) & 1;
          const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
          mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
          mbar_arrive_expect_tx(kf, L::kKBytes);
#pragma unroll
          for (int c = 0; c < D / CW; ++c)
            tma_tile(sK + stage * L::kKBytes + c * BN * CW, &tk, kf, CW * c, S.k_row0 + n_block * BN, hkv, tb,
                     a.k_swap);
          mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
          for (int c = 0; c < DV / CW; ++c)
            tma_tile(sV + stage * L::kVBytes + c * BN * CW, &tv, vf, CW * c, S.k_row0 + n_block * BN, hkv, tb,
                     a.v_swap);
        }
        if (it < 0) continue;
        const int stage = it & 1;
        const uint32_t ph = (it >> 1) & 1;
        const int n0 = (S.n_max - 1 - it) * BN;
        mbar_wait(base + L::kBarVF + 8 * stage, ph);      // raw V landed
        mbar_wait(base + L::kBarTE + 8 * stage, ph ^ 1);  // consumers done with Vt[stage]
        const int zr = (a.vzero && n0 + BN > S.sk) ? max(0, S.sk - n0) : BN;
        __syncwarp();  // ldmatrix/stmatrix are .sync.aligned: warp 0 reconverges after thread 0's TMA work
        transpose_v<DV, BN, CW>(sV + stage * L::kVBytes, sVt + stage * L::kVtBytes, warp, lane, zr);
        fence_proxy_async_smem();  // generic-proxy stmatrix writes -> visible to wgmma (async proxy)
        mbar_arrive(base + L::kBarTF + 8 * stage);
        named_bar_sync(kProducerBar, 128);  // raw V[stage] fully read before thread 0 refills it
      }
    }
  } else {
    // ---------------------------------------------- consumer warpgroups
    setmaxnreg_inc<kConsumerRegs>();
    const Seq S = seq_range<BN>(a, b, m0);
    const int hkv = h / a.group;
    const int sk = S.sk, sq = S.sq, diag = S.diag, n_max = S.n_max, n_cnt = S.n_cnt, q_row0 = S.q_row0;
    const int cw = wg - 1;
    const int t = threadIdx.x & 127;
    const int lane = t & 31;
    const int row0 = m0 + 64 * cw + acc_row(t, 0);

    // descales (per batch and KV head): q*k folded into the softmax multipliers when it is positive
    // and finite; otherwise (zero, negative, inf/NaN) applied to the raw scores instead.
    const int64_t di = (int64_t)b * ds.bs + hkv;
    const float qk = (ds.q ? ds.q[di] : 1.f) * (ds.k ? ds.k[di] : 1.f);
    const float vdesc = ds.v ? ds.v[di] : 1.f;
    const bool fold = qk > 0.f && qk < INFINITY;
    float scale_log2 = a.scale_log2, lse_mul = a.lse_mul, cap_in = a.cap_in;
    if (fold) {
      if (a.softcap_on) cap_in *= qk;
      else {
        scale_log2 *= qk;
        lse_mul *= qk;
      }
    }

    int klo[2], khi[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      khi[r] = sk - 1;
      if (a.wr >= 0) khi[r] = min(khi[r], row + diag + a.wr);
      klo[r] = a.wl >= 0 ? row + diag - a.wl : 0;
      if (a.chunk > 0) {  // the row's own chunk
        const int c0 = chunk_lo(row + diag, a.chunk);
        klo[r] = max(klo[r], c0);
        khi[r] = min(khi[r], c0 + a.chunk - 1);
      }
    }

    float o[DV / 2];
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY};
    float l_run[2] = {0.f, 0.f};

    if (n_cnt > 0) mbar_wait(bar_q, 0);
    const uint32_t sQw = sQ + cw * 64 * CW;  // this warpgroup's 64 rows inside each chunk
    for (int it = 0; it < n_cnt; ++it) {
      const int n0 = (n_max - 1 - it) * BN;
      const int stage = it & 1;
      const uint32_t ph = (it >> 1) & 1;

      // ---- S = Q K^T (64 x BN per warpgroup), fp8 ----
      float s[NS];
      mbar_wait(base + L::kBarKF + 8 * stage, ph);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < D / 32; ++ks)
        wgmma_ss_e4m3(s, desc8_k(sQw, kBM, ks, CW), desc8_k(sK + stage * L::kKBytes, BN, ks, CW), ks > 0 ? 1 : 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(s);
      __syncwarp();
      if (lane == 0) mbar_arrive(base + L::kBarKE + 8 * stage);

      if (!fold) {
#pragma unroll
        for (int i = 0; i < NS; ++i) s[i] *= qk;
      }
      if (a.softcap_on) {
#pragma unroll
        for (int i = 0; i < NS; ++i) s[i] = a.cap_out * tanh_approx(s[i] * cap_in);
      }
      if (n0 + BN > sk || (a.wr >= 0 && n0 + BN - 1 > m0 + diag + a.wr) ||
          (a.wl >= 0 && n0 < m0 + kBM - 1 + diag - a.wl) || a.chunk > 0) {  // chunked: every block (bf16 path)
#pragma unroll
        for (int i = 0; i < NS; ++i) {
          const int col = n0 + acc_col(t, i);
          const int r = (i >> 1) & 1;
          if (col > khi[r] || col < klo[r]) s[i] = -INFINITY;
        }
      }

      // ---- online softmax ----
      float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
      for (int j = 0; j < NS / 4; ++j) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      }
      float sub[2], corr[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        sub[r] = mx[r] == -INFINITY ? 0.f : mx[r] * scale_log2;
        corr[r] = ex2(m_run[r] * scale_log2 - sub[r]);
        m_run[r] = mx[r];
        l_run[r] *= corr[r];
      }
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) {
        o[4 * j] *= corr[0];
        o[4 * j + 1] *= corr[0];
        o[4 * j + 2] *= corr[1];
        o[4 * j + 3] *= corr[1];
      }
#pragma unroll
      for (int j = 0; j < NS / 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          s[4 * j + e] = ex2(fmaf(s[4 * j + e], scale_log2, -sub[r]));
          l_run[r] += s[4 * j + e];
        }
      }
      uint32_t pa[BN / 32][4];
      acc_to_a8(s, pa);

      // ---- O += P V (Vt from the producer's transpose) ----
      const uint32_t vts = sVt + stage * L::kVtBytes;
      mbar_wait(base + L::kBarTF + 8 * stage, ph);
      fence_regs(o);
      fence_regs(pa);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < BN / 32; ++ks) pv_step<DV, BN>(o, pa[ks], vts, ks);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(base + L::kBarTE + 8 * stage);
    }

    // ---- epilogue (as fa3::fwd_kernel; v_descale folded into 1/l) ----
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    __nv_bfloat16* obase = (__nv_bfloat16*)a.o + (a.cu_q ? (int64_t)q_row0 * a.o_rs : (int64_t)b * a.o_bs) +
                           (int64_t)h * a.o_hs;
    float* lbase = a.lse ? a.lse + (a.cu_q ? (int64_t)q_row0 : (int64_t)b * a.lse_bs) + (int64_t)h * a.lse_hs
                         : nullptr;
    const float sink = a.sinks ? a.sinks[h] : 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row < sq) {
        float inv = 0.f, lse = -INFINITY;
        if (l_run[r] > 0.f) {
          const float m_nat = m_run[r] * lse_mul;
          if (a.sinks) {
            const float mn = fmaxf(m_nat, sink);
            const float e = expf(m_nat - mn);
            const float den = l_run[r] * e + expf(sink - mn);
            inv = vdesc * e / den;
            lse = mn + logf(den);
          } else {
            inv = vdesc / l_run[r];
            lse = m_nat + logf(l_run[r]);
          }
        }
        __nv_bfloat16* orow = obase + (int64_t)row * a.o_rs + 2 * (t & 3);
#pragma unroll
        for (int j = 0; j < DV / 8; ++j)
          if (8 * j < a.dv)
            *reinterpret_cast<uint32_t*>(orow + 8 * j) = pack2<false>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
        if (lbase && (t & 3) == 0) lbase[row] = lse;
      }
    }
  }
}

// ---- host side -------------------------------------------------------------------------------------
// Tensor map of a [B, S, H, Dtot] 1-byte tensor with a box of cw bytes x `rows` rows of one head and
// batch, swizzle 128B (cw 128) or 64B (cw 64); see make_map_4d.
inline bool make_map(CUtensorMap* map, const void* ptr, int64_t dtot, int64_t s, int64_t h, int64_t bsz,
                     int64_t rs, int64_t hs, int64_t bs, int rows, int cw, int* swap) {
  return make_map_4d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, ptr, dtot, s, h, bsz, rs, hs, bs, cw, rows,
                     cw == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, swap);
}

// Does the fp8 kernel take this call? The same rules as fa3::fast_ok apart from the dtypes (TMA's
// 16-byte stride rule is checked by make_map: strides multiples of 16 elements).
inline bool fast_ok(const kseek_params* p) {
  if (p->dtype != KSEEK_FP8_E4M3 || p->out_dtype != KSEEK_BF16) return false;
  if (p->page_table) return false;  // (the fp8 producer reads dense or packed keys only)
  if ((p->cu_seqlens_q == nullptr) != (p->cu_seqlens_k == nullptr)) return false;  // half packed
  return prefill_ok(p);
}

template <int D, int DV, int BN, int CW>
int launch(const kseek_params* p, cudaStream_t stream, int64_t rows_q, int64_t rows_k) {
  CUtensorMap tq, tk, tv;
  Args a;
  const bool varlen = p->cu_seqlens_q != nullptr;
  const int64_t nb = varlen ? 1 : p->batch;
  if (!make_map(&tq, p->q, p->head_dim, rows_q, p->heads_q, nb, p->q_row_stride, p->q_head_stride,
                p->q_batch_stride, kBM, CW, &a.q_swap) ||
      !make_map(&tk, p->k, p->head_dim, rows_k, p->heads_kv, nb, p->k_row_stride, p->k_head_stride,
                p->k_batch_stride, BN, CW, &a.k_swap) ||
      !make_map(&tv, p->v, p->head_dim_v, rows_k, p->heads_kv, nb, p->v_row_stride, p->v_head_stride,
                p->v_batch_stride, BN, CW, &a.v_swap))
    return -1;
  fill_args(p, varlen, a);
  Descales ds;
  ds.q = p->q_descale;
  ds.k = p->k_descale;
  ds.v = p->v_descale;
  ds.bs = p->descale_batch_stride;

  constexpr int smem = Smem<D, DV, BN>::kTotal;
  static int attr_done[kMaxDev] = {0};
  if (!smem_opt_in(fwd_kernel<D, DV, BN, CW>, smem, attr_done)) return -1;
  const dim3 grid((unsigned)((p->seqlen_q + kBM - 1) / kBM), (unsigned)p->heads_q, (unsigned)p->batch);
  fwd_kernel<D, DV, BN, CW><<<grid, kThreads, smem, stream>>>(tq, tk, tv, a, ds);
  return launch_status(cudaGetLastError());
}

// Instantiations: CW = 128 needs D and DV multiples of 128 (and unpadded: a 128-byte box over a

}  // namespace f8
}  // namespace fa3
