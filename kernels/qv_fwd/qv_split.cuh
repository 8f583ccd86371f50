// qv_split.cuh: the split-KV kernel of the qv forward (mma.sync m16n8k16; decodes and every sequence
// with <= 64 rows per KV head) and the merge of its key splits. Design: kernels/qv_fwd/qv_fwd.cu.
#pragma once
#include "qv_common.cuh"

namespace qv {

// kS: K/V stages in the ring (2; 3 for grids of at most one CTA per SM, launch_attn).
template <int Dv, int kRG, int kS = 2>
struct Cfg {
  static constexpr int kM = 16 * kRG;
  static constexpr int kThreads = 128 * kRG;
  static constexpr int kQRowB = (kD + Dv) * 2;          // bytes of one [q, qv] row in shared memory
  static constexpr int kVRowB = Dv * 2;
  static constexpr int kKTile = kN * kD * 2;            // 4 KiB
  static constexpr int kStage = kKTile + kN * kVRowB;   // K tile then V tile
  static constexpr int kOffStage = kM * kQRowB;         // Q first
  static constexpr int kOffS = kOffStage + kS * kStage; // partial S tiles: [kRG][4][16][kSPad] floats
  static constexpr int kSmem = kOffS + kRG * 4 * 16 * kSPad * 4;
  static constexpr int kCols = Dv / 4;                  // O columns per warp
  static constexpr int kNT = kCols / 8;                 // n8 tiles of O per warp
  static constexpr int kKS = kCols / 16 + 1;            // k16 steps of S per warp (qv.v part, then q.k)
  static constexpr int kTPR = kThreads / kN;            // loader threads per key row
};


// ---- the attention kernel ------------------------------------------------------------------------------
// grid (row tiles, Hkv, B * nsplit), block 128 * kRG; kS stages (Cfg).
template <typename T, int Dv, int kRG, int kS = 2>
__global__ void __launch_bounds__(128 * kRG, kRG == 1 && kS == 2 ? 2 : 1)
    qv_attn(const __grid_constant__ kseek_params p, const __grid_constant__ Args a) {
  using C = Cfg<Dv, kRG, kS>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rg = warp >> 2, cq = warp & 3;        // row group, column quarter
  const int g = lane >> 2, q4 = lane & 3;         // mma fragment row / column pair
  const int hkv = blockIdx.y;
  const int b = blockIdx.z / a.nsplit, split = blockIdx.z % a.nsplit;
  const int G = a.G;

  const Seq s = seq_of(p, b);
  const int mb = s.sq * G;                        // rows of this sequence per KV head
  if (!role_takes(a.role, mb)) return;
  const int m0 = blockIdx.x * C::kM;
  if (m0 >= mb) return;

  // keys this CTA reads: the tile's visible range within its split
  const int ks = split * a.kps;
  int kbeg, kend;
  const int nblk = tile_keys<C::kM, kN>(p, s, G, m0, mb, ks, (int64_t)ks + a.kps, kbeg, kend);

  if (nblk == 0) {   // no visible key in this split: nothing to read
    if (a.nsplit > 1) {   // the merge skips a split whose lse is -inf; its O is never read
      const int64_t R = (int64_t)p.batch * p.heads_kv * a.msmall;
      for (int r = tid; r < C::kM && m0 + r < mb; r += C::kThreads)
        a.ws_lse[(int64_t)split * R + ((int64_t)b * p.heads_kv + hkv) * a.msmall + m0 + r] = -INFINITY;
    } else {
      zero_rows<T, C::kM, Dv>(p, s, b, hkv, G, m0, mb, tid, C::kThreads);
    }
    return;
  }
  if (a.nsplit > 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");   // the merge may start launching

  // this thread's two rows (g, g + 8 of its row group)
  int rlo[2], rhi[2];
  bool rvalid[2];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int m = m0 + rg * 16 + g + 8 * t;
    rvalid[t] = m < mb;
    if (rvalid[t]) {
      row_range(p, s, m / G, rlo[t], rhi[t]);
      rlo[t] = max(rlo[t], kbeg);
      rhi[t] = min(rhi[t], kend - 1);
    } else {
      rlo[t] = 0;
      rhi[t] = -1;
    }
  }

  const uint32_t sbase = smem_u32(smem);
  const T* K = (const T*)p.k;
  const T* V = (const T*)p.v;
  const int32_t* pages = p.page_table ? p.page_table + (int64_t)b * p.page_table_stride : nullptr;

  // ---- Q tile ([q, qv] rows) into shared memory, zeros for rows past the sequence -------------------
  {
    constexpr int kChunks = (kD + Dv) / 8;
    for (int e = tid; e < C::kM * kChunks; e += C::kThreads) {
      const int r = e / kChunks, c = e % kChunks;
      if (c >= kD / 8 && !a.qv) continue;               // no qv: S has the q . k part only
      const int m = m0 + r;
      const bool ok = m < mb;
      const T* src = (const T*)p.q;
      if (ok) {
        const int i = m / G, h = hkv * G + m % G;
        if (c < kD / 8) {
          const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * p.q_row_stride
                                             : (int64_t)b * p.q_batch_stride + (int64_t)i * p.q_row_stride;
          src = (const T*)p.q + off + (int64_t)h * p.q_head_stride + c * 8;
        } else {
          const int64_t off = p.cu_seqlens_q ? (s.q_row0 + i) * a.qv_rs : (int64_t)b * a.qv_bs + (int64_t)i * a.qv_rs;
          src = (const T*)a.qv + off + (int64_t)h * a.qv_hs + (c - kD / 8) * 8;
        }
      }
      cp16(sbase + swz(r, c, C::kQRowB), src, ok);
    }
  }

  // ---- K/V block loader: thread -> one key row, chunks spaced by kTPR --------------------------------
  const int lrow = tid / C::kTPR, lcol = tid % C::kTPR;
  auto load_block = [&](int blk, int stage) {
    const int jp = kbeg + blk * kN + lrow;         // logical key
    const bool ok = jp < kend;
    const T* kp = K;
    const T* vp = V;
    if (ok) kv_rows(p, s, pages, b, hkv, jp, K, V, kp, vp);
    const uint32_t st = sbase + C::kOffStage + stage * C::kStage;
    for (int c = lcol; c < kD / 8; c += C::kTPR) cp16(st + swz(lrow, c, kD * 2), kp + c * 8, ok);
    for (int c = lcol; c < Dv / 8; c += C::kTPR) cp16(st + C::kKTile + swz(lrow, c, C::kVRowB), vp + c * 8, ok);
  };

  // prologue: blocks 0 .. kS-2 (the first group holds the Q tile too); one group per block, empty past nblk
#pragma unroll
  for (int t = 0; t < kS - 1; ++t) {
    if (t < nblk) load_block(t, t);
    cp_commit();
  }

  float o[C::kNT][4];
#pragma unroll
  for (int n = 0; n < C::kNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow_[2] = {0.f, 0.f};
  const float smul = p.scale;
  const bool capped = p.softcap > 0.f;
  float* sS = reinterpret_cast<float*>(smem + C::kOffS) + rg * 4 * 16 * kSPad;
  const uint32_t qrow_base = sbase + (uint32_t)(rg * 16) * C::kQRowB;

  for (int blk = 0; blk < nblk; ++blk) {
    if (blk + kS - 1 < nblk) load_block(blk + kS - 1, (blk + kS - 1) % kS);   // its stage was freed by the
    cp_commit();                                                               // previous block's last barrier
    cp_wait<kS - 1>();
    __syncthreads();
    const uint32_t st = sbase + C::kOffStage + (blk % kS) * C::kStage;
    const uint32_t sv = st + C::kKTile;

    // partial S over this warp's dims: qv . v (columns cq*kCols ..), then q . k (dims 16 cq ..)
    float sp[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) sp[n][0] = sp[n][1] = sp[n][2] = sp[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < C::kKS; ++kk) {
      const bool qk = kk == C::kKS - 1;
      if (!qk && !a.qv) continue;                        // uniform: no qv term
      // A: rows 0-15 of the row group; [q, qv] chunk of dims
      const int qchunk = qk ? 2 * cq : kD / 8 + (cq * C::kCols) / 8 + 2 * kk;
      uint32_t af[4];
      ldsm4(qrow_base + swz((lane & 7) + ((lane >> 3) & 1) * 8, qchunk + (lane >> 4), C::kQRowB), af);
#pragma unroll
      for (int np = 0; np < 2; ++np) {   // keys 16 np .. 16 np + 15
        const int key = np * 16 + (lane & 7) + (lane >> 4) * 8;
        uint32_t bf[4];
        if (qk) {
          ldsm4(st + swz(key, 2 * cq + ((lane >> 3) & 1), kD * 2), bf);
        } else {
          ldsm4(sv + swz(key, (cq * C::kCols) / 8 + 2 * kk + ((lane >> 3) & 1), C::kVRowB), bf);
        }
        mma<T>(sp[2 * np], af, bf[0], bf[1]);
        mma<T>(sp[2 * np + 1], af, bf[2], bf[3]);
      }
    }
    // the four partials meet: store, barrier of the row group, sum in a fixed order
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      *reinterpret_cast<float2*>(sS + (cq * 16 + g) * kSPad + n * 8 + 2 * q4) = make_float2(sp[n][0], sp[n][1]);
      *reinterpret_cast<float2*>(sS + (cq * 16 + g + 8) * kSPad + n * 8 + 2 * q4) = make_float2(sp[n][2], sp[n][3]);
    }
    if (kRG == 1) __syncthreads(); else bar_named(1 + rg, 128);
    float sc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float2 x = *reinterpret_cast<const float2*>(sS + (w * 16 + g) * kSPad + n * 8 + 2 * q4);
        const float2 y = *reinterpret_cast<const float2*>(sS + (w * 16 + g + 8) * kSPad + n * 8 + 2 * q4);
        sc[n][0] += x.x; sc[n][1] += x.y; sc[n][2] += y.x; sc[n][3] += y.y;
      }
    }

