"""The kernel versions the scripted model (tools/scripted_model.py) writes, as CUDA source text.

    source(version)        the whole naive_fwd.cu of that version (the workspace's kernel file)

The agent's sandbox shows only its workspace (naive_fwd.cu, naive_core.cuh, kseek.h), so every
faster version is written here from scratch; each keeps naive::launch_out as the path for every
call its fast path does not take (fp8, varlen, paged, seqused/leftpad, sinks, softcap, descales,
head dims other than 64 and 128, an output dtype other than the input's).

The fast path ("tiled"): one block of 256 threads (16 x 16) per 64 query rows of one (head,
sequence); key tiles of BN rows go through shared memory as fp32 (K, then V in the same buffer).
Thread (ty, tx) owns query rows ty + 16 i (i < 4) and key columns tx + 16 j (j < BN / 16) of the
score tile, and output dims tx + 16 k (k < D / 16). Online softmax in log2 units (exp2f): per
row, the running max m and sum l are reduced across the 16 lanes of the row (shuffles within a
half warp); the accumulator is rescaled by 2^(m_old - m_new) whenever the max moves. Rows padded
with +1 float per row keep the shared-memory reads free of bank conflicts. No tensor cores: fp32
FMAs throughout, so it is far from the baseline but several times faster than the naive kernel,
which computes each score twice and reads K and V once per query row.

Versions:
    v1 naive     the starting kernel (kernels/naive_fwd.cu, unchanged)
    v2 tiled     the fast path above, BN = 64
    v3 norescale v2 without the rescale of the accumulator and the sum when the max moves: wrong
                 whenever a later key tile raises a row's max (the check fails)
    v4 fixed     v2 again
    v5 bn32      v2 with BN = 32 (less shared memory, more blocks per SM)
"""
from __future__ import annotations

VERSIONS = ("v2-tiled", "v3-norescale", "v4-fixed", "v5-bn32")

