// CUDA-event timing of a region on one stream: warm-ups, then `iters` event pairs queued
// back to back (no host sync between repeats, so launch gaps do not inflate short kernels),
// optionally with an L2 flush (outside the events) before each repeat.
#pragma once
#include <cuda_runtime.h>
#include <functional>
#include <string>
#include "stats.hpp"

namespace study {

struct TimingOptions {
  int warmup = 5;
  int iters = 10;
  bool flush_l2 = false;
  cudaStream_t stream = nullptr;
  std::string label = "timed";  // NVTX range name
};

// Returns per-repeat times in microseconds.
Stats time_region(const std::function<void(cudaStream_t)>& fn, const TimingOptions& opt);

// Wall-clock time of a whole host routine (transfers and host syncs included), microseconds.
Stats time_routine(const std::function<void()>& fn, int warmup, int iters);

}  // namespace study
