// The tile-scheduled kernel of e24_tiled to e30_row_stats (tiled.hpp says what it computes). GEMM
// tasks are 64 x 64 output tiles on mma.sync m16n8k16 (fp16 in, fp32 accumulators), 8 warps of
// 16 x 32 (panel.cuh, e13's code): the task's whole A panel (64 rows x `hidden`, fc2 a
// quarter of its K) lands in shared memory at once, so a LayerNorm before the GEMM normalizes it
// there; the weights stream through a 6-stage cp.async pipeline whose first stages are requested
// before the task waits for its inputs. Attention tasks are 64 rows of one head: for each image
// among those rows, its Q rows and every key and value of the head in shared memory, and 4 warps
// run v7_flash_mma's tile over them. With LayerNorm tasks (e25), a task normalizes one row tile's
// panel and stores it for the GEMM tasks after it; the kernel is a template on that, so e24's
// instantiation has no trace of it. e26 streams each GEMM task's A panel through the weights'
// stages instead of holding it whole, which with the LayerNorm tasks' rows read from L2 lets two
// CTAs share an SM (16 warps instead of 8). e28 drops the LayerNorm tasks: its QKV and fc1 tasks
// stream the residual stream's rows themselves, gather each row's statistics from the chunks as
// they pass through shared memory, and apply the LayerNorm, folded into their weights, in the
// epilogue. e29 issues its epilogues' loads ahead of their stores. e30 computes those statistics
// once, where each row is written (row_stats.cuh), and the QKV and fc1 tasks combine them.
//
// The dependency protocol is tile_device.cuh's, which the dry run (tile_dry_run.cu) tests without
// the math: thread 0 polls each counter the task waits on with acquire loads, the CTA synchronizes,
// and after the task's last store and a CTA barrier thread 0 adds one to its counter with release
// semantics. Everything a task reads that another CTA wrote goes through L2 (cp.async.cg, ld.global.cg): L1 is
// not coherent.
#include "attention/flash_mma.cuh"
#include "device/sm90.cuh"
#include "device/tiles.cuh"
#include "encoder/panel.cuh"
#include "encoder/row_stats.cuh"
#include "encoder/tile_device.cuh"
#include "encoder/tiled.hpp"
#include "gemm/cutlass_gemm.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/test_hooks.hpp"
#include "layernorm/layernorm.hpp"

