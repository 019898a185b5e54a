#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "layernorm/layernorm.hpp"

namespace layernorm {

// The registry: every version of versions.def (common/harness/registry_versions.inc).
#define STUDY_VERSIONS_DEF "layernorm/versions.def"
#define STUDY_FAMILY_NAME "layernorm"
#include "harness/registry_versions.inc"

// v5_unrolled, the LayerNorm of e14_l2_prefetch, is the one version that carries it: v1-v4 are
// their kernels as measured, and cuDNN launches its own kernels.
bool carries_prefetch(const Version& v) { return std::string(v.name) == v5_unrolled.name; }

double bytes(const Problem& p) {
  return 2.0 * p.rows * p.hidden * sizeof(__half) + 2.0 * p.hidden * sizeof(__half);
}

double flops(const Problem& p) { return 8.0 * p.rows * p.hidden; }

std::string check_common(const Problem& p) {
  if (p.rows <= 0) return "rows must be positive";
  if (p.hidden <= 0) return "hidden must be positive";
  return {};
}

}  // namespace layernorm
