// The study's one GEMM layer over cuBLASLt, shared by QKV, projection, fc1 and fc2:
//   row-major Y[m, n] = X[m, k] W^T (+ bias[n]) (+ residual[m, n]),
// W in PyTorch Linear layout [n, k]; fp16 storage, fp32 accumulation and fp32 scale.
// The bias (and GELU) run in cuBLASLt's epilogue; the residual enters as its C operand with
// beta = 1. Descriptors and the heuristic's algorithm are built once per shape, epilogue and
// pointer alignment and cached; the workspace size is explicit.
//
// One instance owns one workspace: calls on different streams that may overlap need one
// instance per stream. Create it after selecting the device; it is not thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "harness/buffer.hpp"

namespace study {

enum class Epilogue { None, Bias, GeluBias };  // GeluBias: GELU(acc + bias), tanh form
const char* epilogue_name(Epilogue e);

struct GemmShape {
  int m = 0;  // rows of X and Y (tokens)
  int n = 0;  // output features: rows of W, columns of Y
  int k = 0;  // input features
};

struct GemmOperands {
  const __half* x = nullptr;         // [m, k]
  const __half* w = nullptr;         // [n, k]
  __half* y = nullptr;               // [m, n]
  const __half* bias = nullptr;      // [n]; required by Bias and GeluBias, refused by None
  const __half* residual = nullptr;  // [m, n] added to the product (beta = 1); may be null
};

struct GemmConfig {
  std::size_t workspace_bytes = std::size_t(4) << 20;  // cuBLAS's own default
  // Query the heuristic on every call instead of once per plan, to measure what caching saves.
  bool heuristic_every_call = false;
  // 0 or 1: take the heuristic's first algorithm. N > 1: time the heuristic's top N candidates
  // once when a plan is made (on the caller's operands) and keep the fastest.
  int autotune_candidates = 0;
  // Time every algorithm cuBLASLt will run for the shape (gemm_search.hpp: every algorithm id,
  // its heuristic configurations and its tile x stages grid, up to kSearchLimit of them) besides
  // the heuristic's top 64, once when a plan is made, and keep the fastest.
  bool search_all = false;
  static constexpr int kSearchLimit = 4096;
};

class Gemm {
 public:
  explicit Gemm(const GemmConfig& config = {});
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues the GEMM on `stream`: no host sync, so it can be captured into a CUDA graph (the
  // heuristic query is host work). Throws StudyError(Library) when cuBLASLt has no algorithm
  // for the shape, epilogue and alignment.
  void run(const GemmShape& s, Epilogue e, const GemmOperands& op, cudaStream_t stream);

  const GemmConfig& config() const { return config_; }
  // Captured graphs bake this address in, so graph caches key on it.
  const void* workspace() const { return workspace_.get(); }
  std::size_t workspace_bytes() const { return workspace_.bytes(); }
  std::size_t plan_count() const { return plans_.size(); }
  long long heuristic_queries() const { return heuristic_queries_; }
  // One line per plan: its shape and epilogue, the algorithm chosen (gemm_search.hpp's
  // describe_algorithm) and how: the heuristic's first, or the fastest of N timed candidates.
  std::vector<std::string> choices() const;

 private:
  struct Key {
    int m, n, k;
    Epilogue epilogue;
    bool residual;
    // Largest power of two (<= 256) dividing each pointer (bias: 0 when none): the
    // heuristic picks only algorithms that accept these alignments.
    std::uint32_t align_x, align_w, align_c, align_y, align_bias;
    bool operator<(const Key& o) const;
  };
  struct Plan;
  std::unique_ptr<Plan> make_plan(const Key& key);  // descriptors and preferences
  void choose_algorithm(Plan& plan, const Key& key, const GemmOperands& op, cudaStream_t stream);
  // Median time of `reps` runs of one algorithm, microseconds (plan-time autotuning only).
  // Infinity when cuBLASLt refuses to run it.
  float time_algorithm(Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmOperands& op,
                       cudaStream_t stream, int reps);

  GemmConfig config_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<char> workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  long long heuristic_queries_ = 0;
};

}  // namespace study