namespace encoder::tiled {

namespace {

using namespace panel;  // the tiles, copies, LayerNorm, mma.sync loop and epilogues of e13's kernel
using tiles::Counter;
using tiles::DeviceTask;
using tiles::global_ns;
using tiles::Kind;

constexpr int kBN = tiles::kTile;  // output tile kBM x kBN
constexpr int kStages = 6;         // weight chunks in flight
constexpr int kMlpRatio = 4;       // fc2's K = 4 hidden: split in 4 slices of `hidden`
constexpr int kSplit = kMlpRatio;
static_assert(kBM == tiles::kTile && kBN % kRowStep == 0, "the schedule's tiles are the kernel's");
// A wait that has not been met after this long counts a fault and goes on: a dropped signal
// ends the forward with a fault recorded instead of hanging the GPU.
constexpr unsigned long long kWaitTimeoutNs = 1'000'000'000ull;

struct Params {
  const DeviceTask* tasks;
  int n_tasks;
  const BlockView* layers;
  int n_layers, rows, tokens, hidden, heads;
  float eps, scale_log2;
  __half *x, *qkv[2], *attn, *h;
  __half* ln;      // the LayerNorm tasks' output [rows, hidden] (with them)
  float* partial;  // [kSplit][rows][hidden]
  unsigned *ticket, *faults, *counters, *arrivals;
  int drop_signal;  // test hook: the task with this ticket does not signal (-1: none)
  unsigned long long* clock;  // the task clock's stamps (its instantiation only)
  const FoldedView* folded;   // per block (the folded LayerNorm's form only)
  // e30: per row and 32 columns, (mean, M2) of the residual stream after the projection [0] and
  // after fc2 [1], [rows][hidden / 32] each.
  float2* stats[2];
#ifdef STUDY_TEST_HOOKS
  bool planted_short_stats;   // the folded LayerNorm's statistics leave out each row's last chunk
  bool planted_short_groups;  // e30's rows' statistics leave out each row's last 32-column group
#endif
};

// One GEMM task: its GEMM's operands (panel::Gemm), its output tile (m0, n0) and K slice; with
// the LayerNorm folded in, the folded weights' column vectors (FoldedView); with the statistics
// where the rows are written (e30), the partials a folded task combines (none: it gathers its own,
// as e28's) and those a residual epilogue writes.
struct GemmTask : Gemm {
  int m0, n0, slice;
  const float *col_sum = nullptr, *col_bias = nullptr;
  const float2* stats_in = nullptr;
  float2* stats_out = nullptr;
};

// QKV's two buffers in turn, the last block's the lane's own (where the tests read it).
__device__ __forceinline__ int qkv_buffer(const Params& p, int block) { return (p.n_layers - 1 - block) % 2; }

// With LayerNorm tasks the QKV and fc1 tasks read their output; with the LayerNorm folded, the
// residual stream and the folded weights; otherwise each normalizes its own panel of the stream.
template <Form kForm>
__device__ __forceinline__ GemmTask gemm_of(const Params& p, const DeviceTask& t) {
  constexpr bool kLnTasks = ln_tasks(kForm);
  const BlockView w = p.layers[t.block];
  const int D = p.hidden, m0 = t.row_tile * kBM, n0 = t.col * kBN;
  const Kind kind = static_cast<Kind>(t.kind);
  if constexpr (folded_ln(kForm)) {
    const FoldedView f = p.folded[t.block];
    // e30: block 0's QKV reads the patch embedding's rows, which no task of this kernel wrote.
    const bool combined = row_stats_form(kForm);
    if (kind == Kind::Qkv)
      return {{p.x, D, f.qkv_w, nullptr, nullptr, nullptr, 3 * D, 1, p.qkv[qkv_buffer(p, t.block)], 3 * D}, m0, n0, 0,
              f.qkv_sum, f.qkv_bias, combined && t.block > 0 ? p.stats[1] : nullptr};
    if (kind == Kind::Fc1)
      return {{p.x, D, f.fc1_w, nullptr, nullptr, nullptr, kMlpRatio * D, 1, p.h, kMlpRatio * D}, m0, n0, 0,
              f.fc1_sum, f.fc1_bias, combined ? p.stats[0] : nullptr};
    if (combined && kind == Kind::Projection)
      return {{p.attn, D, w.proj_w, w.proj_b, nullptr, nullptr, D, 1, p.x, D}, m0, n0, 0, nullptr, nullptr, nullptr,
              p.stats[0]};
    if (combined && kind == Kind::Fc2)
      return {{p.h, kMlpRatio * D, w.fc2_w, w.fc2_b, nullptr, nullptr, D, kSplit, p.x, D}, m0, n0, t.slice, nullptr,
              nullptr, nullptr, p.stats[1]};
  }
  const __half* normalized = kLnTasks ? p.ln : p.x;
  switch (kind) {
    case Kind::Qkv:
      return {{normalized, D, w.qkv_w, w.qkv_b, kLnTasks ? nullptr : w.ln1_g, w.ln1_b, 3 * D, 1,
               p.qkv[qkv_buffer(p, t.block)], 3 * D},
              m0, n0, 0};
    case Kind::Projection:
      return {{p.attn, D, w.proj_w, w.proj_b, nullptr, nullptr, D, 1, p.x, D}, m0, n0, 0};
    case Kind::Fc1:
      return {{normalized, D, w.fc1_w, w.fc1_b, kLnTasks ? nullptr : w.ln2_g, w.ln2_b, kMlpRatio * D, 1, p.h,
               kMlpRatio * D},
              m0, n0, 0};
    default:
      return {{p.h, kMlpRatio * D, w.fc2_w, w.fc2_b, nullptr, nullptr, D, kSplit, p.x, D}, m0, n0, t.slice};
  }
}

// The task's weight rows n0.., from the start of its K slice.
__device__ __forceinline__ RowSlab<kBN> weight_rows(const GemmTask& g, int hidden) {
  return RowSlab<kBN>(g.w, static_cast<long long>(g.splits) * hidden, g.n0, g.n, g.slice * hidden);
}

// e29's residual epilogues issue every load before their first store. panel.cuh's interleave
// loads and stores to the same buffer (the residual stream x, or x after the partial sums), so
// the compiler keeps each load after the stores before it: 8 round trips to L2 a thread, one after
// another, where one suffices. The results are bit for bit those of panel.cuh's (the same sums in
// the same order).

// fc2's last slice: thread t adds 16 columns of row t / 4 of the tile over the slices (4 float4
// loads a slice, all in flight at once), then the residual and the bias, into x. kStats (e30): and
// each 32 columns' (mean, M2) of the stored row into stats, from the two lanes that hold them.
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
// loaded before its first store; otherwise store_tile<Epi::BiasResidual>. kStats (e30): and each
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

// The GEMM of one task, its first weight chunks already requested (prefetch_w) into w_s.
template <Epi kEpi>
__device__ void gemm_task(const Params& p, const GemmTask& g, __half* a_s, __half* w_s) {
  const int hidden = p.hidden, chunks = hidden / kBK;
  const RowSlab<kBN> w = weight_rows(g, hidden);

  load_panel(a_s, g, g.m0, g.slice, p.rows, hidden, p.eps);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = 16 * (warp & 3), wn = 32 * (warp >> 2);
  float acc[4][4] = {};
  mma_panel<kBN, kStages, 32>(acc, a_s, w_s, w, chunks, wm, wn, lane);
  cp_async_wait<0>();  // the empty groups past K: nothing outstanding when the next task starts

  // Thread `lane` holds rows lane/4 and lane/4 + 8 of its warp's 16, columns 8j + 2 (lane % 4) + {0, 1}.
  const int row_base = g.m0 + wm, col_base = g.n0 + wn;
  if constexpr (kEpi == Epi::SplitResidual) {
    split_residual<false>(p, g, acc, row_base, col_base, lane);
  } else {
    store_tile<kEpi, 32>(g, acc, p.rows, row_base, col_base, lane);
  }
}

// e26's GEMM task: the A panel streamed with the weights, chunk by chunk (the LayerNorm tasks have
// normalized it already), kStreamStages deep, so a task needs 16 KB a stage and two CTAs fit an
// SM. The weights' first chunks were requested before the task's wait, one commit group each;
// A's first chunks follow as one group once its inputs exist.
// kWgmma (e27): the products on wgmma m64n32k16, each warpgroup a 64 x 32 half of the tile with
// both operands read from the stages through descriptors (which is why the stages are 1024-byte
// aligned: the hardware's 128-byte swizzle is the XOR layout the copies write); otherwise
// mma.sync from ldmatrix fragments. Either way a warp holds rows 16 (warp % 4).. and columns
// 32 (warp / 4).. of the tile in mma.sync's m16n8 accumulator layout, so the epilogues are one.
constexpr int kStreamStages = 4;

// One stage's products on wgmma: the warpgroup's 64 x 32 of the tile, K = 64 (4 steps of 16).
__device__ __forceinline__ void wgmma_chunk(float (&acc)[4][4], const __half* a_t, const __half* w_t, int group,
                                            bool first) {
#ifdef STUDY_WGMMA
  float(&d)[16] = reinterpret_cast<float(&)[16]>(acc);
  const uint64_t a_desc = sm90::tile_desc(smem_addr(a_t));
  const uint64_t b_desc = sm90::tile_desc(smem_addr(w_t + 32 * group * kBK));  // the group's 32 weight rows
  sm90::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) sm90::wgmma_ss_n32(d, a_desc + 2 * ks, b_desc + 2 * ks, first && ks == 0 ? 0 : 1);
  sm90::wgmma_commit();
  sm90::wgmma_wait_all();  // the stage is refilled after the next barrier
  sm90::reg_fence(d);
#else
  (void)acc, (void)a_t, (void)w_t, (void)group, (void)first;
  __trap();
#endif
}

// e28's folded LayerNorm. Each row's statistics from the chunks of A as they pass through the
// stages: thread t sums 16 of each chunk's 64 columns of row t / 4 (16-byte units 2 (t % 4) and
// 2 (t % 4) + 1), shifted by the row's first element so that the variance, taken as the mean
// square less the squared mean, does not cancel for rows whose mean is far from 0.
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

// The rows' statistics of the task in hand (only the folded form's tasks use it).
__device__ __forceinline__ float2* row_stats() {
  __shared__ float2 stats[kBM];
  return stats;
}

// The folded LayerNorm's epilogue: y = rstd (acc - mean col_sum) + col_bias (then exact GELU for
// fc1), each thread's 8 pairs of the warp's tile in mma.sync's m16n8 layout (store_tile's).
// kLoadsFirst (e29): the column sums and biases through the read-only path (__ldg), which tells
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

// kFolded: A is the residual stream itself and g's weights are folded (QKV, fc1 of e28);
// kLoadsFirst: the epilogues load before they store (e29); kStats: the rows' statistics written
// by the residual epilogues and, where g has them, combined instead of gathered (e30).
template <Epi kEpi, bool kWgmma, bool kFolded, bool kLoadsFirst, bool kStats = false>
__device__ void streamed_gemm_task(const Params& p, const GemmTask& g, __half* a_s, __half* w_s) {
  const int hidden = p.hidden, chunks = hidden / kBK;
  const RowSlab<kBN> w = weight_rows(g, hidden);
  const RowSlab<kBM> a(g.a, g.lda, g.m0, p.rows, g.slice * hidden);
#pragma unroll
  for (int s = 0; s < kStreamStages - 1; ++s)
    if (s < chunks) a.copy(a_s + s * kTileHalves, s);
  cp_async_commit();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = 16 * (warp & 3), wn = 32 * (warp >> 2);
  // Warp-uniform by construction (a shuffle from lane 0), so that ptxas can see no wgmma sits
  // under a divergent branch.
  const int group = __shfl_sync(0xffffffffu, warp >> 2, 0);
  float acc[4][4] = {};
  [[maybe_unused]] RowSums sums;
  // Gathered from the chunks unless the rows' writers left their statistics (e30, but for block 0's
  // QKV): combined now, while the first chunks are in flight.
  [[maybe_unused]] const bool gather = !kStats || g.stats_in == nullptr;
  if constexpr (kFolded && kStats) {
    if (!gather) {
#ifdef STUDY_TEST_HOOKS
      if (p.planted_short_groups)
        row_stats::combine<true>(g.stats_in, hidden, g.m0, p.rows, p.eps, row_stats());
      else
#endif
        row_stats::combine(g.stats_in, hidden, g.m0, p.rows, p.eps, row_stats());
    }
  }
  for (int kc = 0; kc < chunks; ++kc) {
    // Chunk kc's A and weights landed: at the first chunk everything requested so far; then the
    // groups of the chunks after it may still be in flight.
    if (kc == 0)
      cp_async_wait<0>();
    else
      cp_async_wait<kStreamStages - 2>();
#ifdef STUDY_WGMMA
    if constexpr (kWgmma) sm90::fence_proxy_async();  // the copies' writes, before wgmma reads them
#endif
    __syncthreads();  // for every thread; chunk kc-1's stages are free
    const int next = kc + kStreamStages - 1;
    if (next < chunks) {
      a.copy(a_s + next % kStreamStages * kTileHalves, next);
      w.copy(w_s + next % kStreamStages * kBN * kBK, next);
    }
    cp_async_commit();
    const __half* a_t = a_s + kc % kStreamStages * kTileHalves;
    const __half* w_t = w_s + kc % kStreamStages * kBN * kBK;
    if constexpr (kWgmma)
      wgmma_chunk(acc, a_t, w_t, group, kc == 0);
    else
      mma_chunk<32>(acc, a_t, w_t, wm, wn, lane);
    if constexpr (kFolded) {
#ifdef STUDY_TEST_HOOKS
      if (p.planted_short_stats && kc == chunks - 1) continue;
#endif
      if (gather) sums.add(a_t, kc == 0);  // the stage is refilled only after the next barrier
    }
  }
  cp_async_wait<0>();  // the empty groups past K
  const int row_base = g.m0 + wm, col_base = g.n0 + wn;
  if constexpr (kFolded) {
    if (gather) sums.finish(row_stats(), hidden, p.eps);
    __syncthreads();  // every row's statistics, for every warp's epilogue
    store_folded<kEpi == Epi::BiasGelu, kLoadsFirst>(g, acc, row_stats(), p.rows, row_base, col_base, lane);
  } else if constexpr (kEpi == Epi::SplitResidual) {
    split_residual<kLoadsFirst, kStats>(p, g, acc, row_base, col_base, lane);
  } else if constexpr (kLoadsFirst && kEpi == Epi::BiasResidual) {
    store_residual_first<kStats>(g, acc, p.rows, row_base, col_base, lane, g.stats_out);
  } else {
    store_tile<kEpi, 32>(g, acc, p.rows, row_base, col_base, lane);
  }
}

// e26's LayerNorm task: a warp per row, straight from the residual stream (through L2: other
// CTAs wrote it) to ln, no shared memory.
__device__ void layernorm_rows(const Params& p, const DeviceTask& t) {
  constexpr int kChunks = kMaxHidden / 8 / 32;
  const BlockView w = p.layers[t.block];
  const bool second = static_cast<Kind>(t.kind) == Kind::Ln2;
  const __half* gamma = second ? w.ln2_g : w.ln1_g;
  const __half* beta = second ? w.ln2_b : w.ln1_b;
  const int hidden = p.hidden, chunks = hidden / 8, warp = threadIdx.x / 32;
  for (int r = t.row_tile * kBM + warp; r < min((t.row_tile + 1) * kBM, p.rows); r += kThreads / 32) {
    const __half* row = p.x + static_cast<long long>(r) * hidden;
    float v[kChunks][8];
    const float2 stats = study::warp_row_stats<kChunks>(
        [row](int i) {
          const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(row + 8 * i));
          return *reinterpret_cast<const study::HalfVec<8>*>(&raw);
        },
        hidden, p.eps, v);
    __half* out = p.ln + static_cast<long long>(r) * hidden;
    normalize_row(v, stats, gamma, beta, chunks, [out](int i) { return out + 8 * i; });
  }
}

