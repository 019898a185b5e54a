// The tile schedule run on the GPU without its math (tile_schedule.hpp): persistent CTAs take
// tickets, wait on the counters as the tile-scheduled forward will, check that every tile a task
// reads has had exactly the writes it must have had before it (a read too early finds fewer, an
// overwrite too early more), count their own writes into the tiles and signal. What the real
// kernel's dependency machinery must do, tested before any tile of math depends on it.
#pragma once
#include <cuda_runtime.h>
#include <memory>
#include <vector>
#include "encoder/tile_schedule.hpp"

namespace encoder::tiles {

// How the dry run is launched: at the forward's own shape (its CTAs, one or two an SM, and its
// threads) or on fewer CTAs, every CTA resident (a cooperative launch).
struct DryRunLaunch {
  int ctas = 0;             // 1 .. what fits on the GPU at `threads` (two an SM and more)
  int threads = 128;        // a multiple of 32, at most 256 (the forward's CTAs)
  double timeout_ms = 200;  // a wait not met by then counts a fault and goes on (nothing hangs)
  int skip_signal = -1;     // plants a fault: the task with this ticket does not signal
  // Plants a delay: the task with this ticket stores its outputs and signals delay_us after it
  // read its inputs, so that a task that starts before that one's outputs exist (a wait missing
  // or one short) reads them missing every time, not only when it wins a race.
  int delay_ticket = -1;
  double delay_us = 0;
};

struct DryRun {
  unsigned faults = 0;         // reads that found a wrong count, and waits that timed out
  int first_fault = -1;        // the ticket of one faulting task
  unsigned tickets_taken = 0;  // every task's, and one past the end per CTA
  std::vector<unsigned> counters;  // read back: a complete forward leaves final_counts exactly
  std::vector<unsigned> writes;    // per tile: a complete forward leaves TileUses::final_writes
  double elapsed_us = 0;           // the run (its resets and the kernel), from events around it
};

// The dry run set up once (the schedule's tables on the GPU) and launched as often as asked: a
// probe times its launches (experiments/probes/dry_run_chain.cu). Throws std::invalid_argument for
// a launch the GPU cannot hold.
class DryRunner {
 public:
  DryRunner(const Schedule& sched, const DryRunLaunch& launch);
  ~DryRunner();
  DryRunner(const DryRunner&) = delete;
  DryRunner& operator=(const DryRunner&) = delete;
  // One run enqueued on `stream`: the counters, tiles and ticket reset, then the kernel.
  void launch(cudaStream_t stream) const;
  // What the last run left (synchronizes the device); elapsed_us is 0 (dry_run times one run).
  DryRun result() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs sched once as `launch` says, timed with events around the run.
DryRun dry_run(const Schedule& sched, const DryRunLaunch& launch);

}  // namespace encoder::tiles
