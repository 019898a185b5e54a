// e30's LayerNorm statistics, computed where each row of the residual stream is written instead of
// in every task that reads it. The projection's epilogue and fc2's last slice write, for each row
// of their tile and each 32 columns of it, the group's mean and its sum of squared deviations M2
// (of the fp16 values as stored); a QKV or fc1 task, whose inputs are those tiles, combines a
// row's hidden / 32 groups into the row's mean and 1 / sqrt(var + eps) before its first chunk:
// with groups of equal size n, mean = the groups' mean of means and
// M2 = sum M2_i + n sum (mean_i - mean)^2 (Chan et al.), no cancellation either way.
#pragma once
#include <cuda_fp16.h>

namespace encoder::row_stats {

constexpr int kGroup = 32;  // columns a partial covers

// The mean and M2 of the kValues values in v of each of kLanes adjacent lanes (their group of
// kValues x kLanes columns of one row). Every lane of `mask` calls it.
template <int kLanes, int kValues>
__device__ __forceinline__ float2 group_moments(const float (&v)[kValues], unsigned mask) {
  static_assert(kLanes * kValues == kGroup, "a group's columns, spread over its lanes");
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kValues; ++i) sum += v[i];
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) sum += __shfl_xor_sync(mask, sum, m);
  const float mean = sum / kGroup;
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kValues; ++i) m2 += (v[i] - mean) * (v[i] - mean);
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) m2 += __shfl_xor_sync(mask, m2, m);
  return make_float2(mean, m2);
}

// Rows [m0, m0 + 64) of a task: thread t combines every fourth group of row m0 + t / 4 (from
// `partials`, [rows][hidden / kGroup], written by other CTAs: read through L2), the row's four
// threads (adjacent lanes) add up, and stats[t / 4] gets (mean, 1 / sqrt(var + eps)). Rows past
// `rows` get (0, 1). kShort (a planted bug's): each row's last group left out.
template <bool kShort = false>
__device__ __forceinline__ void combine(const float2* partials, int hidden, int m0, int rows, float eps,
                                        float2* stats) {
  constexpr int kMaxEach = 1024 / kGroup / 4;  // hidden up to 1024 (tiled.hpp's refuses)
  const int r = m0 + threadIdx.x / 4, part = threadIdx.x % 4, groups = hidden / kGroup - (kShort ? 1 : 0);
  const bool in = r < rows;
  float2 g[kMaxEach];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxEach; ++i) {
    const int k = part + 4 * i;
    g[i] = in && k < groups ? __ldcg(partials + static_cast<long long>(r) * (hidden / kGroup) + k)
                            : make_float2(0.f, 0.f);
    sum += g[i].x;
  }
#pragma unroll
  for (int m = 1; m < 4; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  const float mean = sum / groups;
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxEach; ++i)
    if (part + 4 * i < groups) m2 += g[i].y + kGroup * (g[i].x - mean) * (g[i].x - mean);
#pragma unroll
  for (int m = 1; m < 4; m <<= 1) m2 += __shfl_xor_sync(0xffffffffu, m2, m);
  if (part == 0)
    stats[threadIdx.x / 4] = in ? make_float2(mean, rsqrtf(m2 / (groups * kGroup) + eps)) : make_float2(0.f, 1.f);
}

// Row r's (mean, 1 / sqrt(var + eps)) from its hidden / kGroup partials, combined as `combine`
// does by kLanes adjacent lanes (each every kLanes-th group) and returned to each of them. Every
// lane of `mask` (the row's lanes) calls it.
template <int kLanes>
__device__ __forceinline__ float2 combine_row(const float2* partials, int hidden, long long r, float eps,
                                              unsigned mask) {
  constexpr int kMaxEach = (1024 / kGroup + kLanes - 1) / kLanes;  // hidden up to 1024
  const int part = threadIdx.x % kLanes, groups = hidden / kGroup;
  float2 g[kMaxEach];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxEach; ++i) {
    const int k = part + kLanes * i;
    g[i] = k < groups ? __ldcg(partials + r * groups + k) : make_float2(0.f, 0.f);
    sum += g[i].x;
  }
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) sum += __shfl_xor_sync(mask, sum, m);
  const float mean = sum / groups;
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxEach; ++i)
    if (part + kLanes * i < groups) m2 += g[i].y + kGroup * (g[i].x - mean) * (g[i].x - mean);
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) m2 += __shfl_xor_sync(mask, m2, m);
  return make_float2(mean, rsqrtf(m2 / (groups * kGroup) + eps));
}

}  // namespace encoder::row_stats