// A LayerNorm task: 64 rows of the residual stream normalized in shared memory (as a GEMM task's
// panel) and stored to ln, rows past the batch left alone.
__device__ void layernorm_task(const Params& p, const DeviceTask& t, __half* a_s) {
  const BlockView w = p.layers[t.block];
  const bool second = static_cast<Kind>(t.kind) == Kind::Ln2;
  const int hidden = p.hidden, m0 = t.row_tile * kBM;
  Gemm rows{};  // the panel's part of a GEMM: its A and its LayerNorm
  rows.a = p.x;
  rows.lda = hidden;
  rows.gamma = second ? w.ln2_g : w.ln1_g;
  rows.beta = second ? w.ln2_b : w.ln1_b;
  load_panel(a_s, rows, m0, 0, p.rows, hidden, p.eps);
  const int per_row = hidden / 8;  // 16-byte chunks
  for (int i = threadIdx.x; i < kBM * per_row; i += kThreads) {
    const int r = i / per_row, c = i % per_row;
    if (m0 + r >= p.rows) break;
    *reinterpret_cast<uint4*>(p.ln + static_cast<long long>(m0 + r) * hidden + 8 * c) =
        *reinterpret_cast<const uint4*>(a_s + c / 8 * kTileHalves + swizzle(r, c % 8));
  }
}

