#include "harness/energy.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>
#include "harness/check.hpp"
#include "harness/nvml.hpp"

namespace study {

Energy measure_energy(const std::function<void(cudaStream_t)>& run, cudaStream_t stream, int device,
                      double median_us, int images, double seconds) {
  Energy e;
  if (!(median_us > 0)) {
    e.why_not = "no timed call to size the loop";
    return e;
  }
  if (median_us > kMaxEnergyCallSeconds * 1e6) {
    e.why_not = "a call takes longer than the loop can hold enough of (kMaxEnergyCallSeconds)";
    return e;
  }
  if (!nvml::total_energy_mj(device)) {
    e.why_not = "no NVML energy counter on this machine (nvmlDeviceGetTotalEnergyConsumption)";
    return e;
  }
  const long long chunk = std::max(1LL, static_cast<long long>(kChunkSeconds * 1e6 / median_us));
  std::vector<unsigned> clocks;
  std::atomic<bool> done{false};
  std::thread sampler([&] {  // the SM clock every 100 ms while the loop runs
    while (!done.load()) {
      if (const auto mhz = nvml::sm_clock_mhz(device)) clocks.push_back(*mhz);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  try {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    const auto e0 = nvml::total_energy_mj(device);
    double elapsed = 0;
    while (elapsed < seconds) {
      for (long long i = 0; i < chunk; ++i) run(stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      e.calls += chunk;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const auto e1 = nvml::total_energy_mj(device);
    done = true;
    sampler.join();
    if (!e0 || !e1 || *e1 <= *e0) {
      e.why_not = "the NVML energy counter did not advance over the loop";
      return e;
    }
    const double joules = static_cast<double>(*e1 - *e0) / 1000.0;
    e.seconds = elapsed;
    e.joules_per_call = joules / static_cast<double>(e.calls);
    e.images_per_joule = static_cast<double>(images) / e.joules_per_call;
    e.watts = joules / elapsed;
    if (!clocks.empty()) {
      std::nth_element(clocks.begin(), clocks.begin() + static_cast<std::ptrdiff_t>(clocks.size() / 2), clocks.end());
      e.sm_mhz = clocks[clocks.size() / 2];
    }
  } catch (...) {
    done = true;
    sampler.join();
    throw;
  }
  return e;
}

}  // namespace study