    // scores (log2 units), masks, online softmax
    const int kb = kbeg + blk * kN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = e >> 1;
        const int j = kb + n * 8 + 2 * q4 + (e & 1);
        float x = sc[n][e] * smul;
        if (capped) x = p.softcap * tanhf(x / p.softcap);
        x = (j >= rlo[t] && j <= rhi[t]) ? x * kLog2e : -INFINITY;
        sc[n][e] = x;
        mx[t] = fmaxf(mx[t], x);
      }
    }
    float alpha[2], muse[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      mx[t] = fmaxf(mx[t], __shfl_xor_sync(0xffffffffu, mx[t], 1));
      mx[t] = fmaxf(mx[t], __shfl_xor_sync(0xffffffffu, mx[t], 2));
      const float mn = fmaxf(mrow[t], mx[t]);
      muse[t] = mn == -INFINITY ? 0.f : mn;
      alpha[t] = exp2f(mrow[t] - muse[t]);          // 0 when the old max is -inf
      mrow[t] = mn;
      lrow_[t] *= alpha[t];
    }
    uint32_t pa[2][4];   // P as A fragments of the two k16 steps of P V
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float p0 = exp2f(sc[n][0] - muse[0]), p1 = exp2f(sc[n][1] - muse[0]);
      const float p2 = exp2f(sc[n][2] - muse[1]), p3 = exp2f(sc[n][3] - muse[1]);
      lrow_[0] += p0 + p1;
      lrow_[1] += p2 + p3;
      pa[n >> 1][(n & 1) * 2] = pack<T>(p0, p1);
      pa[n >> 1][(n & 1) * 2 + 1] = pack<T>(p2, p3);
    }
