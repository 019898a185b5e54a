// The FP8 GEMM layer (fp8.hpp) on cuBLASLt. The row-major problem maps onto column-major
// cuBLASLt as in gemm.cpp: A is W (op T), B is X (op N), D is Y; "TN" is also the only layout
// cuBLASLt's FP8 kernels accept. A's scale is the weight's (a scalar, or with per-channel
// scaling an "outer vector" of n floats, one per row of D in cuBLASLt's terms), B's the
// activation's; with an E4M3 output, D's scale multiplies the result before the conversion
// (the next GEMM's inverse activation scale).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include "gemm/fp8.hpp"
#include "gemm/gemm_search.hpp"
#include "harness/check.hpp"

namespace study {

bool Fp8Gemm::Key::operator<(const Key& o) const {
  return std::tie(m, n, k, epilogue, residual, fp8_out, scaling) <
         std::tie(o.m, o.n, o.k, o.epilogue, o.residual, o.fp8_out, o.scaling);
}

struct Fp8Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string choice;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    for (auto l : {d, c, b, a})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Fp8Gemm::Fp8Gemm(std::size_t workspace_bytes, int candidates)
    : workspace_(workspace_bytes), candidates_(std::max(1, candidates)) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Fp8Gemm::~Fp8Gemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

std::unique_ptr<Fp8Gemm::Plan> Fp8Gemm::make_plan(const Key& key) {
  auto plan = std::make_unique<Plan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* value, std::size_t size) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, attr, value, size));
  };
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = key.epilogue == Epilogue::GeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                 : key.epilogue == Epilogue::Bias   ? CUBLASLT_EPILOGUE_BIAS
                                                                    : CUBLASLT_EPILOGUE_DEFAULT;
  const cudaDataType_t bias_type = CUDA_R_16F;
  const int8_t fast_accumulation = 1;
  set(CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t);
  set(CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
  set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulation, sizeof fast_accumulation);
  if (key.scaling == fp8::Scaling::Channel) {
    const cublasLtMatmulMatrixScale_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof vec);
    set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec);
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, key.k, key.n, key.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, key.k, key.m, key.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_16F, key.n, key.m, key.n));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, key.fp8_out ? CUDA_R_8F_E4M3 : CUDA_R_16F, key.n, key.m, key.n));
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&plan->pref));
  const std::uint64_t ws = workspace_.bytes();
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                    sizeof ws));
  return plan;
}

// Per call: the bias, the scales and (E4M3 output) D's scale differ from layer to layer, while
// one plan serves every layer of a shape.
void Fp8Gemm::set_pointers(Plan& plan, const Fp8Operands& op) {
  auto set_ptr = [&](cublasLtMatmulDescAttributes_t attr, const void* p) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, attr, &p, sizeof p));
  };
  if (op.bias) set_ptr(CUBLASLT_MATMUL_DESC_BIAS_POINTER, op.bias);
  set_ptr(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, op.w->scale.get());
  const bool per_channel = op.w->scaling == fp8::Scaling::Channel;
  set_ptr(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, per_channel ? static_cast<const float*>(row_scale_.get()) : op.x_scale);
  if (op.y8) set_ptr(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, op.y_inv_scale);
}

bool Fp8Gemm::launch(Plan& plan, const cublasLtMatmulAlgo_t& algo, const Fp8Operands& op, cudaStream_t stream) {
  const float alpha = 1.f, beta = op.residual ? 1.f : 0.f;
  void* d = op.y8 ? static_cast<void*>(op.y8) : static_cast<void*>(op.y);
  // beta = 0 never reads C, so none is passed (D's pointer as C would declare an in-place
  // product, which needs C's type to be D's).
  const void* c = op.residual;
  return cublasLtMatmul(handle_, plan.desc, &alpha, op.w->q.get(), plan.a, op.x, plan.b, &beta, c, plan.c, d, plan.d,
                        &algo, workspace_.get(), workspace_.bytes(), stream) == CUBLAS_STATUS_SUCCESS;
}

std::string Fp8Gemm::describe(const Key& key) {
  return "cuBLASLt has no FP8 (E4M3) algorithm for Y[" + std::to_string(key.m) + "," + std::to_string(key.n) +
         "] = X[" + std::to_string(key.m) + "," + std::to_string(key.k) + "] W^T with epilogue " +
         epilogue_name(key.epilogue) + (key.residual ? " + residual" : "") + ", " + (key.fp8_out ? "E4M3" : "fp16") +
         " output, " + fp8::scaling_name(key.scaling) + " weight scales";
}

