#include "harness/timing.hpp"
#include <chrono>
#include <vector>
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/nvtx.hpp"

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

void flush_l2(cudaStream_t stream) {
  static int fill = 0;  // a new value each time, so no write can be skipped as unchanged
  auto& f = flush_buffer();
  CUDA_CHECK(cudaMemsetAsync(f.get(), ++fill & 0xFF, f.bytes(), stream));
}

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
    if (opt.flush_l2) flush_l2(opt.stream);
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

RoutineTimes time_routine_phases(const RoutinePhases& ph, const TimingOptions& opt) {
  NvtxRange range(opt.label.c_str());
  auto once = [&](cudaStream_t s, cudaEvent_t* ev) {
    if (ev) CUDA_CHECK(cudaEventRecord(ev[0], s));
    ph.h2d(s);
    if (ev) CUDA_CHECK(cudaEventRecord(ev[1], s));
    if (ph.preprocess) ph.preprocess(s);
    if (ev) CUDA_CHECK(cudaEventRecord(ev[2], s));
    ph.compute(s);
    if (ev) CUDA_CHECK(cudaEventRecord(ev[3], s));
    ph.d2h(s);
    if (ev) CUDA_CHECK(cudaEventRecord(ev[4], s));
    CUDA_CHECK(cudaStreamSynchronize(s));
  };
  for (int i = 0; i < opt.warmup; ++i) once(opt.stream, nullptr);
  constexpr int kMarks = 5;
  std::vector<cudaEvent_t> ev(static_cast<std::size_t>(kMarks) * opt.iters);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<double> total(opt.iters), h2d(opt.iters), pre(opt.iters), comp(opt.iters), d2h(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    if (opt.flush_l2) flush_l2(opt.stream);
    once(opt.stream, &ev[static_cast<std::size_t>(kMarks) * i]);
  }
  auto us = [&](int i, int a, int b) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev[static_cast<std::size_t>(kMarks) * i + a],
                                    ev[static_cast<std::size_t>(kMarks) * i + b]));
    return 1000.0 * ms;
  };
  for (int i = 0; i < opt.iters; ++i) {
    total[i] = us(i, 0, 4);
    h2d[i] = us(i, 0, 1);
    pre[i] = us(i, 1, 2);
    comp[i] = us(i, 2, 3);
    d2h[i] = us(i, 3, 4);
  }
  for (auto e : ev) cudaEventDestroy(e);
  return {summarize(total), summarize(h2d), summarize(pre), summarize(comp), summarize(d2h)};
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
