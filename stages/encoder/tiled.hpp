// Every encoder block of a forward in one persistent kernel driven by the tile schedule
// (tile_schedule.hpp; the steps e24_tiled to e32_read_once): one or two CTAs per SM take tasks in
// ticket order, wait until the counters of the tiles each task reads reach their targets, run it
// and add one to its own counter. No grid barrier: a task starts as soon as its inputs exist, so
// the phases of a block overlap. Tasks are 64 x 64 output tiles of the QKV, projection (+bias
// +residual), fc1 (+bias, exact GELU) and fc2 GEMMs (K split in 4 slices of `hidden`, fp32 partial
// sums added in slice order by the slice that completes the tile, +bias +residual), 64 rows of one
// head's attention and, with tile_ln=tasks, one row tile's LayerNorm. With tile_shape=read_once
// a GEMM task is a row group of up to 256 rows (a batch-1 forward's 197 in one) by 64 columns over
// one K slice of every GEMM (read_once_shape's splits), its weight slice held in shared memory
// while the row tiles stream past it, so each weight is read once; the slices' fp32 partial sums
// are added by the slice that arrives last, which applies the GEMM's epilogue. Each task's
// weights are requested before its wait. QKV's output alternates between two buffers by block
// (the schedule's check says why).
//
// The kernel's form is the composition's tile_ fields (composition.def), each a policy of its
// pieces: tiled_mainloop.cuh (tile_a: the A panel resident or streamed; tile_mma: mma.sync or
// wgmma), tiled_epilogue.cuh (tile_loads, and the folded LayerNorm of tile_ln=folded|row_stats),
// tiled_tasks.cuh (the LayerNorm and attention tasks), tiled_read_once.cuh (tile_shape=read_once's
// GEMM task) and tiled.cu's kernel loop (tile_ctas).
// Every valid form is one instantiation.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "encoder/tile_schedule.hpp"
#include "harness/buffer.hpp"

namespace encoder::tiled {

// The form: one value of each tile_ field, in composition.def's order.
struct Form {
  TileA a{};
  TileCtas ctas{};
  TileMma mma{};
  TileLn ln{};
  TileLoads loads{};
  TileShape shape{};

