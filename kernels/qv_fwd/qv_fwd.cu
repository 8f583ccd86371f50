// qv_fwd.cu: attention forward with FlashAttention-3's qv term (MLA-style models), on tensor cores
// (kernelseek/qv_attention.py calls it; before it, kernelseek.attention concatenated [q, qv] and [k, v]
// and ran the naive wide kernel).
//
//   score = scale * (q . k + qv . v)      q, k: D = 64;  qv, v, o: Dv = 256 or 512 (FA3's qv shapes)
//
// qv may be NULL: then score = scale * q . k, FA3's D 64 with Dv 256 / 512 without qv. Everything else as
// kernels/kseek.h says: dense, varlen or paged K/V, seqused_k, leftpad_k, causal / window /
// attention_chunk masks (bottom-right aligned), softcap, GQA, LSE; bf16 or fp16 in and out. No sinks, no
// fp8 (FA3 refuses fp8 with qv): those calls answer KSEEK_ERR_UNSUPPORTED and kernelseek.attention keeps
// its other routes. Rows: row m of a sequence and KV head is query position m / G, query head m % G of
// the KV head's G (so a decode's G heads fill one 16-row tile).
//
// Parts:
//   qv_common.cuh  launch arguments, mma.sync / ldmatrix / cp.async wrappers, a sequence's geometry,
//                  the visible keys of a row, where o / lse go
//   qv_split.cuh   sequences with <= 64 rows per KV head (decodes): mma.sync m16n8k16, 16 rows per CTA,
//                  the keys split over CTAs (fp32 partials in the workspace, merged by qv_combine,
//                  launched by programmatic dependent launch); the four warps split the dot-product
//                  dims, sum their partial S through shared memory and each owns Dv/4 output columns
//   qv_ws.cuh      longer sequences (prefill chunks), the default: warp-specialized, a producer warpgroup
//                  (cp.async into a ring of 64-key stages, mbarriers), one warpgroup for S, the softmax and
//                  half of P V, one for the other half of P V (P through shared memory)
//   qv_wgmma.cuh   the same rows, v18's form (kept for A/B probes): two warpgroups on 64 rows in lockstep,
//                  wgmma for S (halves of the dot-product k-steps, summed through shared memory) and P V
//   qv_fwd.cu      this file: the ABI, parameter checks, the split rule, launches
// A varlen batch gets both kernels; each CTA skips the sequences of the other kind.
#include "qv_common.cuh"
#include "qv_split.cuh"
#include "qv_wgmma.cuh"
#include "qv_ws.cuh"