// Attention of rows [64 row_tile, +64) for one head. The rows may hold the end of one image and
// the start of the next: each image's part is its own pass, with that image's keys and values.
__device__ void attention_task(const Params& p, const __half* qkv, int row_tile, int head, __half* smem) {
  using namespace attention::flash;
  const int T = p.tokens, key_tiles = (T + kKeys - 1) / kKeys, width = p.hidden, stride = 3 * p.hidden;
  const int r0 = row_tile * kBM, r1 = min(r0 + kBM, p.rows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __half* q_s = smem;
  __half* k_s = q_s + kBM * kD;
  __half* v_s = k_s + key_tiles * kKeys * kD;
  for (int image = r0 / T; image * T < r1; ++image) {
    const int t0 = max(r0, image * T) - image * T, t1 = min(r1, (image + 1) * T) - image * T;
    const __half* q = qkv + static_cast<long long>(image) * T * stride + head * kD;
    load_head(q_s, k_s, v_s, q, q + width, q + 2 * width, stride, t0, t1, T, key_tiles);
    const int row0 = t0 + 16 * warp;
    if (warp < 4 && row0 < t1) {
      Rows<1> st;
      attend_rows(st, q_s, k_s, v_s, key_tiles, T, p.scale_log2, warp, lane);
      __syncwarp();  // the warp's Q rows become its output staging once every lane has read them
      store_rows(st, q_s + 16 * warp * kD, p.attn + static_cast<long long>(image) * T * width + head * kD, width,
                 row0, t1, lane);
    }
    __syncthreads();  // the next image's pass reuses the shared memory
  }
}

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// One instantiation a form (tiled.hpp's Form). e25-e27: LayerNorm tasks. From e26 on: GEMM tasks
// stream their A panel, LayerNorm tasks use no shared memory, and two CTAs share an SM. From e27
// on: the streamed products on wgmma. e28: no LayerNorm tasks, the LayerNorm folded into QKV and
// fc1. e29: its epilogues' loads ahead of their stores. e30: the statistics where the rows are
// written. kClock: thread 0 stamps each task
// (Blocks::set_clock); the timed instantiations have none of it.
template <Form kForm, bool kClock>
__global__ void __launch_bounds__(kThreads, two_ctas(kForm) ? 2 : 1)
    tiled_kernel(Params p) {
  constexpr bool kLnTasks = ln_tasks(kForm);
  constexpr bool kTwoCtas = two_ctas(kForm);
  constexpr bool kWgmma = wgmma(kForm);
  constexpr bool kFolded = folded_ln(kForm);
  constexpr bool kLoadsFirst = loads_first(kForm);
  constexpr bool kStats = row_stats_form(kForm);
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // wgmma's descriptors need the stages 1024-byte aligned; the dynamic shared memory's start is
  // only as aligned as the static variables before it let it be (the size has 1024 bytes of slack).
  __half* smem = reinterpret_cast<__half*>(
      kWgmma ? smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023) : smem_raw);
  __half* a_s = smem;  // a GEMM task's A panel (streamed: its stages) and its weight stages after it
  __half* w_s = smem + (kTwoCtas ? kStreamStages : p.hidden / kBK) * kTileHalves;
  __shared__ int next;
  if (threadIdx.x == 0) next = static_cast<int>(atomicAdd(p.ticket, 1u));
  __syncthreads();
  int i = next;
  __syncthreads();  // every thread holds its first ticket before thread 0 takes the next into `next`
  while (i < p.n_tasks) {
    const DeviceTask t = p.tasks[i];
    const Kind kind = static_cast<Kind>(t.kind);
    GemmTask g{};
    const bool layernorm = kLnTasks && (kind == Kind::Ln1 || kind == Kind::Ln2);
    const bool gemm = kind != Kind::Attention && !layernorm;
    if (gemm) {
      g = gemm_of<kForm>(p, t);
      // Weights depend on nothing: requested before the wait.
      if constexpr (kTwoCtas)
        prefetch_w<kBN, kStreamStages>(w_s, weight_rows(g, p.hidden), p.hidden / kBK);
      else
        prefetch_w<kBN, kStages>(w_s, weight_rows(g, p.hidden), p.hidden / kBK);
    }
    unsigned long long started = 0;
    if (kClock && threadIdx.x == 0) started = global_ns();
    if (threadIdx.x == 0) {
      if (const unsigned timed_out = tiles::wait_inputs(t, p.counters, kWaitTimeoutNs))
        atomicAdd(p.faults, timed_out);
      if (kClock) {
        p.clock[4 * i] = started;
        p.clock[4 * i + 1] = global_ns();
      }
      // The next ticket now: its fetch overlaps this task. Holding it cannot deadlock: this
      // task's inputs exist, so it finishes, and every smaller ticket's task is held by a
      // running CTA.
      next = static_cast<int>(atomicAdd(p.ticket, 1u));
    }
    __syncthreads();
    const int following = next;
    if (kTwoCtas && layernorm)
      layernorm_rows(p, t);
    else if (layernorm)
      layernorm_task(p, t, a_s);
    else if (kind == Kind::Attention)
      attention_task(p, p.qkv[qkv_buffer(p, t.block)], t.row_tile, t.col, smem);
    else if constexpr (kTwoCtas) {
      if (kind == Kind::Qkv)
        streamed_gemm_task<Epi::Bias, kWgmma, kFolded, kLoadsFirst, kStats>(p, g, a_s, w_s);
      else if (kind == Kind::Projection)
        streamed_gemm_task<Epi::BiasResidual, kWgmma, false, kLoadsFirst, kStats>(p, g, a_s, w_s);
      else if (kind == Kind::Fc1)
        streamed_gemm_task<Epi::BiasGelu, kWgmma, kFolded, kLoadsFirst, kStats>(p, g, a_s, w_s);
      else
        streamed_gemm_task<Epi::SplitResidual, kWgmma, false, kLoadsFirst, kStats>(p, g, a_s, w_s);
    } else if (kind == Kind::Qkv)
      gemm_task<Epi::Bias>(p, g, a_s, w_s);
    else if (kind == Kind::Projection)
      gemm_task<Epi::BiasResidual>(p, g, a_s, w_s);
    else if (kind == Kind::Fc1)
      gemm_task<Epi::BiasGelu>(p, g, a_s, w_s);
    else
      gemm_task<Epi::SplitResidual>(p, g, a_s, w_s);
    __syncthreads();  // every store of the task issued, every thread past reading `next`
    if (kClock && threadIdx.x == 0) {
      p.clock[4 * i + 2] = global_ns();
      p.clock[4 * i + 3] = sm_id();
    }
    if (threadIdx.x == 0 && i != p.drop_signal) tiles::signal(t, p.counters);
    i = following;
  }
}

