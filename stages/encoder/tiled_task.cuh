// What every piece of the tile-scheduled kernel reads (tiled.hpp says what it computes): the
// kernel's parameters, a GEMM task's operands and where each kind of task reads and writes.
// Internal to tiled.cu, which includes it once with the other pieces of tiled_*.cuh.
#pragma once
#include "device/tiles.cuh"
#include "encoder/panel.cuh"
#include "encoder/tile_device.cuh"
#include "encoder/tiled.hpp"

namespace encoder::tiled {

namespace {

using namespace panel;  // the tiles, copies, LayerNorm, mma.sync loop and epilogues of e13's kernel
using tiles::Counter;
using tiles::DeviceTask;
using tiles::global_ns;
using tiles::Kind;

constexpr int kBN = tiles::kTile;  // output tile kBM x kBN
constexpr int kStages = 6;         // weight chunks in flight beside a resident A panel
constexpr int kStreamStages = 4;   // A and weight chunks in flight when A streams
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
  const FoldedView* folded;   // per block (the folded LayerNorm's forms only)
  // tile_ln=row_stats: per row and 32 columns, (mean, M2) of the residual stream after the
  // projection [0] and after fc2 [1], [rows][hidden / 32] each.
  float2* stats[2];
#ifdef STUDY_TEST_HOOKS
  bool planted_short_stats;   // the folded LayerNorm's statistics leave out each row's last chunk
  bool planted_short_groups;  // the rows' statistics leave out each row's last 32-column group
#endif
};

// The four GEMMs of a block, in the order of the read-once tiling's per-GEMM parameters.
constexpr int kGemms = 4;
__host__ __device__ constexpr int gemm_index(Kind k) {
  return k == Kind::Qkv ? 0 : k == Kind::Projection ? 1 : k == Kind::Fc1 ? 2 : 3;
}

// tile_shape=read_once's parameters: the other forms' kernels take Params alone, so that their
// code is the code that was measured. Per GEMM (gemm_index): its K split, its slices' fp32 partial
// sums [split][rows][n], and one arrival count per output tile of a row group (split a block,
// cleared with the counters before each forward).
struct ReadOnceParams : Params {
  int split[kGemms];
  float* partials[kGemms];
  unsigned* slice_arrivals[kGemms];
  // The task clock's (its instantiation only): per task, a GEMM task's arrival at its slices'
  // meeting and the meeting's end (globaltimer), after the four stamps of Params::clock.
  unsigned long long* meet_clock;
#ifdef STUDY_TEST_HOOKS
  bool planted_slice_dropped;  // the slices' reduction leaves out the last slice
  bool planted_no_meeting;     // a slice adds its share without waiting for the other slices
#endif
};

// The form's choices as constants, which the pieces read (a policy type, as FlashAttention-3's
// kernels read their features from their mainloop's).
template <unsigned kCode>
struct Policy {
  static constexpr Form kForm = decode(kCode);
  static_assert(invalid(kForm) == nullptr, "only the forms that make a kernel are instantiated");
  static constexpr bool kStreamed = kForm.streamed();   // tile_a=streamed
  static constexpr int kCtas = kForm.ctas_per_sm();     // tile_ctas
  static constexpr bool kWgmma = kForm.wgmma();         // tile_mma=wgmma
  static constexpr bool kLnTasks = kForm.ln_tasks();    // tile_ln=tasks
  static constexpr bool kFolded = kForm.folded_ln();    // tile_ln=folded or row_stats
  static constexpr bool kStats = kForm.row_stats();     // tile_ln=row_stats
  static constexpr bool kLoadsFirst = kForm.loads_first();  // tile_loads=first
  static constexpr bool kReadOnce = kForm.read_once();      // tile_shape=read_once
  using Args = std::conditional_t<kReadOnce, ReadOnceParams, Params>;  // the kernel's parameters
};

// One GEMM task: its GEMM's operands (panel::Gemm), its output tile (m0, n0) and K slice; with
// the LayerNorm folded in, the folded weights' column vectors (FoldedView); with the rows'
// statistics left by their writers (tile_ln=row_stats), the partials a folded task combines (none:
// it gathers its own) and those a residual epilogue writes.
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
template <class P>
__device__ __forceinline__ GemmTask gemm_of(const Params& p, const DeviceTask& t) {
  constexpr bool kLnTasks = P::kLnTasks;
  const BlockView w = p.layers[t.block];
  const int D = p.hidden, m0 = t.row_tile * kBM, n0 = t.col * kBN;
  const Kind kind = static_cast<Kind>(t.kind);
  if constexpr (P::kFolded) {
    const FoldedView f = p.folded[t.block];
    // tile_ln=row_stats: block 0's QKV reads the patch embedding's rows, which no task of this
    // kernel wrote.
    const bool combined = P::kStats;
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

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

}  // namespace

}  // namespace encoder::tiled
