// The tile-scheduled kernel's epilogues: a 64 x 64 tile's accumulators (mainloop.cuh's layout)
// plus bias into QKV, plus bias and residual into the residual stream (projection), plus bias and
// exact GELU into h (fc1), or fc2's split-K partial sums, added in slice order by the slice that
// completes the tile; with the LayerNorm folded into QKV and fc1 (tile_ln=folded|row_stats), its
// statistics gathered from the chunks (FoldedStats, the mainloop's hooks) or combined from the
// partials the residual epilogues leave (row_stats.cuh); with tile_loads=first, each epilogue's
// loads ahead of its stores. The results are bit for bit those of panel.cuh's epilogues.
#pragma once
#include "encoder/row_stats.cuh"
#include "encoder/tiled_mainloop.cuh"
#include "harness/test_hooks.hpp"

namespace encoder::tiled {

namespace {

// tile_loads=first (e29): the residual epilogues issue every load before their first store.
// panel.cuh's interleave loads and stores to the same buffer (the residual stream x, or x after
// the partial sums), so the compiler keeps each load after the stores before it: 8 round trips to
// L2 a thread, one after another, where one suffices. The results are bit for bit those of
// panel.cuh's (the same sums in the same order).

// fc2's last slice: thread t adds 16 columns of row t / 4 of the tile over the slices (4 float4
// loads a slice, all in flight at once), then the residual and the bias, into x. kStats
// (tile_ln=row_stats): and each 32 columns' (mean, M2) of the stored row into stats, from the two
// lanes that hold them.
template <bool kStats = false>
__device__ void add_slices_first(const float* partial, long long plane, const Gemm& g, int rows, int m0, int n0,
                                 float2* stats = nullptr) {
  static_assert(kThreads == 4 * kBM && kBN == 4 * 16, "a thread a quarter row of the tile");
  const int r = m0 + threadIdx.x / 4, c = n0 + 16 * (threadIdx.x % 4);
  if (r >= rows) return;
  const long long at = static_cast<long long>(r) * g.n + c;
  float4 part[kSplit][4];
#pragma unroll
  for (int k = 0; k < kSplit; ++k)
#pragma unroll
    for (int q = 0; q < 4; ++q) part[k][q] = __ldcg(reinterpret_cast<const float4*>(partial + k * plane + at) + q);
  __half* x = g.out + static_cast<long long>(r) * g.ldo + c;
  const uint4* x16 = reinterpret_cast<const uint4*>(x);
  const uint4* b16 = reinterpret_cast<const uint4*>(g.bias + c);
  const uint4 res_raw[2] = {__ldcg(x16), __ldcg(x16 + 1)};
  const uint4 bias_raw[2] = {b16[0], b16[1]};
  const __half2* res = reinterpret_cast<const __half2*>(res_raw);
  const __half2* bias = reinterpret_cast<const __half2*>(bias_raw);
  const float* sums[kSplit];
#pragma unroll
  for (int k = 0; k < kSplit; ++k) sums[k] = reinterpret_cast<const float*>(part[k]);
  uint4 out_raw[2];
  __half2* out = reinterpret_cast<__half2*>(out_raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) {  // column pairs 2i, 2i + 1
    float2 s = make_float2(0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kSplit; ++k) {
      s.x += sums[k][2 * i];
      s.y += sums[k][2 * i + 1];
    }
    const float2 rv = __half22float2(res[i]), bv = __half22float2(bias[i]);
    out[i] = __floats2half2_rn(rv.x + s.x + bv.x, rv.y + s.y + bv.y);
  }
  reinterpret_cast<uint4*>(x)[0] = out_raw[0];
  reinterpret_cast<uint4*>(x)[1] = out_raw[1];
  if constexpr (kStats) {
    float v[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float2 f = __half22float2(out[i]);
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
    // A row's lanes returned together above when it is past the batch: the pair's own mask.
    const unsigned pair = 3u << (threadIdx.x % 32 & ~1u);
    const float2 m = row_stats::group_moments<2, 16>(v, pair);
    if (threadIdx.x % 2 == 0) stats[static_cast<long long>(r) * (g.n / row_stats::kGroup) + c / row_stats::kGroup] = m;
  }
}

// The projection's epilogue (bias, residual) with each of the thread's 8 residual and bias pairs
// loaded before its first store; otherwise store_tile<Epi::BiasResidual>. kStats (tile_ln=row_stats): and each
// of its two rows' 32 columns of the warp's tile, (mean, M2) of the stored values, into stats
// from the row's four lanes.
template <bool kStats = false>
__device__ void store_residual_first(const Gemm& g, const float (&acc)[4][4], int rows, int row_base, int col_base,
                                     int lane, float2* stats = nullptr) {
  auto row = [&](int i) { return row_base + (lane >> 2) + 8 * (i % 2); };
  auto col = [&](int i) { return col_base + 8 * (i / 2) + 2 * (lane & 3); };
  float2 res[8], bias[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const bool in = row(i) < rows && col(i) < g.n;
    res[i] = in ? load_pair(g.out + static_cast<long long>(row(i)) * g.ldo + col(i)) : make_float2(0.f, 0.f);
    bias[i] = in ? __half22float2(*reinterpret_cast<const __half2*>(g.bias + col(i))) : make_float2(0.f, 0.f);
  }
  [[maybe_unused]] float v[2][8] = {};  // kStats: the stored values by row (i % 2)
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (row(i) < rows && col(i) < g.n) {
      const __half2 out = __floats2half2_rn(acc[i / 2][2 * (i % 2)] + bias[i].x + res[i].x,
                                            acc[i / 2][2 * (i % 2) + 1] + bias[i].y + res[i].y);
      *reinterpret_cast<__half2*>(g.out + static_cast<long long>(row(i)) * g.ldo + col(i)) = out;
      if constexpr (kStats) {
        const float2 f = __half22float2(out);
        v[i % 2][2 * (i / 2)] = f.x;
        v[i % 2][2 * (i / 2) + 1] = f.y;
      }
    }
  if constexpr (kStats) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 m = row_stats::group_moments<4, 8>(v[h], 0xffffffffu);
      const int r = row_base + (lane >> 2) + 8 * h;
      if ((lane & 3) == 0 && r < rows)
        stats[static_cast<long long>(r) * (g.n / row_stats::kGroup) + col_base / row_stats::kGroup] = m;
    }
  }
}

// fc2: this CTA's slice of the tile goes to `partial`; the CTA that completes the tile's last
// slice adds the slices in order (so the result does not depend on which one that is), the
// bias and the residual, into x (kLoadsFirst: add_slices_first; kStats: and the rows' statistics).
template <bool kLoadsFirst, bool kStats = false>
__device__ void split_residual(const Params& p, const GemmTask& g, const float (&acc)[4][4], int row_base,
                               int col_base, int lane) {
  const long long plane = static_cast<long long>(p.rows) * g.n;
  store_partial<32>(p.partial + g.slice * plane, g, acc, p.rows, row_base, col_base, lane);
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    Counter arrivals(p.arrivals[g.m0 / kBM * (g.n / kBN) + g.n0 / kBN]);
    last = arrivals.fetch_add(1u, cuda::memory_order_acq_rel) == static_cast<unsigned>(g.splits - 1);
    if (last) arrivals.store(0u, cuda::memory_order_relaxed);  // the next block's fc2 is ordered after this one
  }
  __syncthreads();
  if (!last) return;
  if constexpr (kLoadsFirst)
    add_slices_first<kStats>(p.partial, plane, g, p.rows, g.m0, g.n0, g.stats_out);
  else
    add_slices<kBN>(p.partial, plane, g, p.rows, g.m0, g.n0);
}

