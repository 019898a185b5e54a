#include "encoder/tile_dry_run.hpp"

#include <stdexcept>
#include "encoder/tile_device.cuh"
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"

namespace encoder::tiles {
namespace {

constexpr int kThreads = 128;

struct Params {
  const DeviceTask* tasks;
  int n;
  const int *read_begin, *read_tile, *write_begin, *write_tile;
  const unsigned* read_expect;
  unsigned *counters, *writes, *ticket, *faults;
  int* first_fault;
  unsigned long long timeout_ns;
  int skip_signal;
};

__device__ void fault(const Params& p, int ticket) {
  atomicAdd(p.faults, 1u);
  atomicCAS(p.first_fault, -1, ticket);
}

__global__ void __launch_bounds__(kThreads) dry_run_kernel(Params p) {
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
    for (int k = p.read_begin[i] + threadIdx.x; k < p.read_begin[i + 1]; k += kThreads)
      if (Counter(p.writes[p.read_tile[k]]).load(cuda::memory_order_relaxed) != p.read_expect[k]) fault(p, i);
    __syncthreads();  // the task's reads before its writes, as a GEMM tile's loads before its stores
    for (int k = p.write_begin[i] + threadIdx.x; k < p.write_begin[i + 1]; k += kThreads)
      atomicAdd(&p.writes[p.write_tile[k]], 1u);
    __syncthreads();
    if (threadIdx.x == 0 && i != p.skip_signal) signal(t, p.counters);
  }
}

}  // namespace

DryRun dry_run(const Schedule& sched, int ctas, double timeout_ms, int skip_signal) {
  const int sms = study::sm_count();
  if (ctas < 1 || ctas > sms)
    throw std::invalid_argument("dry_run: ctas must be 1.." + std::to_string(sms) + ", got " + std::to_string(ctas));
  const TileUses u = tile_uses(sched);
  const std::vector<DeviceTask> tasks = device_tasks(sched);
  auto d_tasks = study::to_device(tasks);
  auto read_begin = study::to_device(u.read_begin), read_tile = study::to_device(u.read_tile), write_begin = study::to_device(u.write_begin),
       write_tile = study::to_device(u.write_tile);
  auto read_expect = study::to_device(u.read_expect);
  study::DeviceBuffer<unsigned> counters(sched.final_counts.size()), writes(u.tiles), state(2);
  study::DeviceBuffer<int> first_fault(1);
  CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  CUDA_CHECK(cudaMemset(writes.get(), 0, writes.bytes()));
  CUDA_CHECK(cudaMemset(state.get(), 0, state.bytes()));
  CUDA_CHECK(cudaMemset(first_fault.get(), 0xFF, sizeof(int)));
  Params p{d_tasks.get(), static_cast<int>(tasks.size()), read_begin.get(), read_tile.get(), write_begin.get(),
           write_tile.get(), read_expect.get(), counters.get(), writes.get(), state.get(), state.get() + 1,
           first_fault.get(), static_cast<unsigned long long>(timeout_ms * 1e6), skip_signal};
  study::launch_cooperative(dry_run_kernel, dim3(ctas), dim3(kThreads), 0, nullptr, p);
  CUDA_CHECK(cudaDeviceSynchronize());
  DryRun r;
  const auto st = study::to_host(state);
  r.tickets_taken = st[0];
  r.faults = st[1];
  r.first_fault = study::to_host(first_fault)[0];
  r.counters = study::to_host(counters);
  r.writes = study::to_host(writes);
  return r;
}

}  // namespace encoder::tiles
