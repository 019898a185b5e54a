// What every cuDNN-frontend version shares: one handle per process (never created when the
// loaded cuDNN is not the build's: see cudnn_unavailable()), and building a graph once
// (validate, heuristic plans, support check, build) with cuDNN's reason kept when it refuses.
// Included only by cuDNN versions, inside #ifdef STUDY_HAVE_CUDNN.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <cudnn_frontend.h>
#include "cudnn/cudnn_check.hpp"
#include "harness/buffer.hpp"

namespace study {

inline cudnnHandle_t cudnn_handle() {
  static cudnnHandle_t h = [] {
    if (const auto why = cudnn_unavailable(); !why.empty()) throw StudyError(ErrorKind::Library, why);
    cudnnHandle_t created;
    CUDNN_CHECK(cudnnCreate(&created));
    return created;
  }();
  return h;
}

// Empty and `workspace` sized on success; otherwise why cuDNN refuses the graph.
inline std::string build_cudnn_graph(cudnn_frontend::graph::Graph& g, DeviceBuffer<char>& workspace) {
  auto status = g.validate();
  if (status.is_good()) status = g.build_operation_graph(cudnn_handle());
  if (status.is_good()) status = g.create_execution_plans({cudnn_frontend::HeurMode_t::A});
  if (status.is_good()) status = g.check_support(cudnn_handle());
  if (status.is_good()) status = g.build_plans(cudnn_handle());
  if (status.is_bad()) return "cuDNN refuses this shape: " + status.get_message();
  int64_t bytes = 0;
  CUDNN_FE_CHECK(g.get_workspace_size(bytes));
  workspace = DeviceBuffer<char>(static_cast<size_t>(bytes));
  return {};
}

// What a cuDNN version caches per shape: the built graph and its workspace, or why cuDNN
// refused the shape. A family's plan adds the graph's tensors.
//
// Streams that may run one plan at the same time (the encoder's lanes) must not share its
// workspace: the first stream to execute the plan uses `workspace`, every other stream gets its
// own on first use. A stream first seen while it is being captured (a graph that only counts
// kernels, on a fresh stream) cannot allocate and shares `workspace`; the encoder runs every
// lane eagerly before it captures them, so its lanes never take that path.
struct CudnnPlan {
  cudnn_frontend::graph::Graph graph;
  DeviceBuffer<char> workspace;
  std::string error;  // non-empty: cuDNN refused this shape

  using Tensor = std::shared_ptr<cudnn_frontend::graph::Tensor_attributes>;
  // Binds each tensor to its device pointer and runs the graph on `stream`.
  void execute(std::unordered_map<Tensor, void*> pack, cudaStream_t stream) {
    CUDNN_CHECK(cudnnSetStream(cudnn_handle(), stream));
    CUDNN_FE_CHECK(graph.execute(cudnn_handle(), pack, workspace_for(stream)));
  }

 private:
  void* workspace_for(cudaStream_t stream) {
    if (workspace.bytes() == 0) return nullptr;
    if (!first_used) {
      first_used = true;
      first_stream = stream;
    }
    if (stream == first_stream) return workspace.get();
    auto it = per_stream.find(stream);
    if (it != per_stream.end()) return it->second.get();
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return workspace.get();
    return per_stream.emplace(stream, DeviceBuffer<char>(workspace.size())).first->second.get();
  }
  bool first_used = false;
  cudaStream_t first_stream = nullptr;
  std::map<cudaStream_t, DeviceBuffer<char>> per_stream;
};

// A cuDNN version's supports(): why the loaded cuDNN cannot serve, else the family's own check
// (`checked`, empty when the problem is well formed), else cuDNN's answer for the shape (`plan`,
// called only then: it builds the plan).
template <class PlanFor>
std::string cudnn_supports(const std::string& checked, PlanFor&& plan) {
  if (auto why = cudnn_unavailable(); !why.empty()) return why;
  if (!checked.empty()) return checked;
  return plan().error;
}

// The plan, built; StudyError(Library) with cuDNN's reason when it refused the shape.
template <class Plan>
Plan& usable(Plan& plan) {
  if (!plan.error.empty()) throw StudyError(ErrorKind::Library, plan.error);
  return plan;
}

// The one plan cache of the cuDNN versions: the plan of `key`, built on first use by `define`
// (which adds the family's tensors and operation to plan.graph, set up for fp16 storage and fp32
// math) and build_cudnn_graph; a refusal is cached too, with cuDNN's reason in plan.error.
template <class Plan, class Key, class Define>
Plan& cudnn_plan(const Key& key, Define&& define) {
  static std::map<Key, std::unique_ptr<Plan>> cache;
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<Plan>();
    slot->graph.set_io_data_type(cudnn_frontend::DataType_t::HALF)
        .set_intermediate_data_type(cudnn_frontend::DataType_t::FLOAT)
        .set_compute_data_type(cudnn_frontend::DataType_t::FLOAT);
    define(*slot);
    slot->error = build_cudnn_graph(slot->graph, slot->workspace);
  }
  return *slot;
}

}  // namespace study
