// prefill_kernel.cuh: the bf16/fp16 prefill kernel fa3::fwd_kernel<T, D, DV, BN, VAR, DYN>.
#pragma once
#include "prefill_scheduler.cuh"
#include "prefill_mainloop.cuh"

namespace fa3 {

// VAR selects the consumer schedule: 0 = serial (v2: S, softmax, P V, one after the other),
// 1 = intra-warpgroup overlap (S of the next tile and P V of this one in flight together),
// 2 = 1 + ping-pong between the two consumer warpgroups (named barriers 3 and 4 hand the tensor
// cores over: one warpgroup issues its GEMMs while the other runs its softmax).
template <typename T, int D, int DV, int BN, int VAR, bool DYN>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap to,
               const __grid_constant__ Args a) {
  constexpr bool F16 = std::is_same<T, __half>::value;
  constexpr int NS = BN / 2;  // S accumulator floats per thread
  using L = Smem<D, DV, BN>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::kQ, sK = base + L::kK, sV = base + L::kV;
  // Q buffer of the qi-th Q load (qi counts them over the CTA's tiles), its barriers, tile index
  // slot and the phase of its barriers (the (qi / kQBuf)-th use of that buffer).
  auto qbuf = [&](int qi) { return L::kQBuf == 2 ? (qi & 1) : 0; };
  auto qphase = [&](int qi) { return (uint32_t)((L::kQBuf == 2 ? qi >> 1 : qi) & 1); };
  auto bar_q = [&](int b) { return base + (b ? L::kBarQ2 : L::kBarQ); };
  auto bar_qe = [&](int b) { return base + (b ? L::kBarQE2 : L::kBarQE); };
  auto tile_slot = [&](int b) { return base + (b ? L::kTileIdx2 : L::kTileIdx); };

  if (threadIdx.x == 0) {
#pragma unroll
    for (int b = 0; b < L::kQBuf; ++b) {
      mbar_init(bar_q(b), 1);
      mbar_init(bar_qe(b), kConsumerWarps);
    }
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(base + L::kBarKF + 8 * s, 1);
      mbar_init(base + L::kBarVF + 8 * s, 1);
      mbar_init(base + L::kBarKE + 8 * s, kConsumerWarps);
      mbar_init(base + L::kBarVE + 8 * s, kConsumerWarps);
    }
    fence_mbar_init();
  }
  __syncthreads();  // the last CTA-wide barrier: the roles below never meet again

  // Persistent: this CTA runs tiles blockIdx.x, blockIdx.x + gridDim.x, ... Producer and consumers
  // walk the same sequence; `kv` counts K/V tiles over all of them (ring stage kv % 2, phase
  // (kv / 2) % 2) and `qi` the Q loads (Q buffer phase qi % 2), so the producer loads the next
  // tile's Q and K/V while the consumers finish the current one.
  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    // ------------------------------------------------------------------ producer warpgroup
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_tmap(&tq);
      prefetch_tmap(&tk);
      prefetch_tmap(&tv);
      int kv = 0, qi = 0;
      for (int idx = blockIdx.x;;) {
        Tile ti;
        if constexpr (DYN) {
          const bool more = idx < a.tiles;
          if (more && !tile_at<BN>(a, idx, ti)) {  // varlen: starts past its sequence's end
            idx = next_tile(a);
            continue;
          }
          // the consumers are done with this buffer's previous Q (and index)
          mbar_wait(bar_qe(qbuf(qi)), qphase(qi) ^ 1);
          st_shared_s32(tile_slot(qbuf(qi)), more ? idx : -1);
          if (!more || ti.n_cnt == 0) {
            mbar_arrive(bar_q(qbuf(qi)));  // no Q to load: the index alone (-1 ends the consumers' loop)
            if (!more) break;
            ++qi;
            idx = next_tile(a);
            continue;
          }
        } else {  // static: tiles blockIdx.x, + gridDim.x, ...; the consumers walk the same list
          if (idx >= a.tiles) break;
          if (!tile_at<BN>(a, idx, ti) || ti.n_cnt == 0) {
            idx += gridDim.x;
            continue;
          }
          mbar_wait(bar_qe(qbuf(qi)), qphase(qi) ^ 1);  // the consumers are done with this buffer
        }
        {
          const int qb = qbuf(qi);
          mbar_arrive_expect_tx(bar_q(qb), L::kQBytes);
#pragma unroll
          for (int c = 0; c < pad64(D) / 64; ++c)
            tma_tile(sQ + qb * L::kQBytes + c * kBM * 128, &tq, bar_q(qb), 64 * c, ti.q_coord, ti.h, ti.tb,
                     a.q_swap);
        }
        ++qi;
        for (int it = 0; it < ti.n_cnt; ++it, ++kv) {
          const int n_block = ti.n_max - 1 - it;
          const int stage = kv & 1;
          const uint32_t ph = (kv >> 1) & 1;
          const uint32_t kf = base + L::kBarKF + 8 * stage, vf = base + L::kBarVF + 8 * stage;
          mbar_wait(base + L::kBarKE + 8 * stage, ph ^ 1);
          mbar_arrive_expect_tx(kf, L::kKBytes);
#pragma unroll
          for (int c = 0; c < pad64(D) / 64; ++c)
            tma_tile(sK + stage * L::kKBytes + c * BN * 128, &tk, kf, 64 * c, ti.k_coord + n_block * BN,
                     ti.hkv, ti.tb, a.k_swap);
          mbar_wait(base + L::kBarVE + 8 * stage, ph ^ 1);
          mbar_arrive_expect_tx(vf, L::kVBytes);
#pragma unroll
          for (int c = 0; c < pad64(DV) / 64; ++c)
            tma_tile(sV + stage * L::kVBytes + c * BN * 128, &tv, vf, 64 * c, ti.k_coord + n_block * BN,
                     ti.hkv, ti.tb, a.v_swap);
        }
        if constexpr (DYN) idx = next_tile(a);
        else idx += gridDim.x;
      }
      if constexpr (DYN) sched_done(a);
    }
  } else {
    // ------------------------------------------------------------------ consumer warpgroups
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1;                 // rows 64cw..64cw+63 of the Q tile
    const int t = threadIdx.x & 127;
    const int lane = t & 31;
    // Ping-pong (VAR 2): a warpgroup takes its turn (bar.sync on barrier 3 + cw, 256 threads)
    // before issuing GEMMs and hands it over (bar.arrive on the other's barrier) after issuing.
    // Both warpgroups take the same turns (same tiles, same K/V tiles); warpgroup 1 hands over
    // once before the first turn (warpgroup 0 starts) and warpgroup 0 takes one extra turn after
    // the last tile, so no arrival is left pending when the CTA exits.
    auto take_turn = [&]() {
      if constexpr (VAR == 2) named_bar_sync(3 + cw, 256);
    };
    auto pass_turn = [&]() {
      if constexpr (VAR == 2) named_bar_arrive(3 + (cw ^ 1), 256);
    };
    if constexpr (VAR == 2) {
      if (cw == 1) named_bar_arrive(3, 256);
    }
    int kv = 0, qi = 0;
    for (int idx = blockIdx.x;;) {
      if constexpr (DYN) {
        mbar_wait(bar_q(qbuf(qi)), qphase(qi));  // the next tile's index (and its Q, when it has keys)
        idx = __shfl_sync(0xffffffffu, ld_shared_s32(tile_slot(qbuf(qi))), 0);  // (all lanes read the same)
        if (idx < 0) break;
      } else if (idx >= a.tiles) {
        break;
      }
      Tile ti;
      if (!tile_at<BN>(a, idx, ti)) {  // static only (the dynamic producer never hands these out)
        idx += gridDim.x;
        continue;
      }
      const int m0 = ti.m0, sq = ti.sq, sk = ti.sk, diag = ti.diag;
      const int n_max = ti.n_max, n_cnt = ti.n_cnt, h = ti.h, b = ti.b, q_row0 = ti.q_row0;
      const int row0 = m0 + 64 * cw + acc_row(t, 0);  // query row of elements i%4 in {0,1}; +8 for {2,3}

      // visible keys of this thread's two rows: klo[r] <= j' <= khi[r]
      int klo[2], khi[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        khi[r] = sk - 1;
        if (a.wr >= 0) khi[r] = min(khi[r], row + diag + a.wr);
        klo[r] = a.wl >= 0 ? row + diag - a.wl : 0;
      }

      float o[DV / 2];
#pragma unroll
      for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
      float m_run[2] = {-INFINITY, -INFINITY};  // running max of the score (raw or capped) per row
      float l_run[2] = {0.f, 0.f};              // this thread's partial sum of exp, per row

      const int qb = qbuf(qi);                  // this tile's Q buffer
      const uint32_t sQw = sQ + qb * L::kQBytes + cw * 64 * 128;  // this warpgroup's 64 rows (8 swizzle atoms)
      float s[NS];                              // S tile (64 x BN over the warpgroup), then P in fp32
      uint32_t pa[NS / 8][4];                   // P as wgmma A fragments (bf16/fp16)
      float corr[2];                            // rescale of O and l for the tile just scored

      // S = Q K^T of tile `it` into s: wait for K, issue, commit (one wgmma group); not waited here.
      auto issue_s = [&](int it) {
        const int g = kv + it;  // position in the K/V ring over all tiles of this CTA
        mbar_wait(base + L::kBarKF + 8 * (g & 1), (g >> 1) & 1);
        const uint32_t kst = sK + (g & 1) * L::kKBytes;
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks)
          wgmma_ss<F16>(s, desc_kmajor(sQw, kBM, ks), desc_kmajor(kst, BN, ks), ks > 0 ? 1 : 0);
        wgmma_commit();
      };
      // After S of tile `it` has landed: free its K stage.
      auto release_k = [&](int it) {
        fence_regs(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(base + L::kBarKE + 8 * ((kv + it) & 1));
      };
      // Softcap, masks, online softmax of s (tile `it`): s becomes P in fp32, m_run/l_run advance,
      // corr = the factor O must be multiplied by before P V of this tile is added.
      auto softmax = [&](int it) {
        const int n0 = (n_max - 1 - it) * BN;
        if (a.softcap_on) {  // before masking: garbage/NaN keys past the end are overwritten below
#pragma unroll
          for (int i = 0; i < NS; ++i) s[i] = a.cap_out * tanh_approx(s[i] * a.cap_in);
        }
        // mask: keys past Sk_b, right window (causal), left window; only tiles that need it
        if (n0 + BN > sk || (a.wr >= 0 && n0 + BN - 1 > m0 + diag + a.wr) ||
            (a.wl >= 0 && n0 < m0 + kBM - 1 + diag - a.wl)) {
#pragma unroll
          for (int i = 0; i < NS; ++i) {
            const int col = n0 + acc_col(t, i);
            const int r = (i >> 1) & 1;
            if (col > khi[r] || col < klo[r]) s[i] = -INFINITY;
          }
        }
        // rows r0 = elements {0,1} mod 4, r1 = {2,3} mod 4
        float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
        for (int j = 0; j < NS / 4; ++j) {
          mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
          mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
        }
        float sub[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad share a row
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          sub[r] = mx[r] == -INFINITY ? 0.f : mx[r] * a.scale_log2;  // all masked so far: exp2(-inf)=0
          // max unchanged: exactly 1 (lets rescale_o skip); m_run = -inf: 0 (o, l are 0)
          corr[r] = mx[r] == m_run[r] ? 1.f : ex2(m_run[r] * a.scale_log2 - sub[r]);
          m_run[r] = mx[r];
          l_run[r] *= corr[r];
        }
#pragma unroll
        for (int j = 0; j < NS / 4; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e >> 1;
            s[4 * j + e] = ex2(fmaf(s[4 * j + e], a.scale_log2, -sub[r]));
            l_run[r] += s[4 * j + e];
          }
        }
      };
      // Skipped when no row of the warp changed its max (corr exactly 1): on long rows most
      // tiles, 64-128 FMULs per thread each. The vote is warp-uniform, so is the branch. Not for
      // Dv = 64: there the vote and branch cost more than the 32 FMULs (hd64 -6%, NOTES v5c/v6).
      auto rescale_o = [&]() {
#ifndef FA3_NO_RESCALE_SKIP  // A/B build hook (probe only)
        if constexpr (DV > 64)
          if (__all_sync(0xffffffffu, corr[0] == 1.f && corr[1] == 1.f)) return;
#endif
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          o[4 * j] *= corr[0];
          o[4 * j + 1] *= corr[0];
          o[4 * j + 2] *= corr[1];
          o[4 * j + 3] *= corr[1];
        }
      };
      // O += P V of tile `it` (P in pa): wait for V, zero untrusted V rows, issue, commit.
      auto issue_pv = [&](int it) {
        const int n0 = (n_max - 1 - it) * BN;
        const int g = kv + it;
        const uint32_t vst = sV + (g & 1) * L::kVBytes;
        mbar_wait(base + L::kBarVF + 8 * (g & 1), (g >> 1) & 1);
        if (a.vzero && n0 + BN > sk) {
          // V rows of keys >= Sk_b were loaded from memory we must not trust (next sequence, unused
          // cache slots: possibly NaN/Inf, and 0 * NaN = NaN in the wgmma). Zero them in shared
          // memory; whole 128-byte rows, so the swizzle does not matter. Both consumer warpgroups
          // write the same zeros (benign); each fences and syncs its own 128 threads before its wgmma.
          const int zr = max(0, sk - n0);
          const int units = (BN - zr) * 8;  // 16-byte units per 64-column chunk
#pragma unroll
          for (int c = 0; c < pad64(DV) / 64; ++c)
            for (int u = t; u < units; u += 128)
              st_shared_zero16(vst + (uint32_t)(c * BN * 128 + zr * 128 + u * 16));
          fence_proxy_async_smem();
          named_bar_sync(1 + cw, 128);
        }
        fence_regs(o);   // the rescale of o and the packing of pa happen before wgmma.fence
        fence_regs(pa);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BN / 16; ++ks) pv_step<F16, DV, BN>(o, pa[ks], vst, ks);
        wgmma_commit();
      };
      auto release_v = [&](int it) {
        fence_regs(o);
        __syncwarp();
        if (lane == 0) mbar_arrive(base + L::kBarVE + 8 * ((kv + it) & 1));
      };

      // The Q buffer is free once the last S of this tile has landed (before the last P V).
      auto release_q = [&]() {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar_qe(qb));
      };
      if constexpr (DYN) {
        if (n_cnt == 0) release_q();  // no keys: O = 0, LSE = -inf below
      }
      if (n_cnt > 0) {
        if constexpr (!DYN) mbar_wait(bar_q(qb), qphase(qi));
        if constexpr (VAR >= 1) {
          // Intra-warpgroup overlap (FlashAttention-3): S of tile it+1 and P V of tile it are in
          // flight together; the softmax of tile it+1 runs on the CUDA cores while P V of tile it
          // runs on the tensor cores. O is rescaled once P V of tile it has landed.
          take_turn();
          issue_s(0);
          pass_turn();
          wgmma_wait<0>();
          release_k(0);
          softmax(0);  // o = 0: no rescale
          acc_to_a<F16>(s, pa);
          for (int it = 1; it < n_cnt; ++it) {
            take_turn();
            issue_s(it);
            issue_pv(it - 1);
            pass_turn();
            wgmma_wait<1>();  // S of tile it (the older group) has landed; P V may still run
            release_k(it);
            softmax(it);
            wgmma_wait<0>();
            fence_regs(pa);   // pa was read by the P V wgmma until here: keep it from being reused
            release_v(it - 1);
            rescale_o();
            acc_to_a<F16>(s, pa);
          }
          release_q();
          take_turn();
          issue_pv(n_cnt - 1);
          pass_turn();
          wgmma_wait<0>();
          release_v(n_cnt - 1);
        } else {
          for (int it = 0; it < n_cnt; ++it) {
            issue_s(it);
            wgmma_wait<0>();
            release_k(it);
            if (it == n_cnt - 1) release_q();
            softmax(it);
            rescale_o();
            acc_to_a<F16>(s, pa);
            issue_pv(it);
            wgmma_wait<0>();
            release_v(it);
          }
        }
      }

      if (DYN || n_cnt > 0) {
        ++qi;
        kv += n_cnt;
      }

      // ---- epilogue: O / l, LSE; sinks join the denominator; rows without keys: 0 and -inf ----
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
      }
      T* obase = (T*)a.o + (a.cu_q ? (int64_t)q_row0 * a.o_rs : (int64_t)b * a.o_bs) + (int64_t)h * a.o_hs;
      float* lbase = a.lse ? a.lse + (a.cu_q ? (int64_t)q_row0 : (int64_t)b * a.lse_bs) + (int64_t)h * a.lse_hs
                           : nullptr;
      const float sink = a.sinks ? a.sinks[h] : 0.f;
      float inv[2] = {0.f, 0.f};  // 1 / denominator per row; 0 for rows without keys (and past Sq)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row < sq) {
          float lse = -INFINITY;
          if (l_run[r] > 0.f) {  // at least one visible key (its exp is 1)
            const float m_nat = m_run[r] * a.lse_mul;  // running max in natural-log units
            if (a.sinks) {
              const float mn = fmaxf(m_nat, sink);
              const float e = expf(m_nat - mn);
              const float den = l_run[r] * e + expf(sink - mn);
              inv[r] = e / den;
              lse = mn + logf(den);
            } else {
              inv[r] = 1.f / l_run[r];
              lse = m_nat + logf(l_run[r]);
            }
          }
          if (lbase && (t & 3) == 0) lbase[row] = lse;
        }
      }
      bool o_done = false;
      if constexpr (L::kOStage) {
        // O through shared memory and one TMA store per 64-column chunk (dense layouts only: a
        // varlen tile's rows past its sequence belong to the next one, and the box would write
        // them). Rows past Sq and columns past Dv fall outside the map and are not written.
        if (a.o_tma) {
          if (t == 0) bulk_wait_read();  // this warpgroup's previous store has left shared memory
          named_bar_sync(1 + cw, 128);
          const int rl0 = acc_row(t, 0);  // row within this warpgroup's 64
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int rl = rl0 + 8 * r;
#pragma unroll
            for (int j = 0; j < DV / 8; ++j) {
              const uint32_t addr = base + L::kO + (uint32_t)((2 * (j >> 3) + cw) * 8192 + rl * 128 +
                                                              (((j & 7) ^ (rl & 7)) << 4) + 4 * (t & 3));
              st_shared_u32(addr, pack2<F16>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]));
            }
          }
          fence_proxy_async_smem();
          named_bar_sync(1 + cw, 128);
          if (t == 0) {
#pragma unroll
            for (int c = 0; c < pad64(DV) / 64; ++c) {
              const uint32_t src = base + L::kO + (uint32_t)((2 * c + cw) * 8192);
              const int row = ti.q_coord + 64 * cw;
              if (a.o_swap) tma_store_4d(&to, src, 64 * c, h, row, ti.tb);
              else tma_store_4d(&to, src, 64 * c, row, h, ti.tb);
            }
            bulk_commit();
          }
          o_done = true;
        }
      }
      if (!o_done) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row0 + 8 * r;
          if (row < sq) {
            T* orow = obase + (int64_t)row * a.o_rs + 2 * (t & 3);
#pragma unroll
            for (int j = 0; j < DV / 8; ++j)
              if (8 * j < a.dv)  // (a.dv == DV on every instantiation; kept as a guard)
                *reinterpret_cast<uint32_t*>(orow + 8 * j) =
                    pack2<F16>(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
          }
        }
      }
      if constexpr (!DYN) idx += gridDim.x;
    }  // tiles
    if constexpr (L::kOStage) {
      if (a.o_tma && t == 0) bulk_wait();  // the last O store has completed
    }
    if constexpr (VAR == 2) {
      if (cw == 0) named_bar_sync(3, 256);  // absorb warpgroup 1's last hand-over
    }
  }
}

}  // namespace fa3