  constexpr bool streamed() const { return a == TileA::Streamed; }
  constexpr int ctas_per_sm() const { return ctas == TileCtas::Two ? 2 : 1; }
  constexpr bool wgmma() const { return mma == TileMma::Wgmma; }
  constexpr bool ln_tasks() const { return ln == TileLn::Tasks; }
  constexpr bool folded_ln() const { return ln == TileLn::Folded || ln == TileLn::RowStats; }
  constexpr bool row_stats() const { return ln == TileLn::RowStats; }
  // Every value of tile_loads past in_order issues the epilogues' loads first.
  constexpr bool loads_first() const { return loads != TileLoads::InOrder; }
  constexpr bool read_once() const { return shape == TileShape::ReadOnce; }
};

inline Form form_of(const Composition& c) {
  return {c.tile_a, c.tile_ctas, c.tile_mma, c.tile_ln, c.tile_loads, c.tile_shape};
}
// c with the form's fields (Form{}: each at its default, for blocks other than tiled).
inline Composition with_form(Composition c, Form f) {
  c.tile_a = f.a;
  c.tile_ctas = f.ctas;
  c.tile_mma = f.mma;
  c.tile_ln = f.ln;
  c.tile_loads = f.loads;
  c.tile_shape = f.shape;
  return c;
}

// Why the fields make no kernel (nullptr when they make one). Constant, so that only the forms
// that make one are instantiated.
constexpr const char* invalid(Form f) {
  if (f.ctas == TileCtas::Two && !f.streamed())
    return "two CTAs an SM need the A panel streamed (tile_a=streamed): a resident panel fills the shared memory";
  if (f.wgmma() && !f.streamed()) return "wgmma reads its operands from the streamed stages (tile_a=streamed)";
  if (f.ln == TileLn::Panel && f.streamed())
    return "tile_ln=panel normalizes a GEMM task's whole A panel in shared memory (tile_a=resident)";
  if (f.folded_ln() && !f.streamed())
    return "a folded LayerNorm gathers its rows' statistics from the streamed chunks (tile_a=streamed)";
  if (f.row_stats() && !f.loads_first())
    return "the rows' statistics are left by the loads-first epilogues (tile_loads=first)";
  if (f.read_once() && !f.row_stats())
    return "a read-once task sees one K slice of its rows, never a whole row: its LayerNorm statistics are the rows' "
           "writers' (tile_ln=row_stats)";
  return nullptr;
}

// The form as one number, the kernel's template argument (so its mangled name says which form an
// instantiation is): each tile_ field's value index in composition.def's order, mixed radix, the
// first field lowest.
#define STUDY_ONE(...) +1
constexpr unsigned kTileValues[] = {0 STUDY_VALUES_TileA(STUDY_ONE), 0 STUDY_VALUES_TileCtas(STUDY_ONE),
                                    0 STUDY_VALUES_TileMma(STUDY_ONE), 0 STUDY_VALUES_TileLn(STUDY_ONE),
                                    0 STUDY_VALUES_TileLoads(STUDY_ONE), 0 STUDY_VALUES_TileShape(STUDY_ONE)};
#undef STUDY_ONE
constexpr int kFields = sizeof(kTileValues) / sizeof(kTileValues[0]);
constexpr unsigned forms() {
  unsigned n = 1;
  for (unsigned v : kTileValues) n *= v;
  return n;
}
constexpr unsigned kForms = forms();
// A field added later goes last, so that the earlier forms keep their codes (and their kernels'
// names: tests/frozen_rungs.py finds a step's instantiation by its code).
constexpr unsigned code(Form f) {
  const unsigned v[] = {unsigned(f.a), unsigned(f.ctas), unsigned(f.mma), unsigned(f.ln), unsigned(f.loads),
                        unsigned(f.shape)};
  static_assert(sizeof(v) / sizeof(v[0]) == kFields, "a value of every tile_ field");
  unsigned c = 0;
  for (int i = kFields - 1; i >= 0; --i) c = c * kTileValues[i] + v[i];
  return c;
}
constexpr Form decode(unsigned c) {
  unsigned v[kFields] = {};
  for (int i = 0; i < kFields; ++i) {
    v[i] = c % kTileValues[i];
    c /= kTileValues[i];
  }
  return {TileA(v[0]), TileCtas(v[1]), TileMma(v[2]), TileLn(v[3]), TileLoads(v[4]), TileShape(v[5])};
}

// The schedule's shape of `batch` images of p in the form's tiling: 64 x 64 tasks with fc2 split
// in 4 slices of `hidden`, or the read-once tiling (read_once_shape) for this GPU's SMs, each
// weight slice small enough for shared memory.
tiles::Shape shape_of(const Problem& p, int batch, Form form);

// Why the kernel of `form` cannot run in this build on this GPU; empty when it can.
std::string unavailable(Form form);
// Why it cannot compute `batch` images of p (head_dim 64, hidden a multiple of 64 up to 1024,
// MLP ratio 4, every key of a head in shared memory); empty when it can.
std::string refuses(const Problem& p, int batch, Form form);

// One block's LayerNorm-folded QKV and fc1 (cutlass_gemm.hpp's fold_layernorm): y = rstd (x W'^T -
// mean col_sum) + col_bias, W' = W diag(gamma), col_sum its row sums, col_bias = b + W beta.
struct FoldedView {
  const __half *qkv_w, *fc1_w;
  const float *qkv_sum, *qkv_bias, *fc1_sum, *fc1_bias;
};

class Blocks {
 public:
  // With LayerNorm tasks (form.ln_tasks()) their output is a buffer of the runner's that the QKV
  // and fc1 tasks read. With the LayerNorm folded (form.folded_ln()) the QKV and fc1 weights are
  // folded once here. Throws StudyError(Usage) for a form that makes no kernel (invalid).
  Blocks(const Problem& p, int batch, const std::vector<BlockView>& blocks, Form form);
  // x [rows, hidden] in and out (the residual stream, updated in place); qkv, attn and h the
  // blocks' intermediates [rows, 3 hidden], [rows, hidden], [rows, 4 hidden]. qkv holds the QKV of
  // the last block and every second one before it, a buffer of the runner's own the others'.
  // Clears the counters first.
  void run(__half* x, __half* qkv, __half* attn, __half* h, cudaStream_t s) const;
  static std::size_t scratch_bytes(const Problem& p, int batch, Form form);
  // NaN into the split GEMMs' partial sums, the runner's QKV buffer, the LayerNorm tasks' output and the
  // rows' partial statistics (each written before it is read).
  void poison_scratch();
  // After a forward (the caller synchronizes): empty when every counter holds exactly what a
  // complete forward leaves, every ticket was taken, no wait timed out and the task table on the
  // device is still the proven schedule, entry by entry; otherwise what differs.
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
  study::DeviceBuffer<float> partial_;  // the split GEMMs' fp32 partial sums
  study::DeviceBuffer<__half> qkv_odd_, ln_;
  // [0] the next ticket, [1] waits that timed out, then the schedule's counters, then one arrival
  // count per split output tile: fc2's, back to 0 after each block; read_once: every GEMM's,
  // cleared before each forward.
  study::DeviceBuffer<unsigned> state_;
  study::DeviceBuffer<unsigned long long> clock_stamps_;  // per task: start, ready, end, SM
  // The folded LayerNorm's weights (form.folded_ln()): per block, QKV's and fc1's w diag(gamma)
  // (fp16), their row sums and b + w beta (fp32), and the views the kernel reads.
  study::DeviceBuffer<__half> folded_w_;
  study::DeviceBuffer<float> folded_cols_;
  study::DeviceBuffer<FoldedView> folded_;
  // e30's partial statistics after the projection and after fc2 (form.row_stats()).
  study::DeviceBuffer<float2> stats_[2];
};

}  // namespace encoder::tiled
