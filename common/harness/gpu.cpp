#include "harness/gpu.hpp"
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

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

namespace {

// A device attribute, read from the driver once per (device, attribute): the stage versions ask
// on every launch, and a launch inside a timed loop must not call the driver.
int cached_attribute(cudaDeviceAttr attr, int device) {
  if (device < 0) CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const std::pair<int, int> key{device, static_cast<int>(attr)};
  auto it = known.find(key);
  if (it == known.end()) {
    int value = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
    it = known.emplace(key, value).first;
  }
  return it->second;
}

}  // namespace

int sm_count(int device) { return cached_attribute(cudaDevAttrMultiProcessorCount, device); }

int l2_bytes(int device) { return cached_attribute(cudaDevAttrL2CacheSize, device); }

}  // namespace study