std::size_t smem_bytes(const Problem& p, Form form) {
  if (!two_ctas(form)) return panel::smem_bytes(p.model.hidden, p.tokens(), kBN, kStages);
  // The streamed GEMM's stages, or the attention's Q, keys and values (the rows form: no panel);
  // wgmma's 1024-byte alignment from wherever the dynamic shared memory starts.
  return std::max(sizeof(__half) * kStreamStages * (kTileHalves + kBN * kBK),
                  panel::smem_bytes(0, p.tokens(), kBN, 0)) +
         (wgmma(form) ? 1024 : 0);
}

using Kernel = void (*)(Params);
template <Form kForm>
Kernel kernel_of(bool clock) {
  return clock ? tiled_kernel<kForm, true> : tiled_kernel<kForm, false>;
}
Kernel kernel_for(Form form, bool clock) {
  switch (form) {
    case Form::PanelLayerNorm: return kernel_of<Form::PanelLayerNorm>(clock);
    case Form::LnTasks: return kernel_of<Form::LnTasks>(clock);
    case Form::TwoCtas: return kernel_of<Form::TwoCtas>(clock);
    case Form::Wgmma: return kernel_of<Form::Wgmma>(clock);
    case Form::FoldedLn: return kernel_of<Form::FoldedLn>(clock);
    case Form::LoadsFirst: return kernel_of<Form::LoadsFirst>(clock);
    case Form::RowStats: break;
  }
  return kernel_of<Form::RowStats>(clock);
}

