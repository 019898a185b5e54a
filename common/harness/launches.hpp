// Counts the kernels one call launches by capturing it into a CUDA graph (library calls
// such as cuDNN or cuBLASLt may launch several, or run an epilogue as an extra kernel).
#pragma once
#include <cuda_runtime.h>
#include <functional>

namespace study {

// fn must only enqueue work on the stream it is given. Returns the number of kernel nodes.
int count_kernel_launches(const std::function<void(cudaStream_t)>& fn);

}  // namespace study