#pragma unroll
    for (int n = 0; n < C::kNT; ++n) {
      o[n][0] *= alpha[0]; o[n][1] *= alpha[0];
      o[n][2] *= alpha[1]; o[n][3] *= alpha[1];
    }
    // O += P V for this warp's columns
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int key = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int np = 0; np < C::kNT / 2; ++np) {
        uint32_t bf[4];
        ldsm4t(sv + swz(key, (cq * C::kCols) / 8 + 2 * np + (lane >> 4), C::kVRowB), bf);
        mma<T>(o[2 * np], pa[kk], bf[0], bf[1]);
        mma<T>(o[2 * np + 1], pa[kk], bf[2], bf[3]);
      }
    }
    __syncthreads();   // the stage and the partial-S tiles are free for the next block
  }
  cp_wait<0>();

  // ---- epilogue: o / l (bf16 / fp16) and lse, or the split's fp32 partials --------------------------
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    lrow_[t] += __shfl_xor_sync(0xffffffffu, lrow_[t], 1);
    lrow_[t] += __shfl_xor_sync(0xffffffffu, lrow_[t], 2);
  }
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    if (!rvalid[t]) continue;
    const int m = m0 + rg * 16 + g + 8 * t;
    const int i = m / G, h = hkv * G + m % G;
    const float l = lrow_[t];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? (mrow[t] + log2f(l)) * kLn2 : -INFINITY;
    if (a.nsplit == 1) {
      T* op = out_ptr<T>(p, s, b, i, h) + cq * C::kCols + 2 * q4;
#pragma unroll
      for (int n = 0; n < C::kNT; ++n)
        *reinterpret_cast<uint32_t*>(op + n * 8) = pack<T>(o[n][2 * t] * inv, o[n][2 * t + 1] * inv);
      float* lp = lse_ptr(p, s, b, i, h);
      if (lp && cq == 0 && q4 == 0) *lp = lse;
    } else {
      const int64_t R = (int64_t)p.batch * p.heads_kv * a.msmall;
      const int64_t row = ((int64_t)b * p.heads_kv + hkv) * a.msmall + m;
      if (cq == 0 && q4 == 0) a.ws_lse[(int64_t)split * R + row] = lse;
      if (l == 0.f) continue;   // lse -inf: the merge skips this split's O
      float* wo = a.ws_o + ((int64_t)split * R + row) * Dv + cq * C::kCols + 2 * q4;
#pragma unroll
      for (int n = 0; n < C::kNT; ++n)
        *reinterpret_cast<float2*>(wo + n * 8) = make_float2(o[n][2 * t] * inv, o[n][2 * t + 1] * inv);
    }
  }
}