_HEAD = """\
// naive_fwd.cu, scripted version {tag}: a tiled fp32 attention forward for dense bf16/fp16 calls
// with head_dim 64 or 128, written by the scripted model of tools/scripted_model.py; every other
// call goes to the naive kernel (naive_core.cuh).
//
// One block of 256 threads (16 x 16) per BM = 64 query rows of one (head, sequence). Key tiles of
// BN = {bn} rows pass through shared memory as fp32 (K, then V in the same buffer). Thread (ty, tx)
// owns query rows ty + 16 i and key columns tx + 16 j of the score tile and output dims tx + 16 k.
// Online softmax in log2 units: the running max m and sum l of a row are reduced across its 16
// lanes{rescale_note}.
#include "kseek.h"
#include "naive_core.cuh"

namespace tiled {{

constexpr int BM = 64, BN = {bn}, NT = 256;
constexpr int RM = BM / 16, RN = BN / 16;   // scores per thread: RM rows x RN columns
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

template <int D>
constexpr size_t smem_bytes() {{  // Q [BM][D+1], K or V [BN][D+1], P [BM][BN+1], fp32
  return sizeof(float) * (BM * (D + 1) + BN * (D + 1) + BM * (BN + 1));
}}

__device__ __forceinline__ float half16_max(float x) {{  // over the 16 lanes sharing a row
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}}
__device__ __forceinline__ float half16_sum(float x) {{
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}}

// rows [BM][D] of a [rows][stride] tensor, from row r0 on (zeros past `rows`), into sh [BM][D+1]
template <int D, int R, typename T>
__device__ __forceinline__ void load_tile(float* sh, const T* g, int64_t stride, int r0, int rows) {{
  for (int e = threadIdx.x; e < R * D; e += NT) {{
    const int r = e / D, d = e % D;
    sh[r * (D + 1) + d] = (r0 + r < rows) ? naive::to_float(g[(int64_t)(r0 + r) * stride + d]) : 0.f;
  }}
}}

template <int D, typename T>
__global__ void __launch_bounds__(NT) fwd(const __grid_constant__ kseek_params p) {{
  extern __shared__ float sm[];
  float* Qs = sm;                    // [BM][D+1]
  float* KVs = Qs + BM * (D + 1);    // [BN][D+1]: K, then V
  float* Ps = KVs + BN * (D + 1);    // [BM][BN+1]
  constexpr int DK = D / 16;         // output dims per thread
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
  const int hkv = h / (p.heads_q / p.heads_kv);
  const int sq = p.seqlen_q, sk = p.seqlen_k;
  const T* Q = (const T*)p.q + (int64_t)b * p.q_batch_stride + (int64_t)h * p.q_head_stride;
  const T* K = (const T*)p.k + (int64_t)b * p.k_batch_stride + (int64_t)hkv * p.k_head_stride;
  const T* V = (const T*)p.v + (int64_t)b * p.v_batch_stride + (int64_t)hkv * p.v_head_stride;
  T* O = (T*)p.o + (int64_t)b * p.o_batch_stride + (int64_t)h * p.o_head_stride;
  const float sl2 = p.scale * LOG2E;  // scores in log2 units

  load_tile<D, BM>(Qs, Q, p.q_row_stride, q0, sq);

  // keys this tile of query rows can see (bottom-right aligned; causal = right window 0)
  const int wl = p.window_left, wr = p.causal ? 0 : p.window_right;
  const int shift = sk - sq;                // key position of query row i: i + shift
  const int qlast = min(q0 + BM, sq) - 1;
  int lo = 0, hi = sk - 1;
  if (wl >= 0) lo = max(lo, q0 + shift - wl);
  if (wr >= 0) hi = min(hi, qlast + shift + wr);

  float m[RM], l[RM], acc[RM][DK];
#pragma unroll
  for (int i = 0; i < RM; ++i) {{
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int k = 0; k < DK; ++k) acc[i][k] = 0.f;
  }}

  for (int k0 = (lo / BN) * BN; k0 <= hi; k0 += BN) {{
    __syncthreads();                        // Q written (first tile); V of the last tile used
    load_tile<D, BN>(KVs, K, p.k_row_stride, k0, sk);
    __syncthreads();
    float s[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) s[i][j] = 0.f;
#pragma unroll 8
    for (int d = 0; d < D; ++d) {{
      float qv[RM], kv[RN];
#pragma unroll
      for (int i = 0; i < RM; ++i) qv[i] = Qs[(ty + 16 * i) * (D + 1) + d];
#pragma unroll
      for (int j = 0; j < RN; ++j) kv[j] = KVs[(tx + 16 * j) * (D + 1) + d];
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) s[i][j] = fmaf(qv[i], kv[j], s[i][j]);
    }}
#pragma unroll
    for (int i = 0; i < RM; ++i) {{
      const int row = q0 + ty + 16 * i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < RN; ++j) {{
        const int key = k0 + tx + 16 * j;
        bool vis = row < sq && key < sk;
        if (wl >= 0 && key < row + shift - wl) vis = false;
        if (wr >= 0 && key > row + shift + wr) vis = false;
        s[i][j] = vis ? s[i][j] * sl2 : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }}
      const float mnew = fmaxf(m[i], half16_max(mx));
      const float mref = mnew == -INFINITY ? 0.f : mnew;   // a row with nothing visible yet
      float rs = 0.f;
#pragma unroll
      for (int j = 0; j < RN; ++j) {{
        const float pj = exp2f(s[i][j] - mref);            // 0 for a masked key
        Ps[(ty + 16 * i) * (BN + 1) + tx + 16 * j] = pj;
        rs += pj;
      }}
      rs = half16_sum(rs);
{rescale}
      m[i] = mnew;
    }}
    __syncthreads();                        // K used; P written
    load_tile<D, BN>(KVs, V, p.v_row_stride, k0, sk);
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < BN; ++c) {{
      float pv[RM];
#pragma unroll
      for (int i = 0; i < RM; ++i) pv[i] = Ps[(ty + 16 * i) * (BN + 1) + c];
#pragma unroll
      for (int k = 0; k < DK; ++k) {{
        const float vv = KVs[c * (D + 1) + tx + 16 * k];
#pragma unroll
        for (int i = 0; i < RM; ++i) acc[i][k] = fmaf(pv[i], vv, acc[i][k]);
      }}
    }}
  }}

#pragma unroll
  for (int i = 0; i < RM; ++i) {{
    const int row = q0 + ty + 16 * i;
    if (row >= sq) continue;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;      // no visible key: zeros, lse -inf
#pragma unroll
    for (int k = 0; k < DK; ++k) naive::store(O + (int64_t)row * p.o_row_stride + tx + 16 * k, acc[i][k] * inv);
    if (p.lse && tx == 0)
      p.lse[(int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride + row] =
          l[i] > 0.f ? m[i] * LN2 + logf(l[i]) : -INFINITY;
  }}
}}

template <int D, typename T>
int launch(const kseek_params* p, cudaStream_t stream) {{
  static bool ready = false;                // the shared-memory opt-in, once per instantiation
  if (!ready) {{
    if (cudaFuncSetAttribute(fwd<D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes<D>()) !=
        cudaSuccess)
      return KSEEK_ERR_CUDA;
    ready = true;
  }}
  const dim3 grid((unsigned)((p->seqlen_q + BM - 1) / BM), (unsigned)p->heads_q, (unsigned)p->batch);
  fwd<D, T><<<grid, NT, smem_bytes<D>(), stream>>>(*p);
  return cudaGetLastError() == cudaSuccess ? KSEEK_OK : KSEEK_ERR_CUDA;
}}

// Whether the fast path computes this call: dense bf16/fp16 in and the same dtype out, D = Dv = 64
// or 128, no varlen, paging, key ends, left pad, sinks, softcap or descales.
inline bool takes(const kseek_params* p) {{
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return false;
  if (p->out_dtype != p->dtype) return false;
  if (p->head_dim != p->head_dim_v || (p->head_dim != 64 && p->head_dim != 128)) return false;
  if (p->cu_seqlens_q || p->cu_seqlens_k || p->page_table || p->seqused_k || p->leftpad_k) return false;
  if (p->sinks || p->softcap > 0.f || p->q_descale || p->k_descale || p->v_descale) return false;
  return p->seqlen_k > 0;
}}

template <typename T>
int dispatch(const kseek_params* p, cudaStream_t stream) {{
  return p->head_dim == 64 ? launch<64, T>(p, stream) : launch<128, T>(p, stream);
}}

}}  // namespace tiled

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {{
  if (const int st = naive::check_params(p); st != KSEEK_OK) return st;
  if (p->seqlen_q == 0) return KSEEK_OK;  // nothing to compute
  if (tiled::takes(p))
    return p->dtype == KSEEK_BF16 ? tiled::dispatch<__nv_bfloat16>(p, stream) : tiled::dispatch<__half>(p, stream);
  switch (p->dtype) {{
    case KSEEK_BF16: return naive::launch_out<__nv_bfloat16>(p, stream);
    case KSEEK_FP16: return naive::launch_out<__half>(p, stream);
    default: return naive::launch_out<__nv_fp8_e4m3>(p, stream);
  }}
}}

extern "C" size_t kseek_workspace_bytes(const kseek_params* p) {{
  (void)p;
  return 0;
}}

extern "C" const char* kseek_name(void) {{ return "naive_fwd ({tag})"; }}
"""

