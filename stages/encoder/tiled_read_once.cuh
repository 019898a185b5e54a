// tile_shape=read_once's GEMM task (tiled.hpp): the 64 output columns n0.. of a row group of up to
// kGroupTiles row tiles (256 rows: a batch-1 forward's 197 in one) over one K slice. The task's
// weight slice (at most kSliceChunks chunks of 64 x 64) lands in shared memory once, requested
// before the task's wait; the group's A chunks stream past it through kSliceStages stages, row
// tile after row tile, and each row tile's products (the mainloop's warp layout, on mma.sync or
// wgmma) go to the GEMM's fp32 partial sums through L2. Once every slice of the tile has stored
// its sums (meet), each adds its share of the tile's rows over the slices, in slice order, and
// applies the GEMM's epilogue: the folded LayerNorm from the rows' statistics (QKV; fc1 then exact
// GELU), or bias and residual leaving the stored rows' statistics (projection, fc2; row_stats.cuh).
// Internal to tiled.cu.
#pragma once
#include "encoder/row_stats.cuh"
#include "encoder/tiled_epilogue.cuh"
#include "encoder/tiled_mainloop.cuh"

namespace encoder::tiled {

namespace {

constexpr int kGroupTiles = 4;   // a task's row tiles (read_once_shape's gemm_rows)
constexpr int kSliceChunks = 4;  // the most 64-wide K chunks of a weight slice (32 KB of shared memory)
constexpr int kSliceStages = 8;  // A chunks in flight (64 KB): two CTAs an SM still fit

// One read-once GEMM task: GemmTask's operands and tile, its GEMM's K, and where its slices meet.
struct SliceTask : GemmTask {
  int k = 0;                    // the GEMM's K: `splits` slices of k / splits
  float* partial = nullptr;     // the GEMM's partial sums [splits][rows][n]
  unsigned* arrival = nullptr;  // the output tile's slices arrived, over the forward
  __device__ __forceinline__ int slice_k() const { return k / splits; }
  __device__ __forceinline__ int chunks() const { return slice_k() / kBK; }
};

// Task t's operands: QKV and fc1 read the residual stream through their folded weights and
// combine their rows' statistics (those the projection and fc2 leave; block 0's QKV those that
// Blocks::run computes before the kernel); the projection and fc2 leave their stored rows'.
__device__ __forceinline__ SliceTask slice_of(const ReadOnceParams& p, const DeviceTask& t) {
  const BlockView w = p.layers[t.block];
  const FoldedView f = p.folded[t.block];
  const int D = p.hidden, i = gemm_index(static_cast<Kind>(t.kind));
  auto task = [&](Gemm gemm, int k, const float* col_sum, const float* col_bias, const float2* in, float2* out) {
    SliceTask s;
    static_cast<Gemm&>(s) = gemm;
    s.splits = p.split[i];
    s.m0 = t.row_tile * kGroupTiles * kBM;
    s.n0 = t.col * kBN;
    s.slice = t.slice;
    s.col_sum = col_sum;
    s.col_bias = col_bias;
    s.stats_in = in;
    s.stats_out = out;
    s.k = k;
    s.partial = p.partials[i];
    s.arrival = p.slice_arrivals[i] + t.row_tile * (gemm.n / kBN) + t.col;
    return s;
  };
  switch (static_cast<Kind>(t.kind)) {
    case Kind::Qkv:
      return task({p.x, D, f.qkv_w, nullptr, nullptr, nullptr, 3 * D, 0, p.qkv[qkv_buffer(p, t.block)], 3 * D}, D,
                  f.qkv_sum, f.qkv_bias, p.stats[1], nullptr);
    case Kind::Projection:
      return task({p.attn, D, w.proj_w, w.proj_b, nullptr, nullptr, D, 0, p.x, D}, D, nullptr, nullptr, nullptr,
                  p.stats[0]);
    case Kind::Fc1:
      return task({p.x, D, f.fc1_w, nullptr, nullptr, nullptr, kMlpRatio * D, 0, p.h, kMlpRatio * D}, D, f.fc1_sum,
                  f.fc1_bias, p.stats[0], nullptr);
    default:
      return task({p.h, kMlpRatio * D, w.fc2_w, w.fc2_b, nullptr, nullptr, D, 0, p.x, D}, kMlpRatio * D, nullptr,
                  nullptr, nullptr, p.stats[1]);
  }
}

// The task's whole weight slice into w_s, one commit group: weights depend on nothing, so the
// kernel requests them before the task's wait.
__device__ __forceinline__ void request_slice(__half* w_s, const SliceTask& g) {
  const RowSlab<kBN> w(g.w, g.k, g.n0, g.n, g.slice * g.slice_k());
  for (int kc = 0; kc < g.chunks(); ++kc) w.copy(w_s + kc * kBN * kBK, kc);
  cp_async_commit();
}

__device__ __forceinline__ int group_tiles(const Params& p, const SliceTask& g) {
  return min(kGroupTiles, (p.rows - g.m0 + kBM - 1) / kBM);
}

// The products of every row tile of the group with the weight slice in w_s, each row tile's into
// the slice's plane of the partial sums. Step s is chunk s % chunks of row tile s / chunks; its A
// chunk is requested kSliceStages - 1 steps ahead, one commit group a step.
template <class P>
__device__ void slice_products(const ReadOnceParams& p, const SliceTask& g, __half* a_s, const __half* w_s) {
  const WarpTile at;
  const int chunks = g.chunks(), steps = group_tiles(p, g) * chunks;
  float* part = g.partial + g.slice * static_cast<long long>(p.rows) * g.n;
  auto request_a = [&](int s) {
    const RowSlab<kBM> a(g.a, g.lda, g.m0 + s / chunks * kBM, p.rows, g.slice * g.slice_k());
    a.copy(a_s + s % kSliceStages * kTileHalves, s % chunks);
  };
#pragma unroll
  for (int s = 0; s < kSliceStages - 1; ++s) {
    if (s < steps) request_a(s);
    cp_async_commit();
  }
  // Warp-uniform by construction, as in StreamedA.
  const int group = __shfl_sync(0xffffffffu, at.warp >> 2, 0);
  float acc[4][4] = {};
  for (int s = 0; s < steps; ++s) {
    cp_async_wait<kSliceStages - 2>();  // step s's A chunk landed, and the weight slice before it
#ifdef STUDY_WGMMA
    if constexpr (P::kWgmma) sm90::fence_proxy_async();
#endif
    __syncthreads();  // for every thread; step s - 1's stage is free
    if (s + kSliceStages - 1 < steps) request_a(s + kSliceStages - 1);
    cp_async_commit();
    const int kc = s % chunks;
    const __half* a_t = a_s + s % kSliceStages * kTileHalves;
    const __half* w_t = w_s + kc * kBN * kBK;
    if constexpr (P::kWgmma)
      wgmma_chunk(acc, a_t, w_t, group, kc == 0);
    else
      mma_chunk<32>(acc, a_t, w_t, at.wm, at.wn, at.lane);
    if (kc == chunks - 1) {
      store_partial<32>(part, g, acc, p.rows, g.m0 + s / chunks * kBM + at.wm, g.n0 + at.wn, at.lane);
      for (auto& quad : acc)
        for (float& v : quad) v = 0.f;
    }
  }
  cp_async_wait<0>();  // the empty groups past the last step
}

// The slices' meeting: each slice of an output tile, its partial sums stored, adds one to the
// tile's arrival count and waits until every slice of the tile has (the count only grows, by
// `splits` a block, so a block's target is splits x (block + 1)); then each adds its share of the
// tile's rows over every slice. The wait cannot deadlock: a tile's slices hold consecutive tickets,
// a slice waits only after its own inputs exist (those of every slice of its tile), and a CTA
// waiting here holds no other ticket (the kernel takes its next one after the meeting). So were
// every CTA waiting, each would hold a slice of the one tile whose last slice no CTA has taken,
// at most splits - 1 of them: Blocks refuses a grid smaller than the largest split. A wait not met
// within kWaitTimeoutNs is recorded as a fault and given up, as the counters' are. Thread 0 then
// takes the CTA's next ticket into `next`, which every thread may read on return. kClock: thread 0
// stamps its arrival and the meeting's end into stamps[0] and stamps[1].
template <bool kClock>
__device__ __forceinline__ void meet(const ReadOnceParams& p, const SliceTask& g, int block, int& next,
                                     unsigned long long* stamps) {
  __syncthreads();  // every partial sum of the slice stored
  if (threadIdx.x == 0) {
    if (kClock) stamps[0] = global_ns();
    Counter arrivals(*g.arrival);
    const unsigned all = static_cast<unsigned>(g.splits) * (block + 1);
    bool wait = arrivals.fetch_add(1u, cuda::memory_order_acq_rel) + 1 < all;
#ifdef STUDY_TEST_HOOKS
    wait = wait && !p.planted_no_meeting;
#endif
    if (wait) {
      const unsigned long long start = global_ns();
      while (arrivals.load(cuda::memory_order_acquire) < all)
        if (global_ns() - start > kWaitTimeoutNs) {
          atomicAdd(p.faults, 1u);
          break;
        }
    }
    if (kClock) stamps[1] = global_ns();
    next = static_cast<int>(atomicAdd(p.ticket, 1u));
  }
  __syncthreads();
}

constexpr int kInFlight = 16;  // float4 loads of the slices' sums a thread of the reduction issues at once

// The slice's share of its output tile, once every slice has arrived: the rows of the group in
// passes of 4 kCols rows, pass u to slice u % splits (kCols 16 where the slices are few, so that
// a share of many rows takes few passes; 4 where they are many). Thread t adds columns
// n0 + kCols (t % (64 / kCols)).. of its row over every slice in slice order (so the sum does not
// depend on which CTA adds it; kInFlight loads at once), then applies the GEMM's epilogue: y = rstd
// (sum - mean col_sum) + col_bias from the row's statistics (QKV; fc1, then exact GELU), or
// x + sum + bias into the residual stream and each 32 columns' (mean, M2) of the row as stored
// (projection, fc2).
template <Kind kKind, int kCols>
__device__ void reduce_share(const ReadOnceParams& p, const SliceTask& g) {
  constexpr bool kFolded = kKind == Kind::Qkv || kKind == Kind::Fc1;
  constexpr int kRowLanes = kBN / kCols, kPassRows = kThreads / kRowLanes, kQuads = kCols / 4;
  constexpr int kBatch = kInFlight / kQuads;  // slices a batch of loads
  const int end = min(g.m0 + kGroupTiles * kBM, p.rows), passes = (end - g.m0 + kPassRows - 1) / kPassRows;
  const int lane = threadIdx.x % 32, c = g.n0 + kCols * (threadIdx.x % kRowLanes);
  const unsigned row_mask = (kRowLanes == 32 ? 0xffffffffu : (1u << kRowLanes) - 1) << (lane & ~(kRowLanes - 1));
  const long long plane = static_cast<long long>(p.rows) * g.n;
  int slices = g.splits;
#ifdef STUDY_TEST_HOOKS
  if (p.planted_slice_dropped) slices -= 1;
#endif
  for (int u = g.slice; u < passes; u += g.splits) {
    const long long r = g.m0 + u * kPassRows + threadIdx.x / kRowLanes;
    if (r >= end) continue;  // a row's lanes leave together
    const float* sums = g.partial + r * g.n + c;
    float v[kCols] = {};
    for (int k0 = 0; k0 < slices; k0 += kBatch) {
      float4 part[kBatch][kQuads];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
#pragma unroll
        for (int q = 0; q < kQuads; ++q)
          part[k][q] = k0 + k < slices ? __ldcg(reinterpret_cast<const float4*>(sums + (k0 + k) * plane) + q)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
#pragma unroll
        for (int q = 0; q < kQuads; ++q) {
          v[4 * q] += part[k][q].x;
          v[4 * q + 1] += part[k][q].y;
          v[4 * q + 2] += part[k][q].z;
          v[4 * q + 3] += part[k][q].w;
        }
    }
    __half* out = g.out + r * g.ldo + c;
    if constexpr (kFolded) {
      const float2 st = row_stats::combine_row<kRowLanes>(g.stats_in, p.hidden, r, p.eps, row_mask);
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        const float4 col_sum = __ldg(reinterpret_cast<const float4*>(g.col_sum + c) + q);
        const float4 col_bias = __ldg(reinterpret_cast<const float4*>(g.col_bias + c) + q);
        float* e = v + 4 * q;
        e[0] = st.y * (e[0] - st.x * col_sum.x) + col_bias.x;
        e[1] = st.y * (e[1] - st.x * col_sum.y) + col_bias.y;
        e[2] = st.y * (e[2] - st.x * col_sum.z) + col_bias.z;
        e[3] = st.y * (e[3] - st.x * col_sum.w) + col_bias.w;
      }
      if constexpr (kKind == Kind::Fc1)
#pragma unroll
        for (float& e : v) e = gelu_erf(e);
    } else {
      uint2 res_raw[kQuads], bias_raw[kQuads];
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        res_raw[q] = __ldcg(reinterpret_cast<const uint2*>(out) + q);
        bias_raw[q] = __ldg(reinterpret_cast<const uint2*>(g.bias + c) + q);
      }
      const __half* res = reinterpret_cast<const __half*>(res_raw);
      const __half* bias = reinterpret_cast<const __half*>(bias_raw);
#pragma unroll
      for (int j = 0; j < kCols; ++j) v[j] = __half2float(res[j]) + v[j] + __half2float(bias[j]);
    }
    uint2 out_raw[kQuads];
    __half2* o = reinterpret_cast<__half2*>(out_raw);
#pragma unroll
    for (int i = 0; i < kCols / 2; ++i) o[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
#pragma unroll
    for (int q = 0; q < kQuads; ++q) reinterpret_cast<uint2*>(out)[q] = out_raw[q];
    if constexpr (!kFolded) {  // the stored values' statistics, from the lanes of each 32 columns
      constexpr int kGroupLanes = row_stats::kGroup / kCols;
      float stored[kCols];
#pragma unroll
      for (int i = 0; i < kCols / 2; ++i) {
        const float2 f = __half22float2(o[i]);
        stored[2 * i] = f.x;
        stored[2 * i + 1] = f.y;
      }
      const unsigned group_mask = ((1u << kGroupLanes) - 1) << (lane & ~(kGroupLanes - 1));
      const float2 m = row_stats::group_moments<kGroupLanes, kCols>(stored, group_mask);
      if (lane % kGroupLanes == 0) g.stats_out[r * (g.n / row_stats::kGroup) + c / row_stats::kGroup] = m;
    }
  }
}

// A read-once GEMM task of kind kKind: its products into the partial sums, the slices' meeting
// (which takes the CTA's next ticket into the caller's `next`), then the slice's share of the sums.
// kClock: the meeting's stamps into `stamps`.
template <class P, bool kClock, Kind kKind>
__device__ void slice_task(const ReadOnceParams& p, const SliceTask& g, int block, __half* a_s, const __half* w_s,
                           int& next, unsigned long long* stamps) {
  slice_products<P>(p, g, a_s, w_s);
  meet<kClock>(p, g, block, next, stamps);
  if (g.splits <= 4)
    reduce_share<kKind, 16>(p, g);
  else
    reduce_share<kKind, 4>(p, g);
}

template <class P, bool kClock>
__device__ void slice_task(const ReadOnceParams& p, const SliceTask& g, const DeviceTask& t, __half* a_s,
                           const __half* w_s, int& next, unsigned long long* stamps) {
  const Kind kind = static_cast<Kind>(t.kind);
  if (kind == Kind::Qkv)
    slice_task<P, kClock, Kind::Qkv>(p, g, t.block, a_s, w_s, next, stamps);
  else if (kind == Kind::Projection)
    slice_task<P, kClock, Kind::Projection>(p, g, t.block, a_s, w_s, next, stamps);
  else if (kind == Kind::Fc1)
    slice_task<P, kClock, Kind::Fc1>(p, g, t.block, a_s, w_s, next, stamps);
  else
    slice_task<P, kClock, Kind::Fc2>(p, g, t.block, a_s, w_s, next, stamps);
}

// Block 0's rows' statistics (row_stats.cuh's partials), which no task of the kernel leaves: the
// patch embedding wrote those rows. A thread a row's 32-column group.
__global__ void first_row_stats(const __half* x, int rows, int hidden, float2* stats) {
  const int groups = hidden / row_stats::kGroup;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(rows) * groups) return;
  const __half* v = x + i / groups * hidden + i % groups * row_stats::kGroup;
  float f[row_stats::kGroup];
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < row_stats::kGroup; j += 8) {
    const auto h = study::HalfVec<8>::load(v + j);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      f[j + e] = h.get(e);
      sum += f[j + e];
    }
  }
  const float mean = sum / row_stats::kGroup;
  float m2 = 0.f;
#pragma unroll
  for (float e : f) m2 += (e - mean) * (e - mean);
  stats[i] = make_float2(mean, m2);
}

}  // namespace

}  // namespace encoder::tiled