// ---- merge of the key splits: one CTA per row, each warp a quarter of its Dv columns ----------------------
// kE = Dv / 128 consecutive floats per lane (4 or 2), loaded as one float4 / float2.
template <int kE>
__device__ __forceinline__ void ld_part(const float* src, bool on, float (&x)[kE]) {
  if constexpr (kE == 4) {
    const float4 v = on ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
    x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
  } else {
    const float2 v = on ? *reinterpret_cast<const float2*>(src) : make_float2(0.f, 0.f);
    x[0] = v.x; x[1] = v.y;
  }
}

template <typename T, int Dv>
__global__ void __launch_bounds__(128) qv_combine(const __grid_constant__ kseek_params p,
                                                  const __grid_constant__ Args a) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");   // launched early (PDL): wait for the splits' writes
  constexpr int kE = Dv / 128;
  const int lane = threadIdx.x & 31, wq = threadIdx.x >> 5;
  const int64_t R = (int64_t)p.batch * p.heads_kv * a.msmall;
  const int64_t row = blockIdx.x;
  if (row >= R) return;
  const int m = (int)(row % a.msmall);
  const int hkv = (int)((row / a.msmall) % p.heads_kv);
  const int b = (int)(row / ((int64_t)a.msmall * p.heads_kv));
  const Seq s = seq_of(p, b);
  const int mb = s.sq * a.G;
  if (!role_takes(a.role, mb) || m >= mb) return;
  float mx = -INFINITY;
  for (int sp = lane; sp < a.nsplit; sp += 32) mx = fmaxf(mx, a.ws_lse[sp * R + row]);
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const int i = m / a.G, h = hkv * a.G + m % a.G;
  const int col = wq * (Dv / 4) + lane * kE;
  float acc[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) acc[e] = 0.f;
  float den = 0.f;
  if (mx != -INFINITY) {
    // lane l holds the weight of splits l, l + 32, ... (0: an empty split, whose O is never read); the
    // partials are read kB splits at a time, every load issued before the first is used
    constexpr int kB = 8;
    for (int s0 = 0; s0 < a.nsplit; s0 += 32) {
      const int sl = s0 + lane;
      const float ls = sl < a.nsplit ? a.ws_lse[sl * R + row] : -INFINITY;
      const float wl = ls == -INFINITY ? 0.f : __expf(ls - mx);
      den += wl;
      const int n = min(32, a.nsplit - s0);
      for (int j0 = 0; j0 < n; j0 += kB) {
        float wj[kB], x[kB][kE];
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          wj[j] = __shfl_sync(0xffffffffu, wl, (j0 + j) & 31);
          if (j0 + j >= n) wj[j] = 0.f;
          ld_part<kE>(a.ws_o + ((s0 + j0 + j) * R + row) * Dv + col, wj[j] != 0.f, x[j]);
        }
#pragma unroll
        for (int j = 0; j < kB; ++j) {
#pragma unroll
          for (int e = 0; e < kE; ++e) acc[e] += wj[j] * x[j][e];
        }
      }
    }
    for (int off = 16; off > 0; off >>= 1) den += __shfl_xor_sync(0xffffffffu, den, off);
  }
  const float inv = den > 0.f ? 1.f / den : 0.f;
  uint32_t* dst = reinterpret_cast<uint32_t*>(out_ptr<T>(p, s, b, i, h) + col);   // 4-byte aligned (even strides)
#pragma unroll
  for (int e = 0; e < kE; e += 2) dst[e / 2] = pack<T>(acc[e] * inv, acc[e + 1] * inv);
  float* lp = lse_ptr(p, s, b, i, h);
  if (lp && threadIdx.x == 0) *lp = den > 0.f ? mx + logf(den) : -INFINITY;
}


}  // namespace qv
