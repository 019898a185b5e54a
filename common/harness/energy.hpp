// Energy of one call of a bench (docs/method.md, "Energy"): after the timed calls, a separate
// loop of back-to-back calls lasting at least `seconds`, NVML's energy counter read before and
// after it (harness/nvml.hpp), the SM clock sampled during it. The loop runs in chunks of about
// kChunkSeconds of calls, the host waiting for each chunk before the next (gaps of microseconds
// in seconds of work).
#pragma once
#include <cuda_runtime.h>
#include <functional>
#include <string>

namespace study {

struct Energy {
  double joules_per_call = 0;
  double images_per_joule = 0;
  double watts = 0;     // mean power: energy over the loop's time
  double sm_mhz = 0;    // median of the samples taken during the loop
  double seconds = 0;   // the loop's length
  long long calls = 0;
  std::string why_not;  // not empty: nothing was measured, and why
};

constexpr double kChunkSeconds = 0.2;
// A call longer than this is not measured: a loop of a few seconds would hold too few calls for
// the counter's resolution and the chunking to vanish in it (host-driven routines, CPU baselines).
constexpr double kMaxEnergyCallSeconds = 0.5;

// `median_us` (the timed median of one call) sizes the chunks; `images` is what one call computes.
Energy measure_energy(const std::function<void(cudaStream_t)>& run, cudaStream_t stream, int device,
                      double median_us, int images, double seconds);

}  // namespace study
