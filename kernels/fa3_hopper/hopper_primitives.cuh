// hopper_primitives.cuh: the Hopper (sm_90a) building blocks every path of fa3_hopper uses, each a
// thin wrapper over one PTX instruction or layout rule, named after the PTX ISA section it follows:
// the 128B swizzle, wgmma fragments and descriptors, mbarrier, TMA (bulk tensor copies and tensor
// maps), setmaxnreg, wgmma (one generator for every shape and type), ldmatrix / stmatrix, named
// barriers; and the host-side device queries (sm_90, SM count, current device).
// probe_fa3.cu and probe_fp8.cu (tests/probes/) test each of them on its own.
#pragma once
#include "../kseek.h"

#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's types only: the function is reached
                   // through cudaGetDriverEntryPointByVersion, so no -lcuda and no dlopen here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

namespace fa3 {

// ---- shared-memory tile layout ------------------------------------------------------------------
// A tile of R rows x D 16-bit elements (Q: R=128 query rows; K, V: R=128 keys) is stored as D/64
// "column chunks"; chunk c holds columns 64c..64c+63 of all R rows, R x 128 bytes, at byte offset
// c*R*128. Inside a chunk, row r occupies bytes r*128..r*128+127 and its 16-byte unit u (columns
// 8u..8u+7 of the chunk) is stored at unit u ^ (r % 8): the TMA SWIZZLE_128B pattern, which is the
// address bits [4:6] XOR [7:9] and therefore needs every chunk to start on a 1024-byte boundary.
// This is also the canonical 128B-swizzle layout wgmma reads through a matrix descriptor
// (8-row x 128-byte swizzle atoms of 1024 bytes).
__host__ __device__ __forceinline__ uint32_t swz_offset(int row, int col, int rows) {
  const int chunk = col >> 6;
  const int inrow = (col & 63) * 2;          // byte inside the 128-byte row of the chunk
  const int unit = (inrow >> 4) ^ (row & 7);
  return (uint32_t)(chunk * rows * 128 + row * 128 + unit * 16 + (inrow & 15));
}

// ---- wgmma accumulator fragment (PTX ISA: "Register Fragments", wgmma .m64nNk16, f32 D) ---------
// Thread t (0..127 of the warpgroup) holds N/2 floats of the 64 x N tile; element i is at
//   row = 16*(t/32) + (t%32)/4 + 8*((i/2)%2),   col = 8*(i/4) + 2*(t%4) + (i%2).
__host__ __device__ __forceinline__ int acc_row(int t, int i) {
  return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1);
}
__host__ __device__ __forceinline__ int acc_col(int t, int i) {
  return 8 * (i >> 2) + 2 * (t & 3) + (i & 1);
}
// The A fragment of wgmma .m64nNk16 with A in registers (4 x .b32 = 8 halves per thread) has
//   a[0] = (row r, cols 2q, 2q+1), a[1] = (r+8, 2q..), a[2] = (r, 8+2q..), a[3] = (r+8, 8+2q..)
// with r = 16*warp + lane/4, q = lane%4, columns relative to the k16 slice; so k-slice kk of a
// 64 x N accumulator is exactly its elements 8kk..8kk+7 taken in pairs (FA2/FA3's identity).

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier (PTX ISA: "Parallel Synchronization and Communication Instructions: mbarrier") ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// arrive (count 1) and raise the expected transaction bytes of the current phase
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// Wait until the phase with the given parity has completed. A fresh barrier is in phase 0, so
// waiting for parity 1 returns at once (how the producer's first pass over the empty ring starts).
// FA3_DEBUG_HANG (the probe defines it) traps after ~2^31 polls instead of hanging forever.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef FA3_DEBUG_HANG
  long long spins = 0;
  while (!mbar_try_wait(bar, parity)) {
    if (++spins > (1ll << 31)) __trap();
  }
#else
  while (!mbar_try_wait(bar, parity)) {
  }
#endif
}

