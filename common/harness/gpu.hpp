// Device selection, host<->device copies, output poisoning.
#pragma once
#include <cuda_fp16.h>
#include <vector>
#include "harness/buffer.hpp"

namespace study {

// The number of CUDA devices: 0 when there is no driver (no libcuda, or one older than the
// runtime: cudaErrorInsufficientDriver) or no device (cudaErrorNoDevice). Any other error (a
// broken driver, a device in a bad state) throws StudyError(Cuda): it must fail a test, never
// turn a GPU suite into "skipped".
int gpu_count();
// Whether STUDY_REQUIRE_GPU=1 is set (the GPU job sets it): every GPU-suite skip is a failure.
bool gpu_required();
// Selects the device; throws StudyError(NoGpu) "no CUDA device" when there is none.
void require_gpu(int device);
// The SM count of `device` (the current device when -1), read from the driver once per device.
int sm_count(int device = -1);
// The L2 size of `device` in bytes (the current device when -1), read once per device.
int l2_bytes(int device = -1);

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  DeviceBuffer<T> d(host.size());
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer<T>& d) {
  std::vector<T> host(d.size());
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(host.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

// Fills with 0xFF bytes: NaN in fp16 and fp32, so any element a kernel forgets stays NaN.
template <typename T>
void poison(DeviceBuffer<T>& d) {
  CUDA_CHECK(cudaMemset(d.get(), 0xFF, d.bytes()));
}

}  // namespace study