// tile_ln=folded (e28): the LayerNorm folded into QKV and fc1. Each row's statistics from the
// chunks of A as they pass through the stages: thread t sums 16 of each chunk's 64 columns of row
// t / 4 (16-byte units 2 (t % 4) and 2 (t % 4) + 1), shifted by the row's first element so that
// the variance, taken as the mean square less the squared mean, does not cancel for rows whose
// mean is far from 0.
static_assert(kThreads == 4 * kBM, "four threads a row of the A chunk");
struct RowSums {
  float shift = 0.f, sum = 0.f, squares = 0.f;

  __device__ __forceinline__ void add(const __half* a_t, bool first) {
    const int r = threadIdx.x / 4, unit = 2 * (threadIdx.x % 4);
    if (first) shift = __half2float(a_t[swizzle(r, 0)]);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const auto v = *reinterpret_cast<const study::HalfVec<8>*>(a_t + swizzle(r, unit + u));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float d = v.get(j) - shift;
        sum += d;
        squares += d * d;
      }
    }
  }

  // The row's mean and 1 / sqrt(variance + eps) over `hidden` columns, into stats[row] for the
  // epilogue's threads (the caller synchronizes the CTA before they read it).
  __device__ __forceinline__ void finish(float2* stats, int hidden, float eps) {
#pragma unroll
    for (int m = 1; m < 4; m <<= 1) {  // the row's four threads are adjacent lanes
      sum += __shfl_xor_sync(0xffffffffu, sum, m);
      squares += __shfl_xor_sync(0xffffffffu, squares, m);
    }
    const float mean = sum / hidden, var = fmaxf(squares / hidden - mean * mean, 0.f);
    if (threadIdx.x % 4 == 0) stats[threadIdx.x / 4] = make_float2(shift + mean, rsqrtf(var + eps));
  }
};