// ---- TMA (PTX ISA: "Data Movement: cp.async.bulk.tensor"; tensor maps: "Tensor Map") ------------
__device__ __forceinline__ void prefetch_tmap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// 4-D tiled load of one box into shared memory, completing `bytes` of transactions on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// 4-D tiled store of one box from shared memory (bulk async group of this thread).
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk stores have read their shared memory (it may be written again).
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// This thread's bulk stores are complete.
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Tensor-map coordinates of (column, row, head, batch) in the map's dimension order.
__device__ __forceinline__ void tma_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                         int col, int row, int head, int batch, int swap) {
  if (swap) tma_load_4d(dst, map, bar, col, head, row, batch);
  else tma_load_4d(dst, map, bar, col, row, head, batch);
}

// ---- register rebalancing (PTX ISA: "setmaxnreg") ---------------------------------------------
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

// ---- wgmma (PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions") ----
// Matrix descriptor ("Matrix Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading
// dimension byte offset >> 4, 32-45 stride dimension byte offset >> 4, 49-51 base offset (0: every
// swizzle atom starts on a 1024-byte boundary), 62-63 layout/swizzle (1 = 128B swizzle).
__host__ __device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo_bytes,
                                                       uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
  d |= (uint64_t)((lbo_bytes & 0x3FFFF) >> 4) << 16;
  d |= (uint64_t)((sbo_bytes & 0x3FFFF) >> 4) << 32;
  d |= (uint64_t)1 << 62;
  return d;
}
// K-major operand (Q as A, K as B of S = Q K^T): the rows of the tile are the M (or N) dimension,
// the 16 elements of k-step ks are bytes 32*(ks%4).. of chunk ks/4. Within a swizzle atom wgmma
// applies the XOR on absolute address bits, so a k-step inside the 128-byte row is a plain +32 B
// on the start address. SBO = 1024 (next group of 8 rows); LBO unused for swizzled K-major (1).
// `tile` is the address of row 0 of the operand, `chunk_rows` the row count of its chunks.
__host__ __device__ __forceinline__ uint64_t desc_kmajor(uint32_t tile, int chunk_rows, int ks) {
  return make_desc(tile + (uint32_t)((ks >> 2) * chunk_rows * 128 + (ks & 3) * 32), 16, 1024);
}
// MN-major operand (V as B of O = P V, instruction trans-b = 1): the GEMM's K is the key index
// (tile rows), its N the value dim (tile columns, contiguous). k-step ks = keys 16ks..16ks+15 =
// +16*128 bytes. LBO = byte distance between 64-column chunks (the next 64 N-elements:
// chunk_rows*128), SBO = 1024 (the next 8 keys). (PTX ISA "Strides": for MN-major swizzled
// layouts LBO is the stride from the first swizzle-width of MN to the next, SBO the stride
// between 8-row groups along K.) probe_fa3.cu's test (b) also tries LBO/SBO swapped.
__host__ __device__ __forceinline__ uint64_t desc_mnmajor(uint32_t tile, int chunk_rows, int ks) {
  return make_desc(tile + (uint32_t)(ks * 16 * 128), (uint32_t)(chunk_rows * 128), 1024);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pin accumulator registers after a wait: the wgmma asm "writes" them when issued as far as the
// compiler knows, so without this it could read them before wgmma.wait_group.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// ---- wgmma instructions (PTX ISA "wgmma.mma_async"): one generator for every shape and type ------
// FA3_WGMMA(PRE, INSN, NA, TAIL, inputs...) is one asm statement: PRE (predicate setup, or ""), the
// instruction INSN, its NA f32 accumulators d[0..NA-1] as {%0, ..., %(NA-1)} (read and written),
// then TAIL, whose operands are numbered from NA on (the inputs, in order). NA is a multiple of 8
// up to 96; FA3_REGS_<NA> and FA3_ACCS_<NA> spell its register list and its operands.
#define FA3_ACC8(o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), \
                    "+f"(d[o + 5]), "+f"(d[o + 6]), "+f"(d[o + 7])
#define FA3_ACCS_8 FA3_ACC8(0)
#define FA3_ACCS_16 FA3_ACCS_8, FA3_ACC8(8)
#define FA3_ACCS_24 FA3_ACCS_16, FA3_ACC8(16)
#define FA3_ACCS_32 FA3_ACCS_24, FA3_ACC8(24)
#define FA3_ACCS_40 FA3_ACCS_32, FA3_ACC8(32)
#define FA3_ACCS_48 FA3_ACCS_40, FA3_ACC8(40)
#define FA3_ACCS_56 FA3_ACCS_48, FA3_ACC8(48)
#define FA3_ACCS_64 FA3_ACCS_56, FA3_ACC8(56)
#define FA3_ACCS_72 FA3_ACCS_64, FA3_ACC8(64)
#define FA3_ACCS_80 FA3_ACCS_72, FA3_ACC8(72)
#define FA3_ACCS_88 FA3_ACCS_80, FA3_ACC8(80)
#define FA3_ACCS_96 FA3_ACCS_88, FA3_ACC8(88)
#define FA3_REGS_8 "%0,%1,%2,%3,%4,%5,%6,%7"
#define FA3_REGS_16 FA3_REGS_8 "," "%8,%9,%10,%11,%12,%13,%14,%15"
#define FA3_REGS_24 FA3_REGS_16 "," "%16,%17,%18,%19,%20,%21,%22,%23"
#define FA3_REGS_32 FA3_REGS_24 "," "%24,%25,%26,%27,%28,%29,%30,%31"
#define FA3_REGS_40 FA3_REGS_32 "," "%32,%33,%34,%35,%36,%37,%38,%39"
#define FA3_REGS_48 FA3_REGS_40 "," "%40,%41,%42,%43,%44,%45,%46,%47"
#define FA3_REGS_56 FA3_REGS_48 "," "%48,%49,%50,%51,%52,%53,%54,%55"
#define FA3_REGS_64 FA3_REGS_56 "," "%56,%57,%58,%59,%60,%61,%62,%63"
#define FA3_REGS_72 FA3_REGS_64 "," "%64,%65,%66,%67,%68,%69,%70,%71"
#define FA3_REGS_80 FA3_REGS_72 "," "%72,%73,%74,%75,%76,%77,%78,%79"
#define FA3_REGS_88 FA3_REGS_80 "," "%80,%81,%82,%83,%84,%85,%86,%87"
#define FA3_REGS_96 FA3_REGS_88 "," "%88,%89,%90,%91,%92,%93,%94,%95"
#define FA3_WGMMA(PRE, INSN, NA, TAIL, ...) \
  asm volatile(PRE INSN " {" FA3_REGS_##NA "}" TAIL : FA3_ACCS_##NA : __VA_ARGS__)

// The 16-bit forms, for one N = 2 NA (X0, X1, ... = the operand numbers NA, NA + 1, ...):
//   wgmma_ss<F16>(d, da, db, scale_d): D[64 x N] (+)= A[64 x 16] * B[16 x N], A and B in shared
//     memory (descriptors), both K-major;
//   wgmma_rs_tb<F16>(d, a, db, scale_d): the same with A in registers (4 x .b32 per thread) and B
//     N-major (trans-b = 1: V as stored, [key][dv]).
// scale_d = 0 overwrites D (the first k-step), 1 accumulates. F16: fp16 inputs, else bf16.
#define FA3_WGMMA_SS16(TY, N, NA, X0, X1, X2)                                                     \
  FA3_WGMMA("{\n.reg .pred p;\nsetp.ne.b32 p, %" #X2 ", 0;\n",                                   \
            "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY, NA,                     \
            ", %" #X0 ", %" #X1 ", p, 1, 1, 0, 0;\n}\n", "l"(da), "l"(db), "r"(scale_d))
#define FA3_WGMMA_RS16(TY, N, NA, X0, X1, X2, X3, X4, X5)                                         \
  FA3_WGMMA("{\n.reg .pred p;\nsetp.ne.b32 p, %" #X5 ", 0;\n",                                   \
            "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY, NA,                     \
            ", {%" #X0 ",%" #X1 ",%" #X2 ",%" #X3 "}, %" #X4 ", p, 1, 1, 1;\n}\n", "r"(a[0]),     \
            "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d))
