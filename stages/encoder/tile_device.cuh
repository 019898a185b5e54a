// The tile schedule's dependency protocol on the GPU, one for both kernels that run it (the dry
// run, tile_dry_run.cu, and the forward, tiled.cu): a task's thread 0 polls each counter it waits
// on with acquire loads until it reaches its target; the task's CTA then synchronizes, and after
// its last store and a CTA barrier thread 0 adds one to its own counter with release semantics.
#pragma once
#include <cuda/atomic>
#include "encoder/tile_schedule.hpp"

namespace encoder::tiles {

using Counter = cuda::atomic_ref<unsigned, cuda::thread_scope_device>;

// The GPU's global timer in ns (one clock for every SM).
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0 of task t's CTA: until each counter it waits on reaches its target. A wait not met
// within timeout_ns is given up (a dropped signal ends the run instead of hanging the GPU); the
// number given up is returned for the caller to record as faults.
__device__ inline unsigned wait_inputs(const DeviceTask& t, unsigned* counters, unsigned long long timeout_ns) {
  unsigned timed_out = 0;
  for (int k = 0; k < t.waits; ++k) {
    Counter c(counters[t.wait_counter[k]]);
    if (c.load(cuda::memory_order_acquire) >= t.wait_target[k]) continue;
    const unsigned long long start = global_ns();
    while (c.load(cuda::memory_order_acquire) < t.wait_target[k])
      if (global_ns() - start > timeout_ns) {
        ++timed_out;
        break;
      }
  }
  return timed_out;
}

// Thread 0, after the task's CTA barrier that follows its last store: the task's arrival.
__device__ __forceinline__ void signal(const DeviceTask& t, unsigned* counters) {
  Counter(counters[t.signals]).fetch_add(1u, cuda::memory_order_release);
}

}  // namespace encoder::tiles
