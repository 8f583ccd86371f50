// stream_read.cu: the memory-read ceiling, measured with a kernel that only streams bytes in.
// Each thread reads UNROLL 16-byte vectors per step (grid-stride, all loads issued before any use),
// with the streaming cache hint (ld.global.cs: read once, do not keep in L1/L2), and folds them into
// an XOR kept alive by a store that never happens for real data. kernelseek/streamread.py sweeps
// threads per block, blocks per SM and UNROLL and keeps the fastest (its docstring says how).
#include <cuda_runtime.h>
#include <stdint.h>

template <int UNROLL>
__global__ void stream_read(const uint4* __restrict__ p, size_t n, unsigned* sink) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;   // keeps the loads; random data almost never matches
}

// Read `bytes` (a multiple of 16) at `p` once; returns a cudaError_t.
extern "C" int kseek_stream_read(const void* p, size_t bytes, int blocks, int threads, int unroll, void* sink,
                                 cudaStream_t s) {
  const size_t n = bytes / 16;
  const uint4* q = (const uint4*)p;
  switch (unroll) {
    case 1: stream_read<1><<<blocks, threads, 0, s>>>(q, n, (unsigned*)sink); break;
    case 2: stream_read<2><<<blocks, threads, 0, s>>>(q, n, (unsigned*)sink); break;
    case 4: stream_read<4><<<blocks, threads, 0, s>>>(q, n, (unsigned*)sink); break;
    default: stream_read<8><<<blocks, threads, 0, s>>>(q, n, (unsigned*)sink); break;
  }
  return (int)cudaGetLastError();
}