const char* step_of(Form form) {
  switch (form) {
    case Form::PanelLayerNorm: return "blocks=tiled: ";
    case Form::LnTasks: return "blocks=tiled_ln: ";
    case Form::TwoCtas: return "blocks=tiled_2cta: ";
    case Form::Wgmma: return "blocks=tiled_wgmma: ";
    case Form::FoldedLn: return "blocks=tiled_folded: ";
    case Form::LoadsFirst: return "blocks=tiled_loads_first: ";
    case Form::RowStats: break;
  }
  return "blocks=tiled_row_stats: ";
}


constexpr std::size_t kMaxSmem = 227 * 1024;  // a Hopper CTA's (opt-in)

int fc2_tiles(const tiles::Schedule& s) { return s.row_tiles * s.shape.hidden / kBN; }

// The folded LayerNorm's QKV and fc1 a block (FoldedView): 3 + 4 hidden rows of `hidden` fp16
// weights, and each of their 7 hidden rows' sum and bias in fp32.
std::size_t folded_halves(int hidden) { return static_cast<std::size_t>(7) * hidden * hidden; }
std::size_t folded_floats(int hidden) { return static_cast<std::size_t>(14) * hidden; }
// e30's partial statistics: two buffers of (mean, M2) per row and 32 columns.
std::size_t stats_pairs(long long rows, int hidden) {
  return static_cast<std::size_t>(rows) * (hidden / row_stats::kGroup);
}
constexpr int kStateHead = 2;  // the ticket and the fault count before the counters

}  // namespace

tiles::Shape shape_of(const Problem& p, int batch, bool ln_tasks) {
  return tiles::vit_shape(p.model.hidden, p.model.layers, p.tokens(), batch, kSplit, ln_tasks);
}

std::string unavailable(Form form) { return wgmma(form) ? sm90::wgmma_unavailable() : std::string(); }

