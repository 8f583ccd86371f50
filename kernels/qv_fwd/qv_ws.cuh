// qv_ws.cuh: the long-sequence kernel of the qv forward, warp-specialized (sequences with > 64 rows per
// KV head: prefill chunks; the default since v19). Design: kernels/qv_fwd/qv_fwd.cu; Hopper building blocks
// from kernels/fa3_hopper/hopper_primitives.cuh (128B-swizzled chunks, descriptors, mbarriers, wgmma).
//
// Why not qv_wgmma.cuh's form: there both warpgroups compute half of S per 32-key block and sum the halves
// through shared memory, in lockstep, with the loads, the softmax and the MMAs one after the other (16-18%
// of the tensor rate on s08's prefill chunks). Here, as FlashAttention-3 does for a value dim over 256:
//   warpgroup 0 (producer): the [q, qv] tile once by cp.async; each 64-key block's K into a ring of K stages
//     and its V into a ring of V stages (v21: separate rings, as FA3 has, so a K stage is refilled as soon
//     as S is done and three V stages fit at Dv 512 without qv), by TMA (thread 0: one box per 64-column
//     chunk, of 64 rows or of a page's gcd(64, page size) rows, completing on the stage's mbarrier), by
//     cp.async where TMA cannot take it (the partial last block: zeros past the keys' end; a paged block not
//     box-aligned; maps the driver refuses);
//   warpgroup 1 (S): S = [q, qv] . [k, v]^T for all 64 rows (wgmma m64n64k16, both operands in shared
//     memory), the masks and the online softmax; P (16-bit) and each row's rescale factor go to shared
//     memory for warpgroup 2; O[:, :Dv/2] += P V (P from registers). Per block S(i), softmax, P V(i), as FA3
//     runs a value dim over 256; with OVL (an A/B form since v21: CfgS::kOverlapAuto) it issues S(i), then
//     P V of block i - 1, and runs the softmax of block i while that P V is on the tensor cores (v20);
//   warpgroup 2 (PV): per block, O[:, Dv/2:] *= alpha, += P V with P read from shared memory.
// Named barrier 1: P and alpha of a block are ready (S -> PV); 2: the P buffer is free again (PV -> S).
// A K stage is free once S is done (mbarrier `kempty`, one arrive per warpgroup-1 warp), a V stage once
// both consumers' P V wgmmas that read it completed (`vempty`, one arrive per consumer warp). Rows past
// the sequence and keys past its end are zeros in shared memory and masked.
#pragma once
#include "../fa3_hopper/hopper_primitives.cuh"
#include "qv_common.cuh"

