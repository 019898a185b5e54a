#include "harness/check.hpp"

namespace study {

[[noreturn]] void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a sticky launch error so the next call reports its own
  std::string msg = std::string("CUDA error ") + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ") in " + expr + " at " + file + ":" +
                    std::to_string(line);
  ErrorKind kind = ErrorKind::Cuda;
  if (e == cudaErrorMemoryAllocation) kind = ErrorKind::OutOfMemory;
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) kind = ErrorKind::NoGpu;
  throw StudyError(kind, msg);
}

[[noreturn]] void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  ErrorKind kind = s == CUBLAS_STATUS_ALLOC_FAILED ? ErrorKind::OutOfMemory : ErrorKind::Library;
  throw StudyError(kind, std::string("cuBLAS error ") + cublasLtGetStatusName(s) + " in " +
                             expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace study
