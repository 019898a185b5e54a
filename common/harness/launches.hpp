// CUDA graphs of enqueued work: capturing it, walking its nodes, and counting the kernels one
// call launches (library calls such as cuDNN or cuBLASLt may launch several, or run an epilogue
// as an extra kernel); and the cooperative launch of kernels whose CTAs wait on one another.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>
#include "harness/check.hpp"

namespace study {

// Records what fn enqueues on `stream` into a new graph the caller owns and destroys. The stream
// must be able to capture (not the legacy default stream); fn must only enqueue work on the
// stream it is given. A throw from fn ends the capture, frees what it recorded and propagates.
cudaGraph_t capture_graph(cudaStream_t stream, const std::function<void(cudaStream_t)>& fn);

// The nodes of `graph` of one type.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph, cudaGraphNodeType type);

// The number of kernel nodes of fn's work, captured on a stream of its own.
int count_kernel_launches(const std::function<void(cudaStream_t)>& fn);

// Launches kernel with every CTA of the grid resident at once, as a kernel whose CTAs wait on one
// another needs (a waiting CTA must not keep the one it waits for from starting): the driver
// refuses a grid that cannot be.
template <class... Params, class... Args>
void launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                        Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace study
