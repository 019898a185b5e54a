#include "mlp/mlp.hpp"
#include "check.hpp"
#include "cutlass_gemm.hpp"
#include "registry.hpp"

namespace mlp {

// Each version's kernel file defines its Version object.
extern const Version unfused, unfused_graph, fused_epilogue, handwritten_epilogue, gemm_only,
    pingpong_epilogue, pingpong_gemm_only, cutlass_epilogue, cutlass_epilogue_erf, fastest_epilogue,
    split_epilogue,
    half_gelu_epilogue;

const std::vector<Version>& versions() {
  static const std::vector<Version> all = {unfused, unfused_graph, fused_epilogue,
                                           handwritten_epilogue, gemm_only, pingpong_epilogue,
                                           pingpong_gemm_only, cutlass_epilogue, cutlass_epilogue_erf,
                                           fastest_epilogue, split_epilogue, half_gelu_epilogue};
  return all;
}

const Version& find_version(const std::string& name) {
  return study::find_by_name(versions(), name, "mlp");
}

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
                    cudaStream_t stream, bool with_split) {
  namespace cg = study::cutlass_gemm;
  cg::RunOptions opt;
  opt.pdl = a.pdl;
  if (with_cublaslt) opt.cublaslt = a.gemm;
  if (with_split) {
    opt.workspace = a.gemm->lend_workspace();
    opt.workspace_bytes = a.gemm->workspace_bytes();
  }
  cg::run({p.rows, p.mlp_hidden, p.hidden}, gelu, {a.x, a.fc1_w, a.h, a.fc1_b}, stream, opt);
  cg::run({p.rows, p.hidden, p.mlp_hidden}, cg::Activation::None, {a.h, a.fc2_w, a.y, a.fc2_b, residual_of(a)},
          stream, opt);
}

}  // namespace mlp
