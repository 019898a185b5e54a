#include "encoder/tile_dry_run.hpp"

#include <stdexcept>
#include "encoder/tile_device.cuh"
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"

namespace encoder::tiles {
namespace {

constexpr int kMaxThreads = 256;

struct Params {
  const DeviceTask* tasks;
  int n;
  const int *read_begin, *read_tile, *write_begin, *write_tile;
  const unsigned* read_expect;
  unsigned *counters, *writes, *ticket, *faults;
  int* first_fault;
  unsigned long long timeout_ns;
  int skip_signal;
  int delay_ticket;
  unsigned long long delay_ns;
};

__device__ void fault(const Params& p, int ticket) {
  atomicAdd(p.faults, 1u);
  atomicCAS(p.first_fault, -1, ticket);
}

__global__ void __launch_bounds__(kMaxThreads) dry_run_kernel(Params p) {
  const int threads = static_cast<int>(blockDim.x);
  __shared__ int ticket;
  for (;;) {
    if (threadIdx.x == 0) ticket = static_cast<int>(atomicAdd(p.ticket, 1u));
    __syncthreads();
    const int i = ticket;
    if (i >= p.n) return;
    const DeviceTask t = p.tasks[i];
    if (threadIdx.x == 0)
      for (unsigned k = wait_inputs(t, p.counters, p.timeout_ns); k > 0; --k) fault(p, i);
    __syncthreads();
    for (int k = p.read_begin[i] + threadIdx.x; k < p.read_begin[i + 1]; k += threads)
      if (Counter(p.writes[p.read_tile[k]]).load(cuda::memory_order_relaxed) != p.read_expect[k]) fault(p, i);
    if (i == p.delay_ticket && threadIdx.x == 0) {  // the planted delay: its outputs stored late
      const unsigned long long start = global_ns();
      while (global_ns() - start < p.delay_ns) __nanosleep(1000);
    }
    __syncthreads();  // the task's reads before its writes, as a GEMM tile's loads before its stores
    for (int k = p.write_begin[i] + threadIdx.x; k < p.write_begin[i + 1]; k += threads)
      atomicAdd(&p.writes[p.write_tile[k]], 1u);
    __syncthreads();
    if (threadIdx.x == 0 && i != p.skip_signal) signal(t, p.counters);
  }
}

}  // namespace

struct DryRunner::Impl {
  int ctas, threads, n;
  study::DeviceBuffer<DeviceTask> tasks;
  study::DeviceBuffer<int> read_begin, read_tile, write_begin, write_tile, first_fault;
  study::DeviceBuffer<unsigned> read_expect, counters, writes, state;
  Params params{};
};

DryRunner::DryRunner(const Schedule& sched, const DryRunLaunch& launch) : impl_(std::make_unique<Impl>()) {
  const int threads = launch.threads;
  if (threads < 32 || threads > kMaxThreads || threads % 32)
    throw std::invalid_argument("dry_run: threads must be a multiple of 32 up to 256, got " + std::to_string(threads));
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dry_run_kernel, threads, 0));
  const int most = per_sm * study::sm_count(), ctas = launch.ctas;
  if (ctas < 1 || ctas > most)
    throw std::invalid_argument("dry_run: ctas must be 1.." + std::to_string(most) + " (all resident), got " +
                                std::to_string(ctas));
  const TileUses u = tile_uses(sched);
  Impl& m = *impl_;
  m.ctas = ctas;
  m.threads = threads;
  m.n = static_cast<int>(sched.tasks.size());
  m.tasks = study::to_device(device_tasks(sched));
  m.read_begin = study::to_device(u.read_begin);
  m.read_tile = study::to_device(u.read_tile);
  m.write_begin = study::to_device(u.write_begin);
  m.write_tile = study::to_device(u.write_tile);
  m.read_expect = study::to_device(u.read_expect);
  m.counters = study::DeviceBuffer<unsigned>(sched.final_counts.size());
  m.writes = study::DeviceBuffer<unsigned>(u.tiles);
  m.state = study::DeviceBuffer<unsigned>(2);
  m.first_fault = study::DeviceBuffer<int>(1);
  m.params = Params{m.tasks.get(), m.n, m.read_begin.get(), m.read_tile.get(), m.write_begin.get(),
                    m.write_tile.get(), m.read_expect.get(), m.counters.get(), m.writes.get(), m.state.get(),
                    m.state.get() + 1, m.first_fault.get(), static_cast<unsigned long long>(launch.timeout_ms * 1e6),
                    launch.skip_signal, launch.delay_ticket, static_cast<unsigned long long>(launch.delay_us * 1e3)};
}

DryRunner::~DryRunner() = default;

void DryRunner::launch(cudaStream_t stream) const {
  const Impl& m = *impl_;
  CUDA_CHECK(cudaMemsetAsync(m.counters.get(), 0, m.counters.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(m.writes.get(), 0, m.writes.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(m.state.get(), 0, m.state.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(m.first_fault.get(), 0xFF, sizeof(int), stream));
  study::launch_cooperative(dry_run_kernel, dim3(m.ctas), dim3(m.threads), 0, stream, m.params);
}

DryRun DryRunner::result() const {
  const Impl& m = *impl_;
  CUDA_CHECK(cudaDeviceSynchronize());
  DryRun r;
  const auto st = study::to_host(m.state);
  r.tickets_taken = st[0];
  r.faults = st[1];
  r.first_fault = study::to_host(m.first_fault)[0];
  r.counters = study::to_host(m.counters);
  r.writes = study::to_host(m.writes);
  return r;
}

DryRun dry_run(const Schedule& sched, const DryRunLaunch& launch) {
  const DryRunner runner(sched, launch);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  runner.launch(nullptr);  // its resets (four memsets) with the kernel
  CUDA_CHECK(cudaEventRecord(stop));
  DryRun r = runner.result();
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  r.elapsed_us = ms * 1e3;
  return r;
}

}  // namespace encoder::tiles