// The rows' statistics of the task in hand (only the folded forms' tasks use it).
__device__ __forceinline__ float2* row_stats() {
  __shared__ float2 stats[kBM];
  return stats;
}

// The folded LayerNorm's epilogue: y = rstd (acc - mean col_sum) + col_bias (then exact GELU for
// fc1), each thread's 8 pairs of the warp's tile in mma.sync's m16n8 layout (store_tile's).
// kLoadsFirst (tile_loads=first): the column sums and biases through the read-only path (__ldg), which tells
// the compiler no store of the kernel changes them, so it may issue them before the stores; plain
// loads stay after the store before them (it cannot tell the buffers apart).
template <bool kGelu, bool kLoadsFirst>
__device__ void store_folded(const GemmTask& g, const float (&acc)[4][4], const float2* stats, int rows,
                             int row_base, int col_base, int lane) {
  auto load = [](const float* v) {
    if constexpr (kLoadsFirst)
      return __ldg(reinterpret_cast<const float2*>(v));
    else
      return *reinterpret_cast<const float2*>(v);
  };
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = i / 2, half_row = i % 2;
    const int r = row_base + (lane >> 2) + 8 * half_row, c = col_base + 8 * j + 2 * (lane & 3);
    if (r < rows && c < g.n) {
      const float2 st = stats[r - g.m0];
      const float2 sums = load(g.col_sum + c), bias = load(g.col_bias + c);
      float v0 = st.y * (acc[j][2 * half_row] - st.x * sums.x) + bias.x;
      float v1 = st.y * (acc[j][2 * half_row + 1] - st.x * sums.y) + bias.y;
      if constexpr (kGelu) {
        v0 = gelu_erf(v0);
        v1 = gelu_erf(v1);
      }
      *reinterpret_cast<__half2*>(g.out + static_cast<long long>(r) * g.ldo + c) = __floats2half2_rn(v0, v1);
    }
  }
}

// The mainloop's hooks of a folded task (QKV, fc1): its rows' statistics gathered from the A
// chunks as they pass, unless the rows' writers left theirs (tile_ln=row_stats, all but block 0's
// QKV): combined as soon as the first chunks are in flight.
template <bool kStats>
struct FoldedStats {
  RowSums sums;
  bool gather = true;

  __device__ __forceinline__ void start(const Params& p, const GemmTask& g, int hidden) {
    if constexpr (kStats) {
      gather = g.stats_in == nullptr;
      if (!gather) {
#ifdef STUDY_TEST_HOOKS
        if (p.planted_short_groups)
          row_stats::combine<true>(g.stats_in, hidden, g.m0, p.rows, p.eps, row_stats());
        else
#endif
          row_stats::combine(g.stats_in, hidden, g.m0, p.rows, p.eps, row_stats());
      }
    }
  }
  __device__ __forceinline__ void chunk(const Params& p, const __half* a_t, int kc, int chunks) {
#ifdef STUDY_TEST_HOOKS
    if (p.planted_short_stats && kc == chunks - 1) return;
#endif
    (void)p, (void)chunks;
    if (gather) sums.add(a_t, kc == 0);
  }
  // Every row's statistics in row_stats(), for every warp's epilogue.
  __device__ __forceinline__ void finish(const Params& p) {
    if (gather) sums.finish(row_stats(), p.hidden, p.eps);
    __syncthreads();
  }
};

// A task's hooks: the folded LayerNorm's for QKV and fc1 of a folded form, none otherwise.
template <class P, Epi kEpi>
using Hooks = std::conditional_t<P::kFolded && (kEpi == Epi::Bias || kEpi == Epi::BiasGelu),
                                 FoldedStats<P::kStats>, NoHooks>;

// The epilogue of a task of kind kEpi (Qkv: Bias, Projection: BiasResidual, Fc1: BiasGelu, fc2:
// SplitResidual) in the form P.
template <class P, Epi kEpi, class H>
__device__ __forceinline__ void epilogue(const Params& p, const GemmTask& g, const float (&acc)[4][4], H& hooks,
                                         int row_base, int col_base, int lane) {
  if constexpr (std::is_same_v<H, FoldedStats<P::kStats>>) {
    hooks.finish(p);
    store_folded<kEpi == Epi::BiasGelu, P::kLoadsFirst>(g, acc, row_stats(), p.rows, row_base, col_base, lane);
  } else if constexpr (kEpi == Epi::SplitResidual) {
    split_residual<P::kLoadsFirst, P::kStats>(p, g, acc, row_base, col_base, lane);
  } else if constexpr (P::kLoadsFirst && kEpi == Epi::BiasResidual) {
    store_residual_first<P::kStats>(g, acc, p.rows, row_base, col_base, lane, g.stats_out);
  } else {
    store_tile<kEpi, 32>(g, acc, p.rows, row_base, col_base, lane);
  }
}

}  // namespace

}  // namespace encoder::tiled