#define FA3_WGMMA_16BIT_SHAPE(N, NA, X0, X1, X2, X3, X4, X5)                                      \
  template <bool F16>                                                                             \
  __device__ __forceinline__ void wgmma_ss(float(&d)[NA], uint64_t da, uint64_t db, int scale_d) { \
    if constexpr (F16) FA3_WGMMA_SS16("f16", N, NA, X0, X1, X2);                                  \
    else FA3_WGMMA_SS16("bf16", N, NA, X0, X1, X2);                                               \
  }                                                                                               \
  template <bool F16>                                                                             \
  __device__ __forceinline__ void wgmma_rs_tb(float(&d)[NA], const uint32_t(&a)[4], uint64_t db,  \
                                              int scale_d) {                                      \
    if constexpr (F16) FA3_WGMMA_RS16("f16", N, NA, X0, X1, X2, X3, X4, X5);                      \
    else FA3_WGMMA_RS16("bf16", N, NA, X0, X1, X2, X3, X4, X5);                                   \
  }
// N = 32 (hd96's last half-chunk of V), 64, 80 (hd256 K/V tiles), 112 (hd192), 128, 176, 192
FA3_WGMMA_16BIT_SHAPE(32, 16, 16, 17, 18, 19, 20, 21)
FA3_WGMMA_16BIT_SHAPE(64, 32, 32, 33, 34, 35, 36, 37)
FA3_WGMMA_16BIT_SHAPE(80, 40, 40, 41, 42, 43, 44, 45)
FA3_WGMMA_16BIT_SHAPE(112, 56, 56, 57, 58, 59, 60, 61)
FA3_WGMMA_16BIT_SHAPE(128, 64, 64, 65, 66, 67, 68, 69)
FA3_WGMMA_16BIT_SHAPE(176, 88, 88, 89, 90, 91, 92, 93)
FA3_WGMMA_16BIT_SHAPE(192, 96, 96, 97, 98, 99, 100, 101)
#undef FA3_WGMMA_16BIT_SHAPE