namespace qv {

// ---- host ------------------------------------------------------------------------------------------------
struct Plan {
  int G, rows, small_tiles, big_tiles, small_role, nsplit, kps, msmall;
  bool small, big;
};

static int sm_count() {
  static int cached[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
  if (!cached[dev]) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
    cached[dev] = n;
  }
  return cached[dev];
}

static Plan make_plan(const kseek_params* p) {
  Plan pl{};
  pl.G = p->heads_q / p->heads_kv;
  pl.rows = p->seqlen_q * pl.G;
  const bool varlen = p->cu_seqlens_q != nullptr;
  pl.small = pl.rows <= kSmallRows || varlen;
  pl.big = pl.rows > kSmallRows;
  pl.small_role = pl.rows <= kSmallRows ? kAll : kSmall;
  pl.msmall = pl.rows <= kSmallRows ? ((pl.rows + 15) / 16) * 16 : kSmallRows;
  pl.small_tiles = pl.msmall / 16;
  pl.big_tiles = (pl.rows + 63) / 64;
  // key splits of the small launch: up to 8 CTAs per SM, at least 64 keys per split. Measured on the H200
  // (tools/qv_probe.py): session 18, 4 decodes of <= 2049 keys fastest at 13-22 splits (33 splits of 64 keys:
  // 0.0262 ms, 13: 0.0250) with the serial merge; session 22, with qv_combine's CTA per row, 24 and 33 splits
  // 0.0215 ms against 17's 0.0254 (at least 128 keys per split, the rule before); 128 decodes of 1k-8k keys
  // best at 8 (5: 0.304 ms, 8: 0.284). This rule gives 33 and 9.
  const int sk = p->seqlen_k;
  const int ctas = p->batch * p->heads_kv * (pl.rows <= kSmallRows ? pl.small_tiles : 1);
  int ns = p->num_splits > 0 ? p->num_splits : (8 * sm_count() + ctas - 1) / ctas;
  ns = std::min(ns, std::max(1, (sk + 63) / 64));
  ns = std::max(1, std::min(ns, kMaxSplits));
  pl.kps = ((std::max(sk, 1) + ns - 1) / ns + kN - 1) / kN * kN;
  pl.nsplit = std::max(1, (std::max(sk, 1) + pl.kps - 1) / pl.kps);
  if (pl.nsplit == 1) pl.kps = INT32_MAX / 2;
  return pl;
}

static size_t ws_bytes(const kseek_params* p, const Plan& pl) {
  if (!pl.small || pl.nsplit == 1) return 0;
  const size_t R = (size_t)p->batch * p->heads_kv * pl.msmall;
  return (size_t)pl.nsplit * R * ((size_t)p->head_dim_v + 1) * sizeof(float) + 256;
}

static bool aligned16(const void* x) { return ((uintptr_t)x & 15) == 0; }

static int check(const kseek_params* p, const void* qv, int64_t qv_bs, int64_t qv_rs, int64_t qv_hs) {
  if (!p) return KSEEK_ERR_INVALID;
  if (p->abi_version != KSEEK_ABI_VERSION) return KSEEK_ERR_ABI;
  if (!p->q || !p->k || !p->v || !p->o) return KSEEK_ERR_INVALID;
  if (p->batch <= 0 || p->heads_q <= 0 || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return KSEEK_ERR_INVALID;
  if (p->seqlen_q < 0 || p->seqlen_k < 0 || p->attention_chunk < 0) return KSEEK_ERR_INVALID;
  if (p->page_table && p->page_size <= 0) return KSEEK_ERR_INVALID;
  if ((p->cu_seqlens_k != nullptr) && p->page_table) return KSEEK_ERR_INVALID;
  if (p->dtype != KSEEK_BF16 && p->dtype != KSEEK_FP16) return KSEEK_ERR_UNSUPPORTED;
  if (p->out_dtype != p->dtype) return KSEEK_ERR_UNSUPPORTED;
  if (p->head_dim != kD || (p->head_dim_v != 256 && p->head_dim_v != 512)) return KSEEK_ERR_UNSUPPORTED;
  if (p->sinks || p->q_descale || p->k_descale || p->v_descale) return KSEEK_ERR_UNSUPPORTED;
  // 16-byte cp.async of every row chunk; 4-byte stores of o
  const int64_t s16[] = {p->q_row_stride, p->q_head_stride, p->k_row_stride, p->k_head_stride, p->v_row_stride,
                         p->v_head_stride, qv_rs, qv_hs, p->cu_seqlens_q ? 0 : p->q_batch_stride,
                         p->cu_seqlens_q ? 0 : qv_bs, (p->cu_seqlens_k) ? 0 : p->k_batch_stride,
                         (p->cu_seqlens_k) ? 0 : p->v_batch_stride};
  for (int64_t x : s16)
    if (x % 8) return KSEEK_ERR_UNSUPPORTED;
  if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v) || (qv && !aligned16(qv))) return KSEEK_ERR_UNSUPPORTED;
  if ((p->o_row_stride | p->o_head_stride | (p->cu_seqlens_q ? 0 : p->o_batch_stride)) & 1) return KSEEK_ERR_UNSUPPORTED;
  if ((uintptr_t)p->o & 3) return KSEEK_ERR_UNSUPPORTED;
  return KSEEK_OK;
}

// The split kernel's stages where its grid has at most one CTA per SM: 3 (default) or 2 (A/B,
// kseek_qv_set_split_stages).
static int g_split_stages = 3;

#define QV_CK(x)                                    \
  do {                                              \
    if ((x) != cudaSuccess) return KSEEK_ERR_CUDA;  \
  } while (0)

