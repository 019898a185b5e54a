#include "harness/launches.hpp"
#include "harness/check.hpp"

namespace study {

cudaGraph_t capture_graph(cudaStream_t stream, const std::function<void(cudaStream_t)>& fn) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    fn(stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // ends the capture whatever fn left behind
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return graph;
}

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph, cudaGraphNodeType type) {
  std::size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  std::vector<cudaGraphNode_t> out;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    if (t == type) out.push_back(node);
  }
  return out;
}

int count_kernel_launches(const std::function<void(cudaStream_t)>& fn) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  try {
    graph = capture_graph(stream, fn);
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  cudaStreamDestroy(stream);
  const std::size_t kernels = graph_nodes(graph, cudaGraphNodeTypeKernel).size();
  CUDA_CHECK(cudaGraphDestroy(graph));
  return static_cast<int>(kernels);
}

}  // namespace study
