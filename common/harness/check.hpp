// Error checks for every CUDA / cuBLASLt / cuDNN call, reported with file:line.
// Errors throw StudyError so that executables print one line and exit non-zero, and
// benches can turn a failure into a `failed` CSV row instead of a crash.
#pragma once
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <stdexcept>
#include <string>

namespace study {

enum class ErrorKind { Usage, NoGpu, OutOfMemory, Cuda, Library, Data };

struct StudyError : std::runtime_error {
  ErrorKind kind;
  StudyError(ErrorKind k, const std::string& msg) : std::runtime_error(msg), kind(k) {}
};

[[noreturn]] void throw_cuda(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line);

}  // namespace study

#define CUDA_CHECK(expr)                                                      \
  do {                                                                        \
    cudaError_t study_err_ = (expr);                                          \
    if (study_err_ != cudaSuccess)                                            \
      ::study::throw_cuda(study_err_, #expr, __FILE__, __LINE__);             \
  } while (0)

// After every kernel launch: catches bad launch configurations at the launch site.
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expr)                                                    \
  do {                                                                        \
    cublasStatus_t study_st_ = (expr);                                        \
    if (study_st_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::study::throw_cublas(study_st_, #expr, __FILE__, __LINE__);            \
  } while (0)
