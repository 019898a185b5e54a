#include "gemm/gemm.hpp"
#include <algorithm>
#include <cmath>
#include <vector>
#include <stdexcept>
#include <tuple>
#include "gemm/gemm_search.hpp"
#include "harness/check.hpp"

// Mapping the row-major problem onto column-major cuBLASLt without any transpose:
// a row-major [r, c] matrix (row stride c) is, byte for byte, a column-major c x r matrix
// with leading dimension c. So
//   Y[m, n] row-major  = column-major Y^T, n x m, ld n   -> D (and C): rows n, cols m, ld n
//   X[m, k] row-major  = column-major X^T, k x m, ld k   -> B: rows k, cols m, ld k, op N
//   W[n, k] row-major  = column-major W^T, k x n, ld k   -> A: rows k, cols n, ld k, op T
// and cuBLASLt computes D = op(A) op(B) = W X^T = (X W^T)^T = Y^T with its m = n, n = m,
// k = k. Its bias epilogue adds bias[i] to row i of D, i.e. to output feature i of every
// token, which is exactly Linear's bias. "TN" (A transposed, B not) is also the layout
// cuBLASLt's fp16 tensor-core kernels prefer. The residual is C with C's layout equal to D's.

namespace study {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::None: return "none";
    case Epilogue::Bias: return "bias";
    case Epilogue::GeluBias: return "gelu_bias";
  }
  return "?";
}

namespace {

std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align) align >>= 1;
  return align;
}

cublasLtEpilogue_t to_cublas(Epilogue e) {
  switch (e) {
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

}  // namespace

bool Gemm::Key::operator<(const Key& o) const {
  return std::tie(m, n, k, epilogue, residual, align_x, align_w, align_c, align_y, align_bias) <
         std::tie(o.m, o.n, o.k, o.epilogue, o.residual, o.align_x, o.align_w, o.align_c, o.align_y,
                  o.align_bias);
}

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, cd = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string choice;  // how algo was chosen, for choices()
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (cd) cublasLtMatrixLayoutDestroy(cd);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::Gemm(const GemmConfig& config) : config_(config), workspace_(config.workspace_bytes) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

std::unique_ptr<Gemm::Plan> Gemm::make_plan(const Key& key) {
  auto plan = std::make_unique<Plan>();  // owns each descriptor as soon as it exists
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = to_cublas(key.epilogue);
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* value, std::size_t size) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, attr, value, size));
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t);
  set(CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16F, key.k, key.n, key.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16F, key.k, key.m, key.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->cd, CUDA_R_16F, key.n, key.m, key.n));

  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&plan->pref));
  const std::uint64_t ws = workspace_.bytes();
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
  // A is W, B is X, C is the residual (or Y when there is none), D is Y.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
  for (const auto& [attr, value] : aligns)
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(plan->pref, attr, &value, sizeof value));
  return plan;
}

void Gemm::choose_algorithm(Plan& plan, const Key& key, const GemmOperands& op, cudaStream_t stream) {
  const int wanted = config_.search_all ? 64 : std::max(1, config_.autotune_candidates);
  std::vector<cublasLtMatmulHeuristicResult_t> results(wanted);
  int found = 0;
  ++heuristic_queries_;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.cd,
                                                           plan.cd, plan.pref, wanted, results.data(), &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0))
    throw StudyError(ErrorKind::Library,
                     "cuBLASLt heuristic found no algorithm for Y[" + std::to_string(key.m) + "," +
                         std::to_string(key.n) + "] = X[" + std::to_string(key.m) + "," +
                         std::to_string(key.k) + "] W^T, epilogue " + epilogue_name(key.epilogue) +
                         (key.residual ? " + residual" : "") + ", pointer alignment x/w/c/y/bias " +
                         std::to_string(key.align_x) + "/" + std::to_string(key.align_w) + "/" +
                         std::to_string(key.align_c) + "/" + std::to_string(key.align_y) + "/" +
                         std::to_string(key.align_bias) +
                         " bytes, workspace " + std::to_string(workspace_.bytes()) + " bytes");
  CUBLAS_CHECK(st);
  plan.algo = results[0].algo;
  plan.choice = "heuristic's first";
  // Timing needs a stream that is not being captured, and a residual that is not the output
  // (repeated runs would otherwise accumulate into it).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone || op.residual == op.y) return;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  for (int i = 0; i < found; ++i) candidates.push_back(results[i].algo);
  if (config_.search_all) {
    const MatmulDescriptors d{plan.desc, plan.a, plan.b, plan.cd, plan.pref};
    for (const auto& algo : every_algorithm(handle_, d, workspace_.bytes(), GemmConfig::kSearchLimit))
      if (std::none_of(candidates.begin(), candidates.end(),
                       [&](const cublasLtMatmulAlgo_t& c) { return same_algorithm(c, algo); }))
        candidates.push_back(algo);
  }
  if (candidates.size() < 2) return;
  // One run each sorts out the slow majority; the few best are then timed 5 times (median).
  constexpr std::size_t kFinalists = 8;
  std::vector<std::pair<float, std::size_t>> screened;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const float t = time_algorithm(plan, candidates[i], op, stream, 1);
    if (std::isfinite(t)) screened.emplace_back(t, i);
  }
  std::sort(screened.begin(), screened.end());
  screened.resize(std::min(screened.size(), kFinalists));
  float best = INFINITY;
  for (const auto& [screen_us, i] : screened) {
    const float t = time_algorithm(plan, candidates[i], op, stream, 5);
    if (t < best) {
      best = t;
      plan.algo = candidates[i];
      plan.choice = (i < static_cast<std::size_t>(found) ? "heuristic's #" + std::to_string(i + 1)
                                                         : std::string("enumerated")) +
                    ", fastest of " + std::to_string(candidates.size()) + " timed (" +
                    std::to_string(found) + " from the heuristic)";
    }
  }
}

