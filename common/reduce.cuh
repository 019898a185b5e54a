// Warp and block reductions shared by every family (LayerNorm statistics, softmax maxima/sums).
#pragma once
#include <cuda_runtime.h>

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

}  // namespace study
