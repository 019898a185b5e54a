// What the persistent forwards (persistent.cu: e13's grid-barrier kernel; tiled.cu: the
// tile-scheduled one) share on the device: a GEMM task's 64-row A panel as 64-column swizzled
// tiles filled by cp.async, the LayerNorm of that panel in shared memory, and the loads and
// GELU of their epilogues. Both run 256 threads a CTA.
#pragma once
#include <cuda_fp16.h>
#include "device/reduce.cuh"
#include "device/tiles.cuh"

namespace encoder::panel {

using study::tiles::cp_async16;
using study::tiles::smem_addr;
using study::tiles::swizzle;

constexpr int kThreads = 256;
constexpr int kBM = 64, kBK = 64;        // a panel's rows; K chunk = one 128-byte smem row
constexpr int kTileHalves = kBM * kBK;   // one [64][64] swizzled tile
constexpr int kMaxHidden = 1024;

// Each thread moves 16-byte chunk (threadIdx % 8) of rows threadIdx / 8 + 32 j of a 64-column
// slab: row pointers and shared-memory offsets are computed once per item, not per copy.
constexpr int kRowStep = kThreads / 8;
static_assert(kBM % kRowStep == 0, "whole rows per thread");

// Rows r0.. of a row-major fp16 matrix (row stride ld) from column col0, kRows of them, as
// 64-column chunks into swizzled [kRows][64] tiles; rows at or past `end` land as zeros.
template <int kRows>
struct RowSlab {
  static constexpr int kPerThread = kRows / kRowStep;
  const __half* row[kPerThread];
  bool valid[kPerThread];
  __device__ __forceinline__ RowSlab(const __half* base, long long ld, int r0, int end, int col0) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int r = r0 + threadIdx.x / 8 + kRowStep * j;
      valid[j] = r < end;
      row[j] = base + (valid[j] ? r : 0) * ld + col0 + threadIdx.x % 8 * 8;
    }
  }
  __device__ __forceinline__ void copy(__half* dst, int chunk) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      cp_async16(smem_addr(dst + swizzle(threadIdx.x / 8 + kRowStep * j, threadIdx.x % 8)), row[j] + chunk * kBK,
                 valid[j]);
  }
};

// LayerNorm of the panel's 64 rows in place (hidden/64 swizzled [64][64] tiles): a warp per
// row, its statistics by reduce.cuh's warp_row_stats from the row's swizzled chunks.
__device__ inline void layernorm_panel(__half* a_s, const __half* gamma, const __half* beta, int hidden, float eps) {
  constexpr int kChunks = kMaxHidden / 8 / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunks = hidden / 8;
  for (int r = warp; r < kBM; r += kThreads / 32) {
    auto at = [a_s, r](int i) { return a_s + i / 8 * kTileHalves + swizzle(r, i % 8); };
    float v[kChunks][8];
    const float2 stats = study::warp_row_stats<kChunks>(
        [&at](int i) { return *reinterpret_cast<const study::HalfVec<8>*>(at(i)); }, hidden, eps, v);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int i = lane + 32 * c;
      if (i >= chunks) continue;
      const auto gm = study::HalfVec<8>::load(gamma + 8 * i), bt = study::HalfVec<8>::load(beta + 8 * i);
      study::HalfVec<8> y;
#pragma unroll
      for (int j = 0; j < 8; ++j) y.set(j, (v[c][j] - stats.x) * stats.y * gm.get(j) + bt.get(j));
      y.store(at(i));
    }
  }
}

// An fp16 pair this kernel wrote earlier (through L2: L1 may hold a stale copy).
__device__ __forceinline__ float2 load_pair(const __half* p) {
  const unsigned raw = __ldcg(reinterpret_cast<const unsigned*>(p));
  return __half22float2(*reinterpret_cast<const __half2*>(&raw));
}

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

}  // namespace encoder::panel
