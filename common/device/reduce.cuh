// Warp and block reductions shared by every family (LayerNorm statistics, softmax maxima/sums).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>
#include "device/vec.cuh"

namespace study {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). Every thread gets the
// result. `scratch` holds 32 floats; the function leaves it reusable (trailing barrier).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// Maximum over the whole block, as block_sum (every thread gets it; `scratch` holds 32 floats).
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -CUDART_INF_F;
  v = warp_max(v);
  __syncthreads();
  return v;
}

// Loads one row of `cols` fp16 values (cols a multiple of 8, at most 256 * kChunks) into a
// warp's registers, kChunks 16-byte chunks per lane (chunks past the row left zero), and returns
// its mean and the 1 / sqrt(variance + eps) of a LayerNorm: the mean first, then the mean of
// squared deviations from it (two passes over registers, no cancellation). `chunk(i)` returns the
// row's i-th 16-byte chunk (HalfVec<8>) from wherever the row lives.
template <int kChunks, class Chunk>
__device__ __forceinline__ float2 warp_row_stats(Chunk&& chunk, int cols, float eps, float (&v)[kChunks][8]) {
  const int lane = threadIdx.x & 31, chunks = cols / 8;
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int i = lane + 32 * c;
    HalfVec<8> u = {};  // zero-filled past the row: adds nothing
    if (i < chunks) u = chunk(i);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[c][j] = u.get(j);
      sum += v[c][j];
    }
  }
  const float mean = warp_sum(sum) / cols;
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
    if (lane + 32 * c < chunks)
#pragma unroll
      for (int j = 0; j < 8; ++j) sq += (v[c][j] - mean) * (v[c][j] - mean);
  return make_float2(mean, rsqrtf(warp_sum(sq) / cols + eps));
}

// The same for a contiguous row in global memory (read-only for the kernel's lifetime).
template <int kChunks>
__device__ __forceinline__ float2 warp_row_stats(const __half* row, int cols, float eps, float (&v)[kChunks][8]) {
  return warp_row_stats<kChunks>([row](int i) { return HalfVec<8>::load(row + 8 * i); }, cols, eps, v);
}

}  // namespace study
