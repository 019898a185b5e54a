// CUDA-event timing of a region on one stream: warm-ups, then `iters` event pairs queued
// back to back (no host sync between repeats, so launch gaps do not inflate short kernels),
// optionally with an L2 flush (outside the events) before each repeat.
#pragma once
#include <cuda_runtime.h>
#include <functional>
#include <string>
#include "harness/stats.hpp"

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

// Evicts what L2 holds by writing a scratch buffer twice its size on `stream` (the flush
// time_region does with flush_l2).
void flush_l2(cudaStream_t stream);

// A host-to-host routine on one stream, timed by CUDA events between its phases: host-to-device
// copy, preprocessing (may be empty), the computation, device-to-host copy. The host waits for
// the copy back after every repeat, as a caller that needs its output does.
struct RoutinePhases {
  std::function<void(cudaStream_t)> h2d, preprocess, compute, d2h;
};
struct RoutineTimes {
  Stats total, h2d, preprocess, compute, d2h;  // microseconds per repeat
};
RoutineTimes time_routine_phases(const RoutinePhases& phases, const TimingOptions& opt);

// Wall-clock time of a whole host routine (transfers and host syncs included), microseconds.
Stats time_routine(const std::function<void()>& fn, int warmup, int iters);

}  // namespace study