_RESCALE = """\
      const float alpha = exp2f(m[i] - mref);              // 0 while the row had nothing visible
      l[i] = l[i] * alpha + rs;
#pragma unroll
      for (int k = 0; k < DK; ++k) acc[i][k] *= alpha;"""

_NO_RESCALE = """\
      l[i] += rs;                                          // (no rescale when the max moves)"""


def source(version: str) -> str:
    """naive_fwd.cu as the scripted model writes it at `version` (one of VERSIONS)."""
    if version not in VERSIONS:
        raise ValueError(f"scripted kernel version {version!r}: one of {', '.join(VERSIONS)}")
    bn = 32 if version == "v5-bn32" else 64
    broken = version == "v3-norescale"
    note = ("; the accumulator is NOT rescaled when the max moves (an attempted saving)" if broken else
            ", and the accumulator is rescaled by 2^(m_old - m_new) when the max moves")
    return _HEAD.format(tag=version, bn=bn, rescale=_NO_RESCALE if broken else _RESCALE, rescale_note=note)


def write_all(folder) -> list:
    """Every version as <folder>/<version>/naive_fwd.cu beside naive_core.cuh and kseek.h (to build
    them with nvcc outside a campaign: tests/unit/test_scripted_campaign.py)."""
    import shutil
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    out = []
    for v in VERSIONS:
        d = Path(folder) / v
        d.mkdir(parents=True, exist_ok=True)
        (d / "naive_fwd.cu").write_text(source(v))
        for h in ("naive_core.cuh", "kseek.h"):
            shutil.copyfile(repo / "kernels" / h, d / h)
        out.append(d / "naive_fwd.cu")
    return out