std::string refuses(const Problem& p, int batch) {
  if (auto why = panel::refuses_shape(p); !why.empty()) return why;
  if (smem_bytes(p, Form::PanelLayerNorm) > kMaxSmem)
    return std::to_string(p.tokens()) + " tokens: every key and value of a head must fit in shared memory (" +
           std::to_string(smem_bytes(p, Form::PanelLayerNorm)) + " of " + std::to_string(kMaxSmem) + " bytes)";
  if (static_cast<long long>(batch) * p.tokens() * kMlpRatio * p.model.hidden >= (1LL << 31))
    return "the batch overflows 32-bit indexing";
  return {};
}

std::size_t Blocks::scratch_bytes(const Problem& p, int batch, Form form) {
  const tiles::Schedule s = tiles::build(shape_of(p, batch, ln_tasks(form)));
  const long long rows = static_cast<long long>(batch) * p.tokens();
  return sizeof(float) * kSplit * rows * p.model.hidden +
         sizeof(__half) * rows * (ln_tasks(form) ? 4 : 3) * p.model.hidden +
         sizeof(unsigned) * (kStateHead + s.final_counts.size() + fc2_tiles(s)) + sizeof(DeviceTask) * s.tasks.size() +
         sizeof(BlockView) * p.model.layers +
         (folded_ln(form) ? (sizeof(__half) * folded_halves(p.model.hidden) +
                             sizeof(float) * folded_floats(p.model.hidden) + sizeof(FoldedView)) *
                                p.model.layers
                          : 0) +
         (row_stats_form(form) ? 2 * sizeof(float2) * stats_pairs(rows, p.model.hidden) : 0);
}

Blocks::Blocks(const Problem& p, int batch, const std::vector<BlockView>& blocks, Form form)
    : p_(p), rows_(batch * p.tokens()), form_(form), smem_(smem_bytes(p, form)) {
  const std::string who = step_of(form);
  if (auto why = refuses(p, batch); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, who + why);
  sched_ = tiles::build(shape_of(p, batch, ln_tasks(form)));
  const bool prove_order = sched_.tasks.size() <= tiles::kOrderProofMaxTasks;
  if (auto why = prove_order ? tiles::check(sched_) : tiles::check_counts(sched_); !why.empty())
    throw std::logic_error(who + "the tile schedule is unsound: " + why);
  for (bool clock : {false, true})
    CUDA_CHECK(cudaFuncSetAttribute(kernel_for(form, clock), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem_)));
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(form, false), kThreads, smem_));
  if (per_sm < 1)
    throw study::StudyError(study::ErrorKind::Usage, who + "a CTA with " + std::to_string(smem_) +
                                                         " bytes of shared memory does not fit on an SM");
  // One CTA an SM; two where the form is built for it and they fit (not with the keys of 577
  // tokens in shared memory): every CTA resident, each taking tickets.
  grid_ = study::sm_count() * (two_ctas(form) ? std::min(per_sm, 2) : 1);
  tasks_ = study::to_device(tiles::device_tasks(sched_));
  layers_ = study::DeviceBuffer<BlockView>(blocks.size());
  CUDA_CHECK(cudaMemcpy(layers_.get(), blocks.data(), layers_.bytes(), cudaMemcpyHostToDevice));
  partial_ = study::DeviceBuffer<float>(static_cast<std::size_t>(kSplit) * rows_ * p.model.hidden);
  qkv_odd_ = study::DeviceBuffer<__half>(static_cast<std::size_t>(rows_) * 3 * p.model.hidden);
  if (ln_tasks(form)) ln_ = study::DeviceBuffer<__half>(static_cast<std::size_t>(rows_) * p.model.hidden);
  state_ = study::DeviceBuffer<unsigned>(kStateHead + sched_.final_counts.size() + fc2_tiles(sched_));
  CUDA_CHECK(cudaMemset(state_.get(), 0, state_.bytes()));
  if (folded_ln(form)) fold(blocks);
  if (row_stats_form(form))
    for (auto& b : stats_) b = study::DeviceBuffer<float2>(stats_pairs(rows_, p.model.hidden));
  CUDA_CHECK(cudaDeviceSynchronize());
}

void Blocks::fold(const std::vector<BlockView>& blocks) {
  const int D = p_.model.hidden;
  const std::size_t halves = folded_halves(D), floats = folded_floats(D), qkv = static_cast<std::size_t>(3) * D * D;
  folded_w_ = study::DeviceBuffer<__half>(blocks.size() * halves);
  folded_cols_ = study::DeviceBuffer<float>(blocks.size() * floats);
  std::vector<FoldedView> views;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const BlockView& b = blocks[i];
    __half* w = folded_w_.get() + i * halves;
    float* c = folded_cols_.get() + i * floats;  // QKV's sums and biases (3 hidden each), then fc1's (4 hidden)
    study::cutlass_gemm::fold_layernorm(b.qkv_w, b.qkv_b, b.ln1_g, b.ln1_b, 3 * D, D, w, c, c + 3 * D, nullptr);
    study::cutlass_gemm::fold_layernorm(b.fc1_w, b.fc1_b, b.ln2_g, b.ln2_b, 4 * D, D, w + qkv, c + 6 * D, c + 10 * D,
                                        nullptr);
    views.push_back({w, w + qkv, c, c + 3 * D, c + 6 * D, c + 10 * D});
  }
  folded_ = study::to_device(views);
}

