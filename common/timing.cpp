#include "timing.hpp"
#include <chrono>
#include <vector>
#include "buffer.hpp"
#include "check.hpp"
#include "nvtx.hpp"

namespace study {

namespace {
// Scratch twice the L2 size: writing it evicts whatever the timed region left in L2.
DeviceBuffer<char>& flush_buffer() {
  static DeviceBuffer<char> buf = [] {
    int dev = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    return DeviceBuffer<char>(static_cast<std::size_t>(2 * (l2 > 0 ? l2 : (64 << 20))));
  }();
  return buf;
}
}  // namespace

Stats time_region(const std::function<void(cudaStream_t)>& fn, const TimingOptions& opt) {
  NvtxRange range(opt.label.c_str());
  for (int i = 0; i < opt.warmup; ++i) fn(opt.stream);
  CUDA_CHECK(cudaStreamSynchronize(opt.stream));
  std::vector<cudaEvent_t> start(opt.iters), stop(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    CUDA_CHECK(cudaEventCreate(&start[i]));
    CUDA_CHECK(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < opt.iters; ++i) {
    if (opt.flush_l2) {
      auto& f = flush_buffer();
      CUDA_CHECK(cudaMemsetAsync(f.get(), i & 0xFF, f.bytes(), opt.stream));
    }
    CUDA_CHECK(cudaEventRecord(start[i], opt.stream));
    fn(opt.stream);
    CUDA_CHECK(cudaEventRecord(stop[i], opt.stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(opt.stream));
  std::vector<double> us(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
    us[i] = 1000.0 * ms;
    cudaEventDestroy(start[i]);
    cudaEventDestroy(stop[i]);
  }
  return summarize(us);
}

Stats time_routine(const std::function<void()>& fn, int warmup, int iters) {
  NvtxRange range("routine");
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> us(iters);
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    auto t1 = std::chrono::steady_clock::now();
    us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  return summarize(us);
}

}  // namespace study