namespace qv {

// O (64 x 128 per call) += A (64 x 16, shared memory, K-major) * B (16 x 128, shared memory, N-major):
// wgmma with trans-b (hopper_primitives' wgmma_ss is K-major B only).
template <bool F16>
__device__ __forceinline__ void wgmma_ss_tb128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (F16)
    FA3_WGMMA("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n", "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", 64,
              ", %64, %65, p, 1, 1, 0, 1;\n}\n", "l"(da), "l"(db), "r"(scale_d));
  else
    FA3_WGMMA("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n", "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
              64, ", %64, %65, p, 1, 1, 0, 1;\n}\n", "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void cp_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// The same without .noinc: the pending count is raised now and lowered when this thread's copies land.
__device__ __forceinline__ void cp_mbar_arrive_inc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// K and V tensor maps of a qv_ws launch (box: 64 columns x `box` rows; a paged cache's box stays in a
// page: gcd(64, page_size) rows). on = 0: every block by cp.async (maps refused, or the A/B switch).
struct TmaKV {
  CUtensorMap k, v;
  int on, box, k_swap, v_swap;
};

template <int Dv, bool QV>
struct CfgS {
  static constexpr int kM = 64, kN = 64, kThreads = 384;
  static constexpr int kVChunks = Dv / 64;                // 64-column chunks of a V row
  static constexpr int kQChunks = QV ? 1 + kVChunks : 1;  // of a [q, qv] row (q alone without qv)
  static constexpr int kQ = kM * 128 * kQChunks;          // bytes (multiples of 1024: the swizzle atoms)
  static constexpr int kKStage = kN * 128;                // one 64-key K block (D 64)
  static constexpr int kVStage = kN * 128 * kVChunks;     // one 64-key V block
  static constexpr int kP = kM * kN * 2;                   // P, 16-bit, one 64-column chunk
  static constexpr int kFixed = kQ + kP + 2 * kM * 4 + 256 + 1024;   // + alpha, l, barriers, alignment slack
  static constexpr int kAvail = 227 * 1024 - kFixed;
  // K and V have rings of their own (v21): a K block is freed when S is done, a V block when both P V
  // halves are; at Dv 512 without qv three V blocks fit (two in one [k, v] ring)
  static constexpr int kVS0 = (kAvail - 2 * kKStage) / kVStage;
  static constexpr int kVStages = kVS0 >= 4 ? 4 : kVS0;
  static constexpr int kKS0 = (kAvail - kVStages * kVStage) / kKStage;
  static constexpr int kKStages = kKS0 >= 4 ? 4 : kKS0;
  static constexpr int kOffK = kQ;
  static constexpr int kOffV = kOffK + kKStages * kKStage;
  static constexpr int kOffP = kOffV + kVStages * kVStage;
  static constexpr int kOffAlpha = kOffP + kP;            // float[64]: this block's rescale factor per row
  static constexpr int kOffL = kOffAlpha + kM * 4;        // float[64]: the final row sums
  static constexpr int kOffBar = kOffL + kM * 4;          // qfull, kfull[], kempty[], vfull[], vempty[]
  static constexpr int kSmem = kOffBar + 8 * (1 + 2 * kKStages + 2 * kVStages) + 1024;
  static constexpr int kNB = Dv / 256;                    // n128 wgmmas per consumer per k16 step of P V
  static constexpr int kWgChunk = Dv / 128;               // 64-column V chunks per consumer
  // warpgroup 1's intra-warpgroup overlap (P V(i - 1) under softmax(i)) holds V(i - 1) through block i: with
  // qv (S(i + 1) reads V(i + 1) too) and two V stages it exposes every V load (s08's chunks 0.40 ms against
  // 0.33 serial, session 21), and without qv it gained nothing once O's rescale was skipped (dv512 0.053 ms
  // against 0.046 serial, dv256_d64 0.036 both): off everywhere, `kseek_qv_set_big_kernel(4)` for A/B
  static constexpr bool kOverlapAuto = false;
  static_assert(kVStages >= 2 && kKStages >= 2, "two stages at least");
  static_assert(kSmem <= 227 * 1024, "shared memory");
};

// Varlen: CTA c takes the c-th 64-row tile of the sequences with more than kSmallRows rows (the split kernel
// takes the others), sequence by sequence, each sequence's last (causal: longest) tile first. So the grid is
// ~total rows / 64 CTAs, not batch x the longest sequence's tiles: in a serving step of 2 prefill chunks and
// 128 decodes, 16k CTAs of which 16k would only look up their sequence and exit. All threads of the CTA scan
// the batch's row counts, blockDim.x sequences at a time (scratch: 18 ints of shared memory). False: no tile.
template <int kM>
__device__ __forceinline__ bool find_tile(const kseek_params& p, int G, int c, int* scratch, int& b, int& m0) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  int base = 0;   // tiles of the sequences before this round
  for (int b0 = 0; b0 < p.batch; b0 += blockDim.x) {
    const int bb = b0 + tid;
    int cnt = 0;
    if (bb < p.batch) {
      const int mbb = (p.cu_seqlens_q[bb + 1] - p.cu_seqlens_q[bb]) * G;
      cnt = mbb > kSmallRows ? (mbb + kM - 1) / kM : 0;
    }
    int v = cnt;   // inclusive scan over the warp, then over the warps' sums
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += n;
    }
    if (tid == 0) scratch[16] = -1;
    if (lane == 31) scratch[warp] = v;
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < nw; ++w) {
      const int x = scratch[w];
      before += w < warp ? x : 0;
      total += x;
    }
    const int hi = base + before + v, lo = hi - cnt;
    if (cnt && c >= lo && c < hi) {   // exactly one thread
      scratch[16] = bb;
      scratch[17] = hi - 1 - c;      // the sequence's tiles last first
    }
    __syncthreads();
    const int found = scratch[16], tile = scratch[17];
    __syncthreads();                 // scratch is rewritten by the next round (and later by the kernel)
    if (found >= 0) {
      b = found;
      m0 = tile * kM;
      return true;
    }
    base += total;
    if (base > c) break;
  }
  return false;
}

