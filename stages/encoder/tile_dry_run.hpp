// The tile schedule run on the GPU without its math (tile_schedule.hpp): persistent CTAs take
// tickets, wait on the counters as the tile-scheduled forward will, check that every tile a task
// reads has had exactly the writes it must have had before it (a read too early finds fewer, an
// overwrite too early more), count their own writes into the tiles and signal. What the real
// kernel's dependency machinery must do, tested before any tile of math depends on it.
#pragma once
#include <vector>
#include "encoder/tile_schedule.hpp"

namespace encoder::tiles {

struct DryRun {
  unsigned faults = 0;         // reads that found a wrong count, and waits that timed out
  int first_fault = -1;        // the ticket of one faulting task
  unsigned tickets_taken = 0;  // every task's, and one past the end per CTA
  std::vector<unsigned> counters;  // read back: a complete forward leaves final_counts exactly
  std::vector<unsigned> writes;    // per tile: a complete forward leaves TileUses::final_writes
};

// Runs sched once on `ctas` resident CTAs (at most one per SM). A wait that has not been met
// after timeout_ms counts a fault and goes on, so a dropped signal ends the run instead of
// hanging it. skip_signal >= 0 plants that fault: the task with that ticket does not signal.
DryRun dry_run(const Schedule& sched, int ctas, double timeout_ms = 200, int skip_signal = -1);

}  // namespace encoder::tiles
