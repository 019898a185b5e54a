#include "harness/gpu.hpp"
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace study {

int gpu_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess) return n;
  cudaGetLastError();
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) return 0;
  throw StudyError(ErrorKind::Cuda, std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + " (" +
                                        cudaGetErrorString(e) + ")");
}

bool gpu_required() {
  const char* v = std::getenv("STUDY_REQUIRE_GPU");
  return v && std::string(v) == "1";
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