constexpr int kProducerRegs = 40, kConsumerRegs = 232;   // 128 * 40 + 256 * 232 <= 64K registers

template <typename T, int Dv, bool QV, bool OVL>
__global__ void __launch_bounds__(384, 1)
    qv_attn_ws(const __grid_constant__ kseek_params p, const __grid_constant__ Args a,
               const __grid_constant__ TmaKV tm) {
  using C = CfgS<Dv, QV>;
  constexpr bool F16 = std::is_same<T, __half>::value;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sbase = (raw + 1023u) & ~1023u;
  unsigned char* gbase = smem_raw + (sbase - raw);
  float* s_alpha = reinterpret_cast<float*>(gbase + C::kOffAlpha);
  float* s_l = reinterpret_cast<float*>(gbase + C::kOffL);
  const uint32_t bar_q = sbase + C::kOffBar;
  // block blk's K in K stage blk % kKStages, its V in V stage blk % kVStages; full: the loads landed,
  // empty: the consumers are done with it
  auto kfull = [&](int blk) { return sbase + C::kOffBar + 8 * (1 + blk % C::kKStages); };
  auto kempty = [&](int blk) { return sbase + C::kOffBar + 8 * (1 + C::kKStages + blk % C::kKStages); };
  auto vfull = [&](int blk) { return sbase + C::kOffBar + 8 * (1 + 2 * C::kKStages + blk % C::kVStages); };
  auto vempty = [&](int blk) {
    return sbase + C::kOffBar + 8 * (1 + 2 * C::kKStages + C::kVStages + blk % C::kVStages);
  };
  auto kpar = [&](int blk) { return (uint32_t)((blk / C::kKStages) & 1); };
  auto vpar = [&](int blk) { return (uint32_t)((blk / C::kVStages) & 1); };
  auto kslot = [&](int blk) { return sbase + C::kOffK + (uint32_t)((blk % C::kKStages) * C::kKStage); };
  auto vslot = [&](int blk) { return sbase + C::kOffV + (uint32_t)((blk % C::kVStages) * C::kVStage); };
  const int tid = threadIdx.x, t = tid & 127;
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);   // warp-uniform as far as the compiler knows
  const int hkv = blockIdx.y;
  const int G = a.G;
  int b = blockIdx.z, m0 = (gridDim.x - 1 - blockIdx.x) * C::kM;   // the last (causal: longest) row tiles first
  if (a.compact && !find_tile<C::kM>(p, G, blockIdx.x, reinterpret_cast<int*>(s_alpha), b, m0)) return;
  const Seq s = seq_of(p, b);
  const int mb = s.sq * G;
  if (!role_takes(a.role, mb)) return;
  if (m0 >= mb) return;
  int kbeg, kend;
  const int nblk = tile_keys_or_zero<T, C::kM, C::kN, Dv>(p, s, b, hkv, G, m0, mb, tid, C::kThreads, kbeg, kend);
  if (nblk == 0) return;   // no visible key for any row of the tile: its rows are zeroed
  if (tid == 0) {
    fa3::mbar_init(bar_q, 128);
    for (int st = 0; st < C::kKStages; ++st) {
      fa3::mbar_init(kfull(st), 1);
      fa3::mbar_init(kempty(st), 4);   // warpgroup 1's warps, once S is done
    }
    for (int st = 0; st < C::kVStages; ++st) {
      fa3::mbar_init(vfull(st), 1);
      fa3::mbar_init(vempty(st), 8);   // both consumers' warps, once their P V is done
    }
    fa3::fence_mbar_init();
  }
  __syncthreads();   // the last CTA-wide barrier

  if (wg == 0) {
    // ---- producer ---------------------------------------------------------------------------------
    fa3::setmaxnreg_dec<kProducerRegs>();
    const int row = t >> 1, half = t & 1;   // cp.async: thread pair (2r, 2r + 1) copies row r
    {
      const int m = m0 + row;
      const bool ok = m < mb;
      const T* qp = (const T*)p.q;
      const T* qvp = (const T*)p.q;
      if (ok) {
        const int i = m / G, h = hkv * G + m % G;
        const int64_t qo = p.cu_seqlens_q ? (s.q_row0 + i) * p.q_row_stride
                                          : (int64_t)b * p.q_batch_stride + (int64_t)i * p.q_row_stride;
        qp = (const T*)p.q + qo + (int64_t)h * p.q_head_stride;
        if constexpr (QV) {
          const int64_t vo = p.cu_seqlens_q ? (s.q_row0 + i) * a.qv_rs : (int64_t)b * a.qv_bs + (int64_t)i * a.qv_rs;
          qvp = (const T*)a.qv + vo + (int64_t)h * a.qv_hs;
        }
      }
#pragma unroll
      for (int it = 0; it < C::kQChunks * 4; ++it) {   // the [q, qv] tile; rows past the sequence are zeros
        const int u = 2 * it + half;
        const T* src = u < 8 ? qp + u * 8 : qvp + (u - 8) * 8;
        cp16(sbase + fa3::swz_offset(row, u * 8, C::kM), src, ok);
      }
      cp_mbar_arrive(bar_q);
    }
    const T* K = (const T*)p.k;
    const T* V = (const T*)p.v;
    const int32_t* pages = p.page_table ? p.page_table + (int64_t)b * p.page_table_stride : nullptr;
    if (t == 0 && tm.on) {
      fa3::prefetch_tmap(&tm.k);
      fa3::prefetch_tmap(&tm.v);
    }
    // the TMA coordinates of the box of keys jb + q .. (a paged cache: its page and row in the page)
    auto box_at = [&](int j, int& row_k, int& batch) {
      row_k = j;
      batch = b;
      if (pages) {
        batch = pages[j / p.page_size];
        row_k = j % p.page_size;
      } else if (p.cu_seqlens_k) {
        row_k = (int)s.k_row0 + j;
        batch = 0;
      }
    };
    for (int blk = 0; blk < nblk; ++blk) {
      const int jb = kbeg + blk * C::kN;   // the block's first key
      // TMA for a whole block whose boxes stay inside one page each; cp.async for the rest (the last,
      // partial block: rows past the keys' end are zeros, not whatever the cache holds there)
      const bool by_tma = tm.on && jb + C::kN <= kend && (!pages || (jb + s.lp) % tm.box == 0);
      // Every producer thread waits for each stage, also where thread 0 alone fills it: a thread running a
      // ring lap ahead would see the parity of a phase two back as complete and overwrite a live stage.
      // K first: S(blk) needs only K (and V with qv), and K stages are freed a block earlier than V's.
      fa3::mbar_wait(kempty(blk), kpar(blk) ^ 1);
      if (by_tma && t == 0) {
        fa3::mbar_arrive_expect_tx(kfull(blk), C::kKStage);
        for (int q = 0; q < C::kN; q += tm.box) {
          int row_k, batch;
          box_at(jb + q + s.lp, row_k, batch);
          fa3::tma_tile(kslot(blk) + q * 128, &tm.k, kfull(blk), 0, row_k, hkv, batch, tm.k_swap);
        }
      }
      fa3::mbar_wait(vempty(blk), vpar(blk) ^ 1);
      if (by_tma) {
        if (t != 0) continue;
        fa3::mbar_arrive_expect_tx(vfull(blk), C::kVStage);
        for (int q = 0; q < C::kN; q += tm.box) {
          int row_k, batch;
          box_at(jb + q + s.lp, row_k, batch);
#pragma unroll
          for (int c = 0; c < C::kVChunks; ++c)
            fa3::tma_tile(vslot(blk) + c * C::kN * 128 + q * 128, &tm.v, vfull(blk), c * 64, row_k, hkv, batch,
                          tm.v_swap);
        }
        continue;
      }
      const int jp = jb + row;
      const bool ok = jp < kend;
      const T* kp = K;
      const T* vp = V;
      if (ok) kv_rows(p, s, pages, b, hkv, jp, K, V, kp, vp);
#pragma unroll
      for (int it = 0; it < (1 + C::kVChunks) * 4; ++it) {   // 16-byte unit u of the row's [k, v]
        const int u = 2 * it + half;
        if (u < 8) cp16(kslot(blk) + fa3::swz_offset(row, u * 8, C::kN), kp + u * 8, ok);
        else cp16(vslot(blk) + fa3::swz_offset(row, (u - 8) * 8, C::kN), vp + (u - 8) * 8, ok);
      }
      // full counts one arrival: each thread's copies raise and then settle the pending count
      // (cp.async.mbarrier.arrive without .noinc); all are registered before thread 0 arrives
      cp_mbar_arrive_inc(kfull(blk));
      cp_mbar_arrive_inc(vfull(blk));
      fa3::named_bar_sync(3, 128);
      if (t == 0) {
        fa3::mbar_arrive(kfull(blk));
        fa3::mbar_arrive(vfull(blk));
      }
    }
    cp_wait<0>();
    return;
  }

  fa3::setmaxnreg_inc<kConsumerRegs>();
  const bool is_s = wg == 1;
  const uint32_t sP = sbase + C::kOffP;
  const int r0 = fa3::acc_row(t, 0);
  int rlo[2], rhi[2];
  bool rvalid[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int m = m0 + r0 + 8 * u;
    rvalid[u] = m < mb;
    if (rvalid[u]) {
      row_range(p, s, m / G, rlo[u], rhi[u]);
    } else {
      rlo[u] = 0;
      rhi[u] = -1;
    }
  }
  // this consumer's V columns: chunks wg' * kWgChunk .. of the V stage
  const int vchunk0 = is_s ? 0 : C::kWgChunk;
  float o[C::kNB][64];
