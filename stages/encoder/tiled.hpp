// Every encoder block of a forward in one persistent kernel driven by the tile schedule
// (tile_schedule.hpp; the steps e24_tiled to e30_row_stats): one CTA per SM (from e26 on: two)
// takes tasks in ticket order, waits until the counters of the tiles each task reads reach their
// targets, runs it and adds one to its own counter. No grid barrier: a task starts as soon as its inputs
// exist, so the phases of a block overlap. Tasks are 64 x 64 output tiles of the QKV (LN1 on its A
// panel in shared memory), projection (+bias +residual), fc1 (LN2 on its panel, +bias, exact GELU)
// and fc2 GEMMs (K split in 4 slices of `hidden`, fp32 partial sums added in slice order by the
// slice that completes the tile, +bias +residual), and 64 rows of one head's attention; the math is
// e13's (mma.sync m16n8k16, fp32 accumulators, 8 warps). Each task's weights are requested before
// its wait. QKV's output alternates between two buffers by block (the schedule's check says why).
// With LayerNorm tasks the QKV and fc1 tasks read a row tile normalized once by a task of its own
// instead of each normalizing their panel; with the LayerNorm folded (e28) they read the residual
// stream itself and apply the LayerNorm in their epilogue; with the statistics where the rows are
// written (e30) the projection's and fc2's epilogues leave each row's partial statistics, which the
// QKV and fc1 tasks after them combine instead of gathering their own.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "encoder/tile_schedule.hpp"
#include "harness/buffer.hpp"

namespace encoder::tiled {

// The tile-scheduled forward's forms, one a step.
enum class Form {
  PanelLayerNorm,  // e24_tiled: each QKV and fc1 task normalizes its own A panel
  LnTasks,         // e25_ln_tasks: each row tile's LayerNorms as tasks of their own
  TwoCtas,         // e26_two_ctas: e25's schedule, GEMM tasks streaming their A panel, two CTAs an SM
  Wgmma,           // e27_wgmma_tiles: e26 with the GEMM tasks' products on wgmma
  FoldedLn,        // e28_folded_ln: e27 without LayerNorm tasks: QKV and fc1 fold the LayerNorm in
  LoadsFirst,      // e29_loads_first: e28 with its epilogues' loads issued ahead of their stores
  RowStats,        // e30_row_stats: e29 with each row's statistics written once, where it is written
};
constexpr bool ln_tasks(Form f) { return f == Form::LnTasks || f == Form::TwoCtas || f == Form::Wgmma; }
constexpr bool row_stats_form(Form f) { return f == Form::RowStats; }
constexpr bool loads_first(Form f) { return f == Form::LoadsFirst || row_stats_form(f); }
constexpr bool folded_ln(Form f) { return f == Form::FoldedLn || loads_first(f); }
constexpr bool wgmma(Form f) { return f == Form::Wgmma || folded_ln(f); }
constexpr bool two_ctas(Form f) { return f == Form::TwoCtas || wgmma(f); }

// The schedule's shape of `batch` images of p (fc2 split in 4 slices of `hidden`).
tiles::Shape shape_of(const Problem& p, int batch, bool ln_tasks);

// Why the kernel of `form` cannot run in this build on this GPU; empty when it can.
std::string unavailable(Form form);
// Why it cannot compute `batch` images of p (head_dim 64, hidden a multiple of 64 up to 1024,
// MLP ratio 4, every key of a head in shared memory); empty when it can.
std::string refuses(const Problem& p, int batch);

// One block's LayerNorm-folded QKV and fc1 (cutlass_gemm.hpp's fold_layernorm): y = rstd (x W'^T -
// mean col_sum) + col_bias, W' = W diag(gamma), col_sum its row sums, col_bias = b + W beta.
struct FoldedView {
  const __half *qkv_w, *fc1_w;
  const float *qkv_sum, *qkv_bias, *fc1_sum, *fc1_bias;
};

class Blocks {
 public:
  // With LayerNorm tasks (ln_tasks(form)) their output is a buffer of the runner's that the QKV
  // and fc1 tasks read.
  // With the LayerNorm folded (folded_ln(form)) the QKV and fc1 weights are folded once here.
  Blocks(const Problem& p, int batch, const std::vector<BlockView>& blocks, Form form);
  // x [rows, hidden] in and out (the residual stream, updated in place); qkv, attn and h the
  // blocks' intermediates [rows, 3 hidden], [rows, hidden], [rows, 4 hidden]. qkv holds the QKV of
  // the last block and every second one before it, a buffer of the runner's own the others'.
  // Clears the counters first.
  void run(__half* x, __half* qkv, __half* attn, __half* h, cudaStream_t s) const;
  static std::size_t scratch_bytes(const Problem& p, int batch, Form form);
  // NaN into fc2's partial sums, the runner's QKV buffer, the LayerNorm tasks' output and the
  // rows' partial statistics (each written before it is read).
  void poison_scratch();
  // After a forward (the caller synchronizes): empty when every counter holds exactly what a
  // complete forward leaves, every ticket was taken and no wait timed out; otherwise what differs.
  std::string dependency_state() const;
  const tiles::Schedule& schedule() const { return sched_; }
  // The task clock: while on, run() launches the kernel's instantiation that stamps each task's
  // start, inputs-ready and end (globaltimer) and SM; task_times() reads the last run's back.
  void set_clock(bool on);
  std::vector<TaskTime> task_times() const;

 private:
  void fold(const std::vector<BlockView>& blocks);  // folded_w_, folded_cols_, folded_

  Problem p_;
  int rows_ = 0, grid_ = 0;
  Form form_;
  std::size_t smem_ = 0;
  bool clock_ = false;
  tiles::Schedule sched_;
  study::DeviceBuffer<BlockView> layers_;
  study::DeviceBuffer<tiles::DeviceTask> tasks_;
  study::DeviceBuffer<float> partial_;
  study::DeviceBuffer<__half> qkv_odd_, ln_;
  // [0] the next ticket, [1] waits that timed out, then the schedule's counters, then one arrival
  // count per fc2 output tile (back to 0 after each block).
  study::DeviceBuffer<unsigned> state_;
  study::DeviceBuffer<unsigned long long> clock_stamps_;  // per task: start, ready, end, SM
  // The folded LayerNorm's weights (folded_ln(form)): per block, QKV's and fc1's w diag(gamma)
  // (fp16), their row sums and b + w beta (fp32), and the views the kernel reads.
  study::DeviceBuffer<__half> folded_w_;
  study::DeviceBuffer<float> folded_cols_;
  study::DeviceBuffer<FoldedView> folded_;
  // e30's partial statistics after the projection and after fc2 (row_stats_form(form)).
  study::DeviceBuffer<float2> stats_[2];
};

}  // namespace encoder::tiled
