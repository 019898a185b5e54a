// RAII device and pinned host buffers. Device allocations are stream-ordered
// (cudaMallocAsync) and counted, so benches can report the device bytes they hold.
#pragma once
#include <cstddef>
#include <cuda_runtime.h>
#include <utility>
#include "harness/check.hpp"

namespace study {

// Bytes currently held through DeviceBuffer / PinnedBuffer (for the CSV's memory columns).
std::size_t device_bytes_in_use();
std::size_t host_bytes_in_use();
void count_device_bytes(std::ptrdiff_t delta);
void count_host_bytes(std::ptrdiff_t delta);

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count, cudaStream_t stream = nullptr) : count_(count) {
    if (count == 0) return;
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), bytes(), stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    count_device_bytes(static_cast<std::ptrdiff_t>(bytes()));
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { release(); swap(o); }
    return *this;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() {
    if (ptr_) {
      cudaFree(ptr_);  // synchronous free: buffers die outside timed regions
      count_device_bytes(-static_cast<std::ptrdiff_t>(bytes()));
    }
    ptr_ = nullptr;
    count_ = 0;
  }
  void swap(DeviceBuffer& o) noexcept { std::swap(ptr_, o.ptr_); std::swap(count_, o.count_); }
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count) : count_(count) {
    if (count == 0) return;
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
    count_host_bytes(static_cast<std::ptrdiff_t>(count * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (ptr_) {
      cudaFreeHost(ptr_);
      count_host_bytes(-static_cast<std::ptrdiff_t>(count_ * sizeof(T)));
    }
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept { std::swap(ptr_, o.ptr_); std::swap(count_, o.count_); }
  T* get() const { return ptr_; }
  T& operator[](std::size_t i) const { return ptr_[i]; }
  std::size_t size() const { return count_; }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace study
