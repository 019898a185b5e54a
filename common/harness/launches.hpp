// CUDA graphs of enqueued work: capturing it, walking its nodes, and counting the kernels one
// call launches (library calls such as cuDNN or cuBLASLt may launch several, or run an epilogue
// as an extra kernel).
#pragma once
#include <cuda_runtime.h>
#include <functional>
#include <vector>

namespace study {

// Records what fn enqueues on `stream` into a new graph the caller owns and destroys. The stream
// must be able to capture (not the legacy default stream); fn must only enqueue work on the
// stream it is given. A throw from fn ends the capture, frees what it recorded and propagates.
cudaGraph_t capture_graph(cudaStream_t stream, const std::function<void(cudaStream_t)>& fn);

// The nodes of `graph` of one type.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph, cudaGraphNodeType type);

// The number of kernel nodes of fn's work, captured on a stream of its own.
int count_kernel_launches(const std::function<void(cudaStream_t)>& fn);

}  // namespace study
