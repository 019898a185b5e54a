#include <map>
#include "gemm/cutlass_gemm.hpp"
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/test_hooks.hpp"
#include "mlp/mlp.hpp"

namespace mlp {

// The registry: every version of versions.def (common/harness/registry_versions.inc).
#define STUDY_VERSIONS_DEF "mlp/versions.def"
#define STUDY_FAMILY_NAME "mlp"
#include "harness/registry_versions.inc"

double bytes(const Problem& p) {
  const double activations = 2.0 * p.rows * p.hidden;                          // x in, y out
  const double weights = 2.0 * p.hidden * p.mlp_hidden + p.mlp_hidden + p.hidden;  // + biases
  return (activations + weights) * sizeof(__half);
}

double flops(const Problem& p) { return 2.0 * 2.0 * p.rows * p.hidden * p.mlp_hidden; }

std::string check_common(const Problem& p) {
  if (p.rows <= 0) return "rows must be positive";
  if (p.hidden <= 0) return "hidden must be positive";
  if (p.mlp_hidden <= 0) return "mlp_hidden must be positive";
  return {};
}

std::string cutlass_supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if (p.hidden % 8 || p.mlp_hidden % 8)
    return "hidden " + std::to_string(p.hidden) + " and mlp_hidden " + std::to_string(p.mlp_hidden) +
           " must be multiples of 8 (16-byte rows for TMA)";
  return study::cutlass_gemm::unavailable();
}

void cutlass_launch(const Problem& p, const Args& a, study::cutlass_gemm::Activation gelu, bool with_cublaslt,
                    cudaStream_t stream, bool small_m) {
  namespace cg = study::cutlass_gemm;
  cg::RunOptions opt;
  opt.pdl = a.pdl;
  opt.small_m = small_m;
  if (with_cublaslt) opt.cublaslt = a.gemm;
  cg::run({p.rows, p.mlp_hidden, p.hidden}, gelu, {a.x, a.fc1_w, a.h, a.fc1_b}, stream, opt);
  cg::run({p.rows, p.hidden, p.mlp_hidden}, cg::Activation::None, {a.h, a.fc2_w, a.y, a.fc2_b, residual_of(a)},
          stream, opt);
}

std::string fp8_supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if (p.hidden % 16 || p.mlp_hidden % 16)
    return "hidden " + std::to_string(p.hidden) + " and mlp_hidden " + std::to_string(p.mlp_hidden) +
           " must be multiples of 16 (16-byte FP8 rows)";
  return {};
}

namespace {

// Device constants of the FP8 MLP's planted bugs (test-hook builds), made on the first call,
// which is eager (a forward captures its graph after one), and kept.
const __half* planted_zeros(int n) {
  static std::map<int, study::DeviceBuffer<__half>> made;
  auto [it, fresh] = made.try_emplace(n, static_cast<std::size_t>(n));
  if (fresh) CUDA_CHECK(cudaMemset(it->second.get(), 0, it->second.bytes()));
  return it->second.get();
}
const float* planted_scale(float value) {
  static std::map<float, study::DeviceBuffer<float>> made;
  auto [it, fresh] = made.try_emplace(value, 1);
  if (fresh) CUDA_CHECK(cudaMemcpy(it->second.get(), &value, sizeof value, cudaMemcpyHostToDevice));
  return it->second.get();
}

// Both FP8 versions' launch; on_cutlass: each GEMM on the CUTLASS layer's FP8 kernels, searched
// per shape with a.fp8->gemm (cuBLASLt's FP8 GEMM) one more candidate; else on cuBLASLt alone.
void fp8_mlp(const Problem& p, const Args& a, cudaStream_t stream, bool on_cutlass) {
  if (!a.fp8)
    throw study::StudyError(study::ErrorKind::Usage,
                            "an FP8 MLP version needs quantized weights and calibrated scales (Args::fp8)");
  const Fp8Args& f = *a.fp8;
  if (!f.x_quantized)
    study::fp8::quantize(a.x, static_cast<long long>(p.rows) * p.hidden, f.x_scale->inv_scale(), f.x8, stream);
  auto* h8 = reinterpret_cast<study::fp8::e4m3*>(a.h);
  study::Fp8Operands fc1;
  fc1.x = f.x8;
  fc1.x_scale = f.x_scale->scale();
  fc1.w = f.fc1_w;
  fc1.bias = study::planted("fp8_fc1_bias_dropped") ? planted_zeros(p.mlp_hidden) : a.fc1_b;
  fc1.y8 = h8;
  fc1.y_inv_scale = f.h_scale->inv_scale();
  const auto gemm = [&](const study::GemmShape& s, study::Epilogue e, const study::Fp8Operands& op) {
    if (on_cutlass)
      study::cutlass_gemm::run_fp8(s, e, op, stream, {a.pdl, f.gemm});
    else
      f.gemm->run(s, e, op, stream);
  };
  gemm({p.rows, p.mlp_hidden, p.hidden}, study::Epilogue::GeluBias, fc1);
  study::Fp8Operands fc2;
  fc2.x = h8;
  fc2.x_scale = study::planted("fp8_scale_off") ? planted_scale(1.05f * f.h_scale->host_scale) : f.h_scale->scale();
  fc2.w = f.fc2_w;
  fc2.bias = a.fc2_b;
  fc2.residual = residual_of(a);
  fc2.y = a.y;
  gemm({p.rows, p.hidden, p.mlp_hidden}, study::Epilogue::Bias, fc2);
}

}  // namespace

void fp8_launch(const Problem& p, const Args& a, cudaStream_t stream) { fp8_mlp(p, a, stream, false); }

std::string fp8_cutlass_supports(const Problem& p) {
  if (auto r = fp8_supports(p); !r.empty()) return r;
  return study::cutlass_gemm::unavailable();
}

void fp8_cutlass_launch(const Problem& p, const Args& a, cudaStream_t stream) { fp8_mlp(p, a, stream, true); }

}  // namespace mlp