#pragma unroll
  for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
    for (int i = 0; i < 64; ++i) o[nb][i] = 0.f;
  const int lane = t & 31;
  auto release = [&](uint32_t bar) {
    __syncwarp();
    if (lane == 0) fa3::mbar_arrive(bar);
  };

  // O *= alpha (a0: the thread's first row, a1: its second), skipped where no row of the warp changed its max
  // (alpha exactly 1): 128 FMULs per thread per block at Dv 512, the kernel's most executed instruction in v21's
  // first profile; both consumers, each on its half of O
  auto rescale = [&](float a0, float a1) {
    if (!__any_sync(0xffffffffu, a0 != 1.f || a1 != 1.f)) return;
#pragma unroll
    for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
      for (int i = 0; i < 64; ++i) o[nb][i] *= ((i >> 1) & 1) ? a1 : a0;
  };

  // O[:, col0 : col0 + Dv/2] / l of the warpgroup's 64 rows (both warpgroups' epilogue); lse where mr is given.
  // With 16-byte aligned output rows (o16), through shared memory `stg` (64 rows x Dv bytes, 16-byte units
  // XOR-swizzled by row: conflict-free both ways), then 16-byte stores of whole row segments (a warp writes 512
  // contiguous bytes at Dv 512); the accumulators' own layout gives 4-byte stores of 16 contiguous bytes per
  // row (8 rows per warp instruction), which held the LSU in v21's first profile (13.9% of samples on STG).
  // Else those 4-byte stores. bar: this warpgroup's named barrier (128 threads).
  const bool o16 = ((uintptr_t)p.o & 15) == 0 && (p.o_row_stride & 7) == 0 && (p.o_head_stride & 7) == 0 &&
                   (p.cu_seqlens_q || (p.o_batch_stride & 7) == 0);
  auto store_o = [&](const float (&l)[2], int col0, const float* mr, uint32_t stg, int bar) {
    float inv[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      inv[u] = l[u] > 0.f ? 1.f / l[u] : 0.f;
      if (!rvalid[u] || !mr || (t & 3)) continue;
      const int m = m0 + r0 + 8 * u;
      float* lp = lse_ptr(p, s, b, m / G, hkv * G + m % G);
      if (lp) *lp = l[u] > 0.f ? (mr[u] + log2f(l[u])) * kLn2 : -INFINITY;
    }
    if (o16) {
      fa3::fence_proxy_async_smem();   // the stage was last written by TMA and read by wgmma
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int r = r0 + 8 * u;
#pragma unroll
        for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
          for (int i2 = 0; i2 < 64; i2 += 4) {
            const int e = i2 + 2 * u, c = nb * 128 + fa3::acc_col(t, e);
            fa3::st_shared_u32(stg + r * Dv + (((c >> 3) ^ (r & 7)) << 4) + (c & 7) * 2,
                               pack<T>(o[nb][e] * inv[u], o[nb][e + 1] * inv[u]));
          }
      }
      fa3::named_bar_sync(bar, 128);
      constexpr int U = Dv / 16;   // 16-byte units per row of a warpgroup's half
#pragma unroll 4
      for (int e = t; e < C::kM * U; e += 128) {
        const int r = e / U, un = e % U, m = m0 + r;
        if (m >= mb) continue;
        uint32_t w0, w1, w2, w3;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3)
                     : "r"(stg + r * Dv + ((un ^ (r & 7)) << 4)));
        T* op = out_ptr<T>(p, s, b, m / G, hkv * G + m % G) + col0 + un * 8;
        *reinterpret_cast<uint4*>(op) = make_uint4(w0, w1, w2, w3);
      }
      return;
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (!rvalid[u]) continue;
      const int m = m0 + r0 + 8 * u;
      T* op = out_ptr<T>(p, s, b, m / G, hkv * G + m % G) + col0;