// F16 of a 16-bit element type: true for fp16, false for bf16 (the template flag of the helpers here).
template <typename T>
constexpr bool is_f16 = std::is_same<T, __half>::value;

// Two floats to one .b32 of two 16-bit values, the lower column in the low half.
template <bool F16>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (F16) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}
// A 64 x N f32 accumulator (N/2 per thread) to the A fragments of N/16 k-steps of m64nXk16.
template <bool F16, int NA>
__device__ __forceinline__ void acc_to_a(const float (&s)[NA], uint32_t (&a)[NA / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < NA / 8; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[kk][j] = pack2<F16>(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One 32-bit word to / from shared memory (the tile index the producer hands to the consumers;
// ordered by the mbarrier arrive (release) and wait (acquire) around it).
__device__ __forceinline__ void st_shared_s32(uint32_t addr, int v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_shared_s32(uint32_t addr) {
  int v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
// 16 zero bytes to shared memory (generic proxy; the caller fences before wgmma reads them).
__device__ __forceinline__ void st_shared_zero16(uint32_t addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(0) : "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// Make this thread's generic-proxy shared-memory writes visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Named barrier over `count` threads (ids 1, 2: one per consumer warpgroup; 0 is __syncthreads).
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// ---- ldmatrix / stmatrix (PTX ISA "ldmatrix", "stmatrix"), byte permute ----------------------------
// Four 8 x 8 matrices of 16-bit elements from shared memory; lane t gives the address of row t % 8
// of matrix t / 8. .trans delivers them transposed.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void stsm_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// =================================================================================================
// Host side: tensor maps, device queries
// =================================================================================================
typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                  const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                  const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point (cudart resolves it inside
// libcuda, which the runtime has loaded anyway): no -lcuda, no dlopen/dlsym in this library.
inline EncodeTiledFn encode_fn() {
  static EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return nullptr;
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// A 4-D tiled tensor map of a [B, S, H, Dtot] tensor of `eb`-byte elements (strides in elements,
// the last dim contiguous) whose box is box_cols elements x `rows` rows of one head and batch:
// dims {Dtot, S, H, B}, or, when the driver refuses that order, {Dtot, H, S, B} (*swap = 1). A
// stride of a size-1 dim never multiplies a nonzero coordinate, so it is replaced by a harmless
// valid one. False when the driver refuses both (the caller falls back): TMA wants 16-byte
// aligned base and strides.
inline bool make_map_4d(CUtensorMap* map, CUtensorMapDataType dt, int eb, const void* ptr, int64_t dtot,
                        int64_t s, int64_t h, int64_t bsz, int64_t rs, int64_t hs, int64_t bs, int box_cols,
                        int rows, CUtensorMapSwizzle swizzle, int* swap) {
  EncodeTiledFn enc = encode_fn();
  if (!enc) return false;
  const int64_t al = 16 / eb;                                 // elements per 16 bytes
  const int64_t big = ((dtot * s * h * bsz + al - 1) / al) * al;  // a valid, 16-byte-multiple stride
  if (s == 1) rs = big;
  if (h == 1) hs = big;
  if (bsz == 1) bs = big;
  if (rs <= 0 || hs <= 0 || bs <= 0 || rs % al || hs % al || bs % al) return false;
  if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return false;
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  for (int order = 0; order < 2; ++order) {
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4];
    dims[0] = (cuuint64_t)dtot;
    dims[3] = (cuuint64_t)bsz;
    strides[2] = (cuuint64_t)(bs * eb);
    box[0] = (cuuint32_t)box_cols;
    box[3] = 1;
    if (order == 0) {
      dims[1] = (cuuint64_t)s; dims[2] = (cuuint64_t)h;
      strides[0] = (cuuint64_t)(rs * eb); strides[1] = (cuuint64_t)(hs * eb);
      box[1] = (cuuint32_t)rows; box[2] = 1;
    } else {
      dims[1] = (cuuint64_t)h; dims[2] = (cuuint64_t)s;
      strides[0] = (cuuint64_t)(hs * eb); strides[1] = (cuuint64_t)(rs * eb);
      box[1] = 1; box[2] = (cuuint32_t)rows;
    }
    const CUresult r = enc(map, dt, 4, const_cast<void*>(ptr), dims, strides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS) {
      *swap = order;
      return true;
    }
  }
  return false;
}

constexpr int kMaxDev = 64;  // per-device caches below cover devices 0..63 (others: no cache)

// The current device, or -1 (the error cleared).
inline int current_device() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

// True when the device has compute capability 9.0 (cached per device; a failed query says false).
inline bool device_is_sm90(int dev) {
  static int cache[kMaxDev] = {0};  // 0 unknown, 1 yes, 2 no
  if (dev < 0) return false;
  if (dev < kMaxDev && cache[dev]) return cache[dev] == 1;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const bool ok = major == 9 && minor == 0;
  if (dev < kMaxDev) cache[dev] = ok ? 1 : 2;
  return ok;
}

// Streaming multiprocessors of the device (cached per device; 0 when the query fails).
inline int sm_count(int dev) {
  static int cache[kMaxDev] = {0};
  if (dev >= 0 && dev < kMaxDev && cache[dev]) return cache[dev];
  int n = 0;
  if (dev < 0 || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return 0;
  }
  if (dev < kMaxDev) cache[dev] = n;
  return n;
}

// Window bounds for the kernels: causal = right window 0; any negative = unbounded; a window of
// 2^29 or more covers every key of sequences shorter than 2^28 (so it is unbounded too, and the
// kernels' int arithmetic row + diag +- w cannot overflow).
inline int clamp_window(int w) { return (w < 0 || w >= (1 << 29)) ? -1 : w; }

// attention_chunk C (kseek.h; 0 = off): clamped to 2^29, which behaves as any larger chunk for
// sequences shorter than 2^28 (every key in chunk 0, every query at p < 0 in chunk -1) and keeps
// chunk_lo's int arithmetic in range.
inline int clamp_chunk(int c) { return c <= 0 ? 0 : (c >= (1 << 29) ? (1 << 29) : c); }
// The first key position of the chunk that holds position p (floor division: p < 0 lies in a chunk
// before every key); the chunk's keys are chunk_lo(p, c) .. chunk_lo(p, c) + c - 1.
__host__ __device__ __forceinline__ int chunk_lo(int p, int c) { return (p >= 0 ? p / c : -((c - 1 - p) / c)) * c; }

}  // namespace fa3