float Gemm::time_algorithm(Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmOperands& op,
                           cudaStream_t stream, int reps) {
  const float alpha = 1.f, beta = op.residual ? 1.f : 0.f;
  const __half* c = op.residual ? op.residual : op.y;
  return median_launch_us(
      [&] {
        return cublasLtMatmul(handle_, plan.desc, &alpha, op.w, plan.a, op.x, plan.b, &beta, c, plan.cd, op.y,
                              plan.cd, &algo, workspace_.get(), workspace_.bytes(), stream) == CUBLAS_STATUS_SUCCESS;
      },
      stream, reps);
}

std::vector<std::string> Gemm::choices() const {
  std::vector<std::string> lines;
  for (const auto& [key, plan] : plans_)
    lines.push_back(std::to_string(key.m) + "x" + std::to_string(key.n) + "x" + std::to_string(key.k) + " " +
                    epilogue_name(key.epilogue) + (key.residual ? "+residual" : "") + ": " +
                    describe_algorithm(plan->algo) + " (" + plan->choice + ")");
  return lines;
}

void Gemm::run(const GemmShape& s, Epilogue e, const GemmOperands& op, cudaStream_t stream) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0)
    throw std::invalid_argument("gemm: sizes must be positive");
  if (!op.x || !op.w || !op.y) throw std::invalid_argument("gemm: x, w and y are required");
  if ((e == Epilogue::None) != (op.bias == nullptr))
    throw std::invalid_argument(std::string("gemm: epilogue ") + epilogue_name(e) +
                                (op.bias ? " takes no bias" : " needs a bias"));
  // cuBLASLt applies the GELU after adding C, so a residual would pass through the GELU too.
  if (e == Epilogue::GeluBias && op.residual)
    throw std::invalid_argument("gemm: a residual cannot follow the GELU epilogue (cuBLASLt applies GELU to C too)");
  const __half* c = op.residual ? op.residual : op.y;  // beta = 0 never reads C
  const Key key{s.m, s.n, s.k, e, op.residual != nullptr, alignment(op.x), alignment(op.w),
                alignment(c), alignment(op.y), op.bias ? alignment(op.bias) : 0u};
  auto it = plans_.find(key);
  std::unique_ptr<Plan> fresh = it == plans_.end() ? make_plan(key) : nullptr;
  Plan& plan = fresh ? *fresh : *it->second;
  // The bias pointer is per call (one plan serves every layer of that shape); it is set before
  // the heuristic runs because the heuristic reads its alignment from it.
  if (op.bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &op.bias,
                                                sizeof op.bias));
  if (fresh || config_.heuristic_every_call) choose_algorithm(plan, key, op, stream);
  if (fresh) plans_.emplace(key, std::move(fresh));  // only plans with an algorithm are cached
  const float alpha = 1.f, beta = op.residual ? 1.f : 0.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, op.w, plan.a, op.x, plan.b, &beta, c, plan.cd,
                              op.y, plan.cd, &plan.algo, workspace_.get(), workspace_.bytes(), stream));
}

}  // namespace study
