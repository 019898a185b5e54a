// The tile schedule on the GPU without its math (tile_dry_run.hpp): on every SM and on a few CTAs,
// vit_b at batch 1 (with and without LayerNorm tasks) and vit_s at 3 images, every read finds its
// tile as the program order leaves it, and the counters and tiles read back are exactly what a
// complete forward leaves; run twice from fresh counters. A task that does not signal (planted)
// fails deterministically: its counter is one short and every wait on it times out.
#include <doctest/doctest.h>
#include "encoder/tile_dry_run.hpp"
#include "harness/gpu.hpp"
#include "harness/gpu_test_main.hpp"

using namespace encoder::tiles;

namespace {

Shape vit(int hidden, int tokens, int images, int split, bool ln_tasks = false) {
  return vit_shape(hidden, 12, tokens, images, split, ln_tasks);
}

}  // namespace

TEST_CASE("the schedule on the GPU: every read in order, every counter and tile as a forward leaves it") {
  for (const Shape& shape : {vit(768, 197, 1, 3), vit(384, 197, 3, 2), vit(768, 197, 1, 4, true)}) {
    const Schedule sched = build(shape);
    REQUIRE(check(sched) == "");
    const TileUses uses = tile_uses(sched);
    for (int ctas : {study::sm_count(), 7})
      for (int run = 0; run < 2; ++run) {
        CAPTURE(shape.hidden);
        CAPTURE(shape.ln_tasks);
        CAPTURE(ctas);
        CAPTURE(run);
        const DryRun r = dry_run(sched, ctas);
        CHECK(r.faults == 0u);
        CHECK(r.first_fault == -1);
        CHECK(r.tickets_taken == sched.tasks.size() + static_cast<unsigned>(ctas));
        CHECK(r.counters == sched.final_counts);
        CHECK(r.writes == uses.final_writes);
      }
  }
}

TEST_CASE("a task that does not signal: its counter one short, the waits on it fault, nothing hangs") {
  const Schedule sched = build(vit(384, 197, 1, 2));
  std::size_t victim = 0;
  while (sched.tasks[victim].kind != Kind::Attention || sched.tasks[victim].block != 4) ++victim;
  const DryRun r = dry_run(sched, study::sm_count(), 20, static_cast<int>(victim));
  CHECK(r.faults > 0u);
  CHECK(r.first_fault >= 0);
  REQUIRE(r.counters.size() == sched.final_counts.size());
  const int c = sched.tasks[victim].signals;
  CHECK(r.counters[c] + 1 == sched.final_counts[c]);
  CHECK(r.counters != sched.final_counts);
}

int main(int argc, char** argv) { return gpu_test_main(argc, argv, "tile_dry_run"); }
