#include "harness/gpu.hpp"
#include <map>
#include <mutex>

namespace study {

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void require_gpu(int device) {
  const int n = gpu_count();
  if (n == 0) throw StudyError(ErrorKind::NoGpu, "no CUDA device");
  if (device >= n)
    throw StudyError(ErrorKind::Usage, "--device " + std::to_string(device) + " does not exist (" +
                                           std::to_string(n) + " CUDA device(s))");
  CUDA_CHECK(cudaSetDevice(device));
}

int sm_count(int device) {
  if (device < 0) CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<int, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it == known.end()) {
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    it = known.emplace(device, sms).first;
  }
  return it->second;
}

}  // namespace study
