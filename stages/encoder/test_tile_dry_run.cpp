// The tile schedule on the GPU without its math (tile_dry_run.hpp): on every SM, at the forward's
// own launch shape (two CTAs of 256 threads an SM) and on a few CTAs, vit_b at batch 1 (with and
// without LayerNorm tasks), vit_s at 3 images and the read-once tiling, every read finds its tile
// as the program order leaves it, and the counters and tiles read back are exactly what a complete
// forward leaves; run twice from fresh counters. A task that does not signal (planted) fails
// deterministically: its counter is one short and every wait on it times out. A wait one short
// (planted, past the CPU's proof) fails every time once the producer it no longer waits for stores
// late (a planted delay), not only when it loses a race; the same delay on the sound schedule
// passes.
#include <doctest/doctest.h>
#include <algorithm>
#include "encoder/tile_dry_run.hpp"
#include "harness/gpu.hpp"
#include "harness/gpu_test_main.hpp"

using namespace encoder::tiles;

namespace {

Shape vit(int hidden, int tokens, int images, int split, bool ln_tasks = false) {
  return vit_shape(hidden, 12, tokens, images, split, ln_tasks);
}

void check_complete(const Schedule& sched, const DryRunLaunch& launch) {
  const TileUses uses = tile_uses(sched);
  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    const DryRun r = dry_run(sched, launch);
    CHECK(r.faults == 0u);
    CHECK(r.first_fault == -1);
    CHECK(r.tickets_taken == sched.tasks.size() + static_cast<unsigned>(launch.ctas));
    CHECK(r.counters == sched.final_counts);
    CHECK(r.writes == uses.final_writes);
  }
}

std::size_t first_of(const Schedule& sched, Kind k, int block, int slice = 0) {
  std::size_t i = 0;
  while (sched.tasks[i].kind != k || sched.tasks[i].block != block || sched.tasks[i].slice != slice) ++i;
  return i;
}

// The producer of a counter with the largest ticket: the last to signal when all start together.
int last_signaler(const Schedule& sched, int counter) {
  int last = -1;
  for (std::size_t i = 0; i < sched.tasks.size(); ++i)
    if (sched.tasks[i].signals == counter) last = static_cast<int>(i);
  return last;
}

}  // namespace

TEST_CASE("the schedule on the GPU: every read in order, every counter and tile as a forward leaves it") {
  const int sms = study::sm_count();
  for (const Shape& shape : {vit(768, 197, 1, 3), vit(384, 197, 3, 2), vit(768, 197, 1, 4, true),
                             read_once_shape(768, 12, 197, 1, sms)}) {
    const Schedule sched = build(shape);
    REQUIRE(check(sched) == "");
    CAPTURE(shape.hidden);
    CAPTURE(shape.ln_tasks);
    CAPTURE(shape.gemm_rows);
    for (const DryRunLaunch& launch : {DryRunLaunch{sms}, DryRunLaunch{7}, DryRunLaunch{2 * sms, 256}}) {
      CAPTURE(launch.ctas);
      CAPTURE(launch.threads);
      check_complete(sched, launch);
    }
  }
}

TEST_CASE("a task that does not signal: its counter one short, the waits on it fault, nothing hangs") {
  const Schedule sched = build(vit(384, 197, 1, 2));
  const std::size_t victim = first_of(sched, Kind::Attention, 4);
  DryRunLaunch launch{study::sm_count()};
  launch.timeout_ms = 20;
  launch.skip_signal = static_cast<int>(victim);
  const DryRun r = dry_run(sched, launch);
  CHECK(r.faults > 0u);
  CHECK(r.first_fault >= 0);
  REQUIRE(r.counters.size() == sched.final_counts.size());
  const int c = sched.tasks[victim].signals;
  CHECK(r.counters[c] + 1 == sched.final_counts[c]);
  CHECK(r.counters != sched.final_counts);
}

TEST_CASE("a wait one short fails every time once the producer it skips stores late") {
  const int sms = study::sm_count();
  // Each plant: the schedule, and the consumer (the first task of a kind, block and K slice) whose
  // wait is made one short; the delayed producer is one whose output that consumer reads (fc2's
  // last slice reads fc1's last columns), at the forward's launch shape.
  struct Plant {
    const char* what;
    Shape shape;
    Kind kind;
    int block, slice, wait;
  };
  const Shape read_once = read_once_shape(768, 12, 197, 1, sms);
  for (const Plant& plant :
       {Plant{"the projection one head short", vit(768, 197, 1, 3), Kind::Projection, 2, 0, 0},
        Plant{"attention one K/V tile short", vit(768, 197, 1, 3), Kind::Attention, 5, 0, 1},
        Plant{"the next block's QKV one fc2 slice short", vit(768, 197, 1, 3), Kind::Qkv, 3, 0, 0},
        Plant{"read-once fc2 one fc1 slice short", read_once, Kind::Fc2, 4, read_once.fc2_split - 1, 0}}) {
    CAPTURE(plant.what);
    Schedule sched = build(plant.shape);
    Task& consumer = sched.tasks[first_of(sched, plant.kind, plant.block, plant.slice)];
    const int late = last_signaler(sched, consumer.waits[plant.wait].counter);
    REQUIRE(late >= 0);
    DryRunLaunch launch{2 * sms, 256};
    launch.delay_ticket = late;
    launch.delay_us = 50;
    // Control: the sound schedule with the same delay.
    check_complete(sched, launch);
    consumer.waits[plant.wait].target -= 1;
    for (int run = 0; run < 3; ++run) {
      CAPTURE(run);
      const DryRun r = dry_run(sched, launch);
      CHECK(r.faults > 0u);
      CHECK(r.first_fault >= 0);
    }
  }
}

TEST_CASE("launches the GPU cannot hold are refused") {
  const Schedule sched = build(vit(384, 197, 1, 2));
  CHECK_THROWS_AS(dry_run(sched, DryRunLaunch{0}), std::invalid_argument);
  CHECK_THROWS_AS(dry_run(sched, DryRunLaunch{1, 100}), std::invalid_argument);
  CHECK_THROWS_AS(dry_run(sched, DryRunLaunch{1, 512}), std::invalid_argument);
  CHECK_THROWS_AS(dry_run(sched, DryRunLaunch{1000 * study::sm_count()}), std::invalid_argument);
}

int main(int argc, char** argv) { return gpu_test_main(argc, argv, "tile_dry_run"); }