template <typename T, int Dv, int kRG, int kS>
static int launch_attn_s(const kseek_params* p, const Args& a, int tiles, cudaStream_t st) {
  using C = Cfg<Dv, kRG, kS>;
  static bool attr[64] = {false};   // per instantiation and device; setting it twice is harmless
  int dev = 0;
  QV_CK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64 || !attr[dev]) {
    QV_CK(cudaFuncSetAttribute(qv_attn<T, Dv, kRG, kS>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    if (dev >= 0 && dev < 64) attr[dev] = true;
  }
  dim3 grid(tiles, p->heads_kv, p->batch * a.nsplit);
  qv_attn<T, Dv, kRG, kS><<<grid, C::kThreads, C::kSmem, st>>>(*p, a);
  QV_CK(cudaGetLastError());
  return KSEEK_OK;
}

// The split kernel: 16-row tiles (kRG 1) with three K/V stages where the grid has at most one CTA per SM
// (the 2-stage form fits two per SM; one alone waits out each block's load), else two.
template <typename T, int Dv, int kRG>
static int launch_attn(const kseek_params* p, const Args& a, int tiles, cudaStream_t st) {
  const int64_t ctas = (int64_t)tiles * p->heads_kv * p->batch * a.nsplit;
  if (kRG == 1 && g_split_stages != 2 && ctas <= sm_count()) return launch_attn_s<T, Dv, 1, 3>(p, a, tiles, st);
  return launch_attn_s<T, Dv, kRG, 2>(p, a, tiles, st);
}

template <typename T, int Dv>
static int launch_wg(const kseek_params* p, const Args& a, int tiles, cudaStream_t st) {
  using C = CfgW<Dv>;
  static bool attr[64] = {false};
  int dev = 0;
  QV_CK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64 || !attr[dev]) {
    QV_CK(cudaFuncSetAttribute(qv_attn_wg<T, Dv>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    if (dev >= 0 && dev < 64) attr[dev] = true;
  }
  qv_attn_wg<T, Dv><<<dim3(tiles, p->heads_kv, p->batch), C::kThreads, C::kSmem, st>>>(*p, a);
  QV_CK(cudaGetLastError());
  return KSEEK_OK;
}

// qv_ws: 1 = K/V blocks by TMA where the maps take the call (default), 0 = cp.async only (A/B);
// warpgroup 1's intra-warpgroup overlap: 0 = CfgS::kOverlapAuto (default), 1 = always, 2 = never (A/B)
static int g_ws_tma = 1, g_ws_ovl = 0;

// The K and V maps of a qv_ws launch: 64-column boxes of 64 rows (dense, packed keys) or of
// gcd(64, page_size) rows of one page (paged, page size a multiple of 8); tm.on = 0 where the driver
// refuses a map (unaligned base or strides) or the layout has no map (packed keys without total_k).
static void tma_maps(const kseek_params* p, TmaKV& tm) {
  memset(&tm, 0, sizeof(tm));
  if (p->head_dim != 64) return;
  const bool f16 = p->dtype == KSEEK_FP16;
  int64_t rows = p->seqlen_k, nb = p->batch;
  tm.box = 64;
  if (p->page_table) {
    if (p->page_size <= 0 || p->page_size % 8 || p->num_pages <= 0) return;
    int x = 64, y = p->page_size;
    while (y) { const int r = x % y; x = y; y = r; }
    tm.box = x;
    rows = p->page_size;
    nb = p->num_pages;
  } else if (p->cu_seqlens_k) {
    if (p->total_k <= 0) return;
    rows = p->total_k;
    nb = 1;
  }
  const CUtensorMapDataType dt = f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if (!fa3::make_map_4d(&tm.k, dt, 2, p->k, p->head_dim, rows, p->heads_kv, nb, p->k_row_stride, p->k_head_stride,
                        p->k_batch_stride, 64, tm.box, CU_TENSOR_MAP_SWIZZLE_128B, &tm.k_swap) ||
      !fa3::make_map_4d(&tm.v, dt, 2, p->v, p->head_dim_v, rows, p->heads_kv, nb, p->v_row_stride,
                        p->v_head_stride, p->v_batch_stride, 64, tm.box, CU_TENSOR_MAP_SWIZZLE_128B, &tm.v_swap))
    return;
  tm.on = 1;
}

template <typename T, int Dv, bool QV, bool OVL>
static int launch_ws(const kseek_params* p, const Args& a, int tiles, cudaStream_t st) {
  using C = CfgS<Dv, QV>;
  static bool attr[64] = {false};
  int dev = 0;
  QV_CK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64 || !attr[dev]) {
    QV_CK(cudaFuncSetAttribute(qv_attn_ws<T, Dv, QV, OVL>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    if (dev >= 0 && dev < 64) attr[dev] = true;
  }
  dim3 grid(tiles, p->heads_kv, p->batch);
  Args ac = a;
  if (p->cu_seqlens_q) {   // varlen: only the long sequences' tiles get a CTA (find_tile); at most
    // sum over them of ceil(rows / 64) <= total rows / 64 + their count, their count <= total rows / 65
    const int64_t rows = p->total_q * (p->heads_q / p->heads_kv);
    const int64_t bound = (rows + 63) / 64 + std::min<int64_t>(p->batch, rows / (kSmallRows + 1) + 1);
    grid = dim3((unsigned)std::max<int64_t>(1, std::min<int64_t>((int64_t)tiles * p->batch, bound)), p->heads_kv, 1);
    ac.compact = 1;
  }
  TmaKV tm;
  tma_maps(p, tm);
  if (!g_ws_tma) tm.on = 0;
  qv_attn_ws<T, Dv, QV, OVL><<<grid, C::kThreads, C::kSmem, st>>>(*p, ac, tm);
  QV_CK(cudaGetLastError());
  return KSEEK_OK;
}

// long sequences: 2 = qv_ws.cuh (default), 1 = qv_wgmma.cuh, 0 = the split kernel's 64-row form (A/B probes)
static int g_big_kernel = 2;

template <typename T, int Dv>
static int run(const kseek_params* p, Args a, const Plan& pl, cudaStream_t st) {
  if (pl.big) {   // one split
    Args ab = a;
    ab.role = pl.small ? kBig : kAll;
    ab.nsplit = 1;
    ab.kps = INT32_MAX / 2;
    const bool ovl_qv = g_ws_ovl ? g_ws_ovl == 1 : CfgS<Dv, true>::kOverlapAuto;
    const bool ovl_pl = g_ws_ovl ? g_ws_ovl == 1 : CfgS<Dv, false>::kOverlapAuto;
    const int rc = g_big_kernel == 2
                       ? (a.qv ? (ovl_qv ? launch_ws<T, Dv, true, true>(p, ab, pl.big_tiles, st)
                                         : launch_ws<T, Dv, true, false>(p, ab, pl.big_tiles, st))
                               : (ovl_pl ? launch_ws<T, Dv, false, true>(p, ab, pl.big_tiles, st)
                                         : launch_ws<T, Dv, false, false>(p, ab, pl.big_tiles, st)))
                   : g_big_kernel == 1 ? launch_wg<T, Dv>(p, ab, pl.big_tiles, st)
                                       : launch_attn<T, Dv, 4>(p, ab, pl.big_tiles, st);
    if (rc) return rc;
  }
  if (pl.small) {
    a.role = pl.small_role;
    int rc = launch_attn<T, Dv, 1>(p, a, pl.small_tiles, st);
    if (rc) return rc;
    if (a.nsplit > 1) {
      const int64_t R = (int64_t)p->batch * p->heads_kv * a.msmall;
      // programmatic dependent launch: the merge's launch overlaps the splits' tail (griddepcontrol
      // in both kernels); a plain launch where the attribute is refused
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((unsigned)R);   // qv_combine: one CTA per row
      cfg.blockDim = dim3(128);
      cfg.stream = st;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at;
      cfg.numAttrs = 1;
      if (cudaLaunchKernelEx(&cfg, qv_combine<T, Dv>, *p, a) != cudaSuccess) {
        (void)cudaGetLastError();
        qv_combine<T, Dv><<<cfg.gridDim, 128, 0, st>>>(*p, a);
      }
      QV_CK(cudaGetLastError());
    }
  }
  return KSEEK_OK;
}

static int g_last_splits = 0;

}  // namespace qv

extern "C" int kseek_qv_abi(void) { return KSEEK_QV_ABI_VERSION; }

extern "C" const char* kseek_qv_name(void) { return "qv_fwd (mma.sync split kernel + warp-specialized wgmma, D 64 + Dv 256/512)"; }

// Which kernel takes sequences of > 64 rows per KV head: 2 (default) the warp-specialized one (K/V by
// TMA; warpgroup 1's overlap where CfgS::kOverlapAuto says), 3 the same with every K/V block by cp.async,
// 4 and 5 the TMA form with the overlap always / never, 1 v18's wgmma form, 0 the mma.sync 64-row tiles;
// for A/B probes (tools/qv_probe.py) and tests. Out of range clamps to 0..5. Returns the previous setting.
extern "C" int kseek_qv_set_big_kernel(int k) {
  const int old = qv::g_big_kernel != 2 ? qv::g_big_kernel : !qv::g_ws_tma ? 3 : qv::g_ws_ovl ? 3 + qv::g_ws_ovl : 2;
  k = k < 0 ? 0 : k > 5 ? 5 : k;
  qv::g_big_kernel = k >= 2 ? 2 : k;
  qv::g_ws_tma = k == 3 ? 0 : 1;
  qv::g_ws_ovl = k >= 4 ? k - 3 : 0;
  return old;
}

// The split kernel's K/V stages where its grid has at most one CTA per SM: 3 (default) or 2 (v21's); for
// A/B probes. Returns the previous setting.
extern "C" int kseek_qv_set_split_stages(int s) {
  const int old = qv::g_split_stages;
  qv::g_split_stages = s == 2 ? 2 : 3;
  return old;
}

// Splits the last kseek_qv_fwd call used (1 = none); for tests and timing notes.
extern "C" int kseek_qv_last_splits(void) { return qv::g_last_splits; }

extern "C" size_t kseek_qv_workspace_bytes(const kseek_params* p) {
  if (!p || p->heads_kv <= 0 || p->heads_q % p->heads_kv) return 0;
  return qv::ws_bytes(p, qv::make_plan(p));
}

// q, k, v, o, lse and the rest as kseek.h says (head_dim 64 = q/k, head_dim_v = qv/v/o); qv has q's
// layout with Dv columns: dense [B, Sq, Hq, Dv] or packed [total_q, Hq, Dv] (batch stride unused).
extern "C" int kseek_qv_fwd(const kseek_params* p, const void* qv_ptr, int64_t qv_batch_stride,
                            int64_t qv_row_stride, int64_t qv_head_stride, cudaStream_t stream) {
  const int rc = qv::check(p, qv_ptr, qv_batch_stride, qv_row_stride, qv_head_stride);
  if (rc) return rc;
  if (p->seqlen_q == 0) return KSEEK_OK;
  const qv::Plan pl = qv::make_plan(p);
  const size_t need = qv::ws_bytes(p, pl);
  if (need && (!p->workspace || p->workspace_bytes < need)) return KSEEK_ERR_WORKSPACE;
  qv::Args a{};
  a.qv = qv_ptr;
  a.qv_bs = qv_batch_stride;
  a.qv_rs = qv_row_stride;
  a.qv_hs = qv_head_stride;
  a.G = pl.G;
  a.msmall = pl.msmall;
  a.nsplit = pl.small ? pl.nsplit : 1;
  a.kps = pl.small ? pl.kps : INT32_MAX / 2;
  if (need) {
    const size_t R = (size_t)p->batch * p->heads_kv * pl.msmall;
    a.ws_lse = (float*)p->workspace;
    const size_t lse_b = ((size_t)pl.nsplit * R * sizeof(float) + 255) / 256 * 256;
    a.ws_o = (float*)((char*)p->workspace + lse_b);
  }
  qv::g_last_splits = a.nsplit;
  const bool bf = p->dtype == KSEEK_BF16;
  if (p->head_dim_v == 512)
    return bf ? qv::run<__nv_bfloat16, 512>(p, a, pl, stream) : qv::run<__half, 512>(p, a, pl, stream);
  return bf ? qv::run<__nv_bfloat16, 256>(p, a, pl, stream) : qv::run<__half, 256>(p, a, pl, stream);
}
