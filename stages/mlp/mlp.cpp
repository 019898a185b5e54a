#include "mlp/mlp.hpp"
#include "check.hpp"
#include "registry.hpp"

namespace mlp {

// Each version's kernel file defines its Version object.
extern const Version unfused, unfused_graph, fused_epilogue, handwritten_epilogue, gemm_only,
    pingpong_epilogue, pingpong_gemm_only;

const std::vector<Version>& versions() {
  static const std::vector<Version> all = {unfused, unfused_graph, fused_epilogue,
                                           handwritten_epilogue, gemm_only, pingpong_epilogue,
                                           pingpong_gemm_only};
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

}  // namespace mlp
