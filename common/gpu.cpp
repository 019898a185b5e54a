#include "gpu.hpp"

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

}  // namespace study
