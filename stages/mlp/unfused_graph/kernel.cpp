// unfused_graph: unfused's exact sequence, captured once into a CUDA graph per set of
// pointers and shape, then replayed with one cudaGraphLaunch per call: the four launches'
// host overhead and inter-kernel gaps shrink to one graph launch.
#include <map>
#include <tuple>
#include "harness/check.hpp"
#include "mlp/unfused_sequence.hpp"

namespace mlp {
namespace {

// A graph bakes in every pointer and size it was captured with, including the GEMM layer's
// workspace, so all of them form the key.
using Key = std::tuple<const void*, const void*, const void*, const void*, const void*, const void*,
                       const void*, const void*, const void*, int, int, int>;

Key key_of(const Problem& p, const Args& a) {
  return {a.x, a.fc1_w, a.fc1_b, a.fc2_w, a.fc2_b, a.y, a.h, residual_of(a), a.gemm->workspace(),
          p.rows, p.hidden, p.mlp_hidden};
}

// Graph executables live as long as the process (one per shape and buffer set used).
std::map<Key, cudaGraphExec_t>& graphs() {
  static std::map<Key, cudaGraphExec_t> cache;
  return cache;
}

cudaGraphExec_t capture(const Problem& p, const Args& a) {
  // Captures on a private stream: the caller's may be the legacy default stream, which
  // cannot be captured.
  static cudaStream_t stream = [] {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    unfused_sequence(p, a, stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(e);
  return exec;
}

std::string supports(const Problem& p) { return check_common(p); }

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status == cudaStreamCaptureStatusActive) {
    // The caller is building its own graph (a whole-encoder graph, or the launch counter):
    // the kernels go straight into it rather than as a graph launched inside a capture.
    unfused_sequence(p, a, stream);
    return;
  }
  const Key key = key_of(p, a);
  auto it = graphs().find(key);
  if (it == graphs().end()) it = graphs().emplace(key, capture(p, a)).first;
  CUDA_CHECK(cudaGraphLaunch(it->second, stream));
}

}  // namespace

extern const Version unfused_graph{{"unfused_graph", supports, launch}};

}  // namespace mlp