#pragma unroll
      for (int nb = 0; nb < C::kNB; ++nb)
#pragma unroll
        for (int i2 = 0; i2 < 64; i2 += 4) {
          const int e = i2 + 2 * u;
          *reinterpret_cast<uint32_t*>(op + nb * 128 + fa3::acc_col(t, e)) =
              pack<T>(o[nb][e] * inv[u], o[nb][e + 1] * inv[u]);
        }
    }
  };
  // the epilogue's staging: the V stage of block nblk (that of block nblk - kVStages, done by both consumers
  // and by the producer), warpgroup 1 in its first half, warpgroup 2 in its second (64 x Dv bytes each)
  const uint32_t stg = vslot(nblk) + (is_s ? 0u : (uint32_t)(C::kM * Dv));

  if (is_s) {
    // ---- warpgroup 1: S, softmax, P -> shared memory, O[:, :Dv/2] ----------------------------------
    // OVL (FlashAttention-3's intra-warpgroup overlap): per block i, issue S(i), then P V(i - 1) from the
    // registers of the previous P; the softmax of block i runs while P V(i - 1) is on the tensor cores.
    // Without: S(i), softmax(i), P V(i), as FA3 runs a value dim over 256 (CfgS::kOverlapAuto).
    constexpr int nks = 4 * C::kQChunks;
    float sacc[32];
    uint32_t pa[4][4], pn[4][4];   // P of the previous block (its P V still to issue) and of this one
    float mrow[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};
    const bool capped = p.softcap > 0.f;
    // scores -> log2 units: one FFMA with the max folded in, where a positive scale lets the max be taken
    // on the raw scores; softcap (and a scale <= 0) convert them first
    const bool convert = capped || !(p.scale > 0.f);
    const float mul = convert ? 1.f : p.scale * kLog2e;
    auto issue_pv = [&](int blk, uint32_t (&pp)[4][4]) {
      const uint32_t vs = vslot(blk);
      fa3::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int nb = 0; nb < C::kNB; ++nb) {
          const uint32_t vch = vs + (uint32_t)((vchunk0 + 2 * nb) * C::kN * 128);
          fa3::wgmma_rs_tb<F16>(o[nb], pp[kk], fa3::desc_mnmajor(vch, C::kN, kk), 1);
        }
      fa3::wgmma_commit();
    };
    // V(blk) landed (with qv S(blk) waited for it already)
    auto wait_v = [&](int blk) {
      if constexpr (!QV) {
        fa3::mbar_wait(vfull(blk), vpar(blk));
        fa3::fence_proxy_async_smem();
      }
    };
    auto issue_s = [&](int blk) {
      fa3::mbar_wait(kfull(blk), kpar(blk));
      if constexpr (QV) fa3::mbar_wait(vfull(blk), vpar(blk));
      fa3::fence_proxy_async_smem();   // cp.async wrote through the generic proxy; wgmma reads through the async one
      const uint32_t ks_ = kslot(blk), vs = vslot(blk);
      uint32_t qbase = sbase;
      asm volatile("" : "+r"(qbase));   // opaque here: Q's 4 * kQChunks descriptors are not hoisted out of
                                        // the loop into registers (72 with qv at Dv 512: spills)
      fa3::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        fa3::wgmma_ss<F16>(sacc, fa3::desc_kmajor(qbase, C::kM, ks), fa3::desc_kmajor(ks_, C::kN, ks), ks > 0);
#pragma unroll
      for (int ks = 4; ks < nks; ++ks)   // qv . V^T
        fa3::wgmma_ss<F16>(sacc, fa3::desc_kmajor(qbase, C::kM, ks), fa3::desc_kmajor(vs, C::kN, ks - 4), 1);
      fa3::wgmma_commit();
    };
    // scores (log2 units), masks (only where the block is not wholly visible to both rows), online
    // softmax; P of block blk -> pn and, with alpha, to warpgroup 2 once it is done with the previous P
    auto softmax = [&](int blk, float (&alpha)[2], uint32_t (&pn)[4][4]) {
      if (capped) {
#pragma unroll
        for (int i = 0; i < 32; ++i) sacc[i] = p.softcap * tanhf(sacc[i] * p.scale / p.softcap) * kLog2e;
      } else if (convert) {
#pragma unroll
        for (int i = 0; i < 32; ++i) sacc[i] *= p.scale * kLog2e;
      }
      const int kb = kbeg + blk * C::kN;
      if (!(kb >= rlo[0] && kb >= rlo[1] && kb + C::kN - 1 <= rhi[0] && kb + C::kN - 1 <= rhi[1] &&
            kb + C::kN <= kend)) {
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const int u = (i >> 1) & 1;
          const int j = kb + fa3::acc_col(t, i);
          if (!(j >= rlo[u] && j <= rhi[u] && j < kend)) sacc[i] = -INFINITY;
        }
      }
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int i = 0; i < 32; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], sacc[i]);
      float muse[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], 1));
        mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], 2));
        const float mn = fmaxf(mrow[u], mx[u] * mul);
        muse[u] = mn == -INFINITY ? 0.f : mn;
        alpha[u] = exp2f(mrow[u] - muse[u]);
        mrow[u] = mn;
        lsum[u] *= alpha[u];
      }
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const int u = (i >> 1) & 1;
        sacc[i] = exp2f(fmaf(sacc[i], mul, -muse[u]));
        lsum[u] += sacc[i];
      }
      fa3::acc_to_a<F16, 32>(sacc, pn);
      fa3::named_bar_sync(2, 256);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {   // pn[kk][jj]: row r0 + 8 (jj & 1), keys 16 kk + 8 (jj >> 1) + 2 (t & 3)
          const int r = r0 + 8 * (jj & 1), c = 16 * kk + 8 * (jj >> 1) + 2 * (t & 3);
          fa3::st_shared_u32(sP + fa3::swz_offset(r, c, C::kM), pn[kk][jj]);
        }
      if ((t & 3) == 0) {
        s_alpha[r0] = alpha[0];
        s_alpha[r0 + 8] = alpha[1];
      }
      if (blk == nblk - 1) {
        float lt[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          lt[u] = lsum[u] + __shfl_xor_sync(0xffffffffu, lsum[u], 1);
          lt[u] += __shfl_xor_sync(0xffffffffu, lt[u], 2);
        }
        if ((t & 3) == 0) {
          s_l[r0] = lt[0];
          s_l[r0 + 8] = lt[1];
        }
      }
      fa3::fence_proxy_async_smem();   // P is read by warpgroup 2's wgmma (async proxy)
      fa3::named_bar_arrive(1, 256);
    };
    float alpha[2];
    fa3::mbar_wait(bar_q, 0);
    if constexpr (OVL) {
      // block i > 0 with P(i - 1) in `prev`; P(i) goes to `next` (the two arrays swap roles every block:
      // a copy would let ptxas merge them and serialize the wgmmas on writes to an in-flight operand)
      auto step = [&](int blk, uint32_t (&prev)[4][4], uint32_t (&next)[4][4]) {
        issue_s(blk);
        wait_v(blk - 1);
        issue_pv(blk - 1, prev);          // P V(i - 1) runs under this block's softmax
        fa3::wgmma_wait<1>();             // S(i) done: K(i) is free
        fa3::fence_regs(sacc);
        release(kempty(blk));
        softmax(blk, alpha, next);
        fa3::wgmma_wait<0>();             // P V(i - 1) done: V(i - 1) is free (for this warpgroup), O rescaled
#pragma unroll
        for (int nb = 0; nb < C::kNB; ++nb) fa3::fence_regs(o[nb]);
        fa3::fence_regs(prev);
        release(vempty(blk - 1));
        rescale(alpha[0], alpha[1]);
      };
      issue_s(0);   // block 0: O is still zero, nothing to overlap
      fa3::wgmma_wait<0>();
      fa3::fence_regs(sacc);
      release(kempty(0));
      softmax(0, alpha, pa);
      int blk = 1;
      for (; blk + 1 < nblk; blk += 2) {
        step(blk, pa, pn);
        step(blk + 1, pn, pa);
      }
      if (blk < nblk) {
        step(blk, pa, pn);
        wait_v(nblk - 1);
        issue_pv(nblk - 1, pn);
      } else {
        wait_v(nblk - 1);
        issue_pv(nblk - 1, pa);
      }
      fa3::wgmma_wait<0>();
#pragma unroll
      for (int nb = 0; nb < C::kNB; ++nb) fa3::fence_regs(o[nb]);
      fa3::fence_regs(pa);
      fa3::fence_regs(pn);
      release(vempty(nblk - 1));
    } else {
      for (int blk = 0; blk < nblk; ++blk) {
        issue_s(blk);
        fa3::wgmma_wait<0>();             // S(i) done: K(i) is free
        fa3::fence_regs(sacc);
        release(kempty(blk));
        softmax(blk, alpha, pa);
        rescale(alpha[0], alpha[1]);
        wait_v(blk);
        issue_pv(blk, pa);
        fa3::wgmma_wait<0>();             // P V(i) done: V(i) is free (for this warpgroup)
#pragma unroll
        for (int nb = 0; nb < C::kNB; ++nb) fa3::fence_regs(o[nb]);
        fa3::fence_regs(pa);
        release(vempty(blk));
      }
    }

    // epilogue: O[:, :Dv/2] / l and lse
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      lsum[u] += __shfl_xor_sync(0xffffffffu, lsum[u], 1);
      lsum[u] += __shfl_xor_sync(0xffffffffu, lsum[u], 2);
    }
    store_o(lsum, 0, mrow, stg, 4);
  } else {
    // ---- warpgroup 2: O[:, Dv/2:] += P V with P from shared memory ---------------------------------
    fa3::named_bar_arrive(2, 256);   // the P buffer starts free
    for (int blk = 0; blk < nblk; ++blk) {
      fa3::named_bar_sync(1, 256);   // P and alpha of this block
      fa3::mbar_wait(vfull(blk), vpar(blk));
      fa3::fence_proxy_async_smem();
      const float al0 = s_alpha[r0], al1 = s_alpha[r0 + 8];
      rescale(al0, al1);
      const uint32_t vs = vslot(blk);
      fa3::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int nb = 0; nb < C::kNB; ++nb) {
          const uint32_t vch = vs + (uint32_t)((vchunk0 + 2 * nb) * C::kN * 128);
          wgmma_ss_tb128<F16>(o[nb], fa3::desc_kmajor(sP, C::kM, kk), fa3::desc_mnmajor(vch, C::kN, kk), 1);
        }
      fa3::wgmma_commit();
      fa3::wgmma_wait<0>();
#pragma unroll
      for (int nb = 0; nb < C::kNB; ++nb) fa3::fence_regs(o[nb]);
      if (blk + 1 < nblk) fa3::named_bar_arrive(2, 256);   // P buffer and alpha free
      release(vempty(blk));
    }
    const float l2[2] = {s_l[r0], s_l[r0 + 8]};
    store_o(l2, Dv / 2, nullptr, stg, 5);
  }
}

}  // namespace qv