void Blocks::poison_scratch() {
  study::poison(partial_);
  study::poison(qkv_odd_);
  if (ln_tasks(form_)) study::poison(ln_);
  if (row_stats_form(form_))
    for (auto& b : stats_) study::poison(b);
}

void Blocks::run(__half* x, __half* qkv, __half* attn, __half* h, cudaStream_t s) const {
  // The ticket, the fault count and the counters start from 0; the fc2 arrivals return to 0 by
  // themselves (a memset node in a graph: ~1 us, no kernel).
  CUDA_CHECK(cudaMemsetAsync(state_.get(), 0, sizeof(unsigned) * (kStateHead + sched_.final_counts.size()), s));
  Params prm{};
  prm.tasks = tasks_.get();
  prm.n_tasks = static_cast<int>(sched_.tasks.size());
  set_forward(prm, p_, layers_.get(), rows_, x, attn, h);
  prm.qkv[0] = qkv;
  prm.qkv[1] = qkv_odd_.get();
  prm.ln = ln_tasks(form_) ? ln_.get() : nullptr;
  prm.partial = partial_.get();
  unsigned* st = state_.get();
  prm.ticket = st;
  prm.faults = st + 1;
  prm.counters = st + kStateHead;
  prm.arrivals = prm.counters + sched_.final_counts.size();
  prm.drop_signal = -1;
#ifdef STUDY_TEST_HOOKS
  prm.planted_short_stats = study::planted("folded_stats_short");
  prm.planted_short_groups = study::planted("row_stats_short");
#endif
  if (study::planted("tiled_signal_dropped")) {  // fc1 of block 0, rows 0, column 0 never signals
    for (std::size_t i = 0; i < sched_.tasks.size(); ++i)
      if (sched_.tasks[i].kind == Kind::Fc1) {
        prm.drop_signal = static_cast<int>(i);
        break;
      }
  }
  // Not a cooperative launch: a CTA waits only on tasks of smaller tickets, all held by CTAs
  // already running, so the forward completes whichever CTAs are resident.
  prm.clock = clock_ ? clock_stamps_.get() : nullptr;
  prm.folded = folded_.get();
  prm.stats[0] = stats_[0].get();
  prm.stats[1] = stats_[1].get();
  kernel_for(form_, clock_)<<<grid_, kThreads, smem_, s>>>(prm);
  CUDA_CHECK(cudaGetLastError());
}

void Blocks::set_clock(bool on) {
  if (on && !clock_stamps_.get()) clock_stamps_ = study::DeviceBuffer<unsigned long long>(4 * sched_.tasks.size());
  if (on) CUDA_CHECK(cudaMemset(clock_stamps_.get(), 0, clock_stamps_.bytes()));
  clock_ = on;
}

std::vector<TaskTime> Blocks::task_times() const {
  if (!clock_stamps_.get()) throw study::StudyError(study::ErrorKind::Usage, "no forward ran with the task clock on");
  const std::vector<unsigned long long> st = study::to_host(clock_stamps_);
  unsigned long long first = ~0ull;
  for (std::size_t i = 0; i < sched_.tasks.size(); ++i)
    if (st[4 * i]) first = std::min(first, st[4 * i]);
  std::vector<TaskTime> out;
  out.reserve(sched_.tasks.size());
  auto us = [first](unsigned long long ns) { return ns ? (static_cast<double>(ns - first)) / 1e3 : -1.0; };
  for (std::size_t i = 0; i < sched_.tasks.size(); ++i) {
    const tiles::Task& t = sched_.tasks[i];
    out.push_back({tiles::name(t.kind), t.block, t.row_tile, t.col, t.slice, static_cast<int>(st[4 * i + 3]),
                   us(st[4 * i]), us(st[4 * i + 1]), us(st[4 * i + 2]), t.waits, t.signals});
  }
  return out;
}

std::string Blocks::dependency_state() const {
  const std::vector<unsigned> st = study::to_host(state_);
  const std::size_t n = sched_.final_counts.size();
  std::string why;
  if (st[1]) why += std::to_string(st[1]) + " waits timed out; ";
  const unsigned tickets = static_cast<unsigned>(sched_.tasks.size()) + static_cast<unsigned>(grid_);
  if (st[0] != tickets)
    why += "tickets taken " + std::to_string(st[0]) + ", not " + std::to_string(tickets) + "; ";
  int shown = 0;
  for (std::size_t c = 0; c < n; ++c)
    if (st[kStateHead + c] != sched_.final_counts[c] && shown++ < 4)
      why += sched_.counter_names[c] + " at " + std::to_string(st[kStateHead + c]) + ", not " +
             std::to_string(sched_.final_counts[c]) + "; ";
  for (std::size_t a = 0; a < static_cast<std::size_t>(fc2_tiles(sched_)); ++a)
    if (st[kStateHead + n + a] != 0 && shown++ < 8)
      why += "fc2 tile " + std::to_string(a) + "'s arrivals left at " + std::to_string(st[kStateHead + n + a]) + "; ";
  return why;
}

}  // namespace encoder::tiled