std::string Fp8Gemm::why_unsupported(const GemmShape& s, Epilogue e, bool fp8_out, fp8::Scaling scaling) {
  const Key key{s.m, s.n, s.k, e, false, fp8_out, scaling};
  const auto plan = make_plan(key);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->d,
                                                           plan->pref, 1, &result, &found);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) return {};
  return describe(key) + " (status " + std::to_string(static_cast<int>(st)) + ")";
}

void Fp8Gemm::choose_algorithm(Plan& plan, const Key& key, const Fp8Operands& op, cudaStream_t stream) {
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(candidates_));
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.d,
                                                           plan.pref, candidates_, results.data(), &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw StudyError(ErrorKind::Library, describe(key) + " (status " + std::to_string(static_cast<int>(st)) + ")");
  plan.algo = results[0].algo;
  plan.choice = "heuristic's first";
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone || found < 2 || (op.residual && op.residual == op.y)) return;
  float best = INFINITY;
  for (int i = 0; i < found; ++i) {
    const float t = median_launch_us([&] { return launch(plan, results[i].algo, op, stream); }, stream, 5);
    if (t < best) {
      best = t;
      plan.algo = results[i].algo;
      plan.choice = "heuristic's #" + std::to_string(i + 1) + ", fastest of " + std::to_string(found) + " timed";
    }
  }
}

void Fp8Gemm::run(const GemmShape& s, Epilogue e, const Fp8Operands& op, cudaStream_t stream) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) throw std::invalid_argument("fp8 gemm: sizes must be positive");
  if (s.n % 16 || s.k % 16) throw std::invalid_argument("fp8 gemm: n and k must be multiples of 16 (FP8 rows)");
  if (!op.x || !op.x_scale || !op.w || (!op.y == !op.y8))
    throw std::invalid_argument("fp8 gemm: x, its scale, w and exactly one of y and y8 are required");
  if ((e == Epilogue::None) != (op.bias == nullptr))
    throw std::invalid_argument(std::string("fp8 gemm: epilogue ") + epilogue_name(e) +
                                (op.bias ? " takes no bias" : " needs a bias"));
  if (op.y8 && (!op.y_inv_scale || op.residual))
    throw std::invalid_argument("fp8 gemm: an E4M3 output needs its scale and takes no residual");
  if (e == Epilogue::GeluBias && op.residual)
    throw std::invalid_argument("fp8 gemm: a residual cannot follow the GELU epilogue (cuBLASLt applies GELU to C too)");
  const Key key{s.m, s.n, s.k, e, op.residual != nullptr, op.y8 != nullptr, op.w->scaling};
  if (key.scaling == fp8::Scaling::Channel) {
    if (row_scale_.size() < static_cast<std::size_t>(s.m)) {  // a new plan's m: outside any capture
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
      if (capture != cudaStreamCaptureStatusNone)
        throw std::logic_error("fp8 gemm: a per-channel shape first seen during a capture");
      CUDA_CHECK(cudaStreamSynchronize(stream));  // the old vector may still be read
      row_scale_ = DeviceBuffer<float>(static_cast<std::size_t>(s.m));
    }
    fp8::broadcast(op.x_scale, row_scale_.get(), s.m, stream);
  }
  auto it = plans_.find(key);
  std::unique_ptr<Plan> fresh = it == plans_.end() ? make_plan(key) : nullptr;
  Plan& plan = fresh ? *fresh : *it->second;
  set_pointers(plan, op);
  if (fresh) {
    choose_algorithm(plan, key, op, stream);
    it = plans_.emplace(key, std::move(fresh)).first;
  }
  if (!launch(plan, plan.algo, op, stream))
    throw StudyError(ErrorKind::Library, "cuBLASLt refused an FP8 GEMM it had planned (" + std::to_string(s.m) + "x" +
                                             std::to_string(s.n) + "x" + std::to_string(s.k) + ")");
}

std::vector<std::string> Fp8Gemm::choices() const {
  std::vector<std::string> lines;
  for (const auto& [key, plan] : plans_)
    lines.push_back(std::to_string(key.m) + "x" + std::to_string(key.n) + "x" + std::to_string(key.k) + " fp8 " +
                    epilogue_name(key.epilogue) + (key.residual ? "+residual" : "") +
                    (key.fp8_out ? " e4m3-out" : " fp16-out") + " " + fp8::scaling_name(key.scaling) + ": " +
                    describe_algorithm(plan->algo) + " (" + plan->choice + ")");
  return lines;
}

}  // namespace study
