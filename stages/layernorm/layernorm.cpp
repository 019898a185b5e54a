#include "layernorm/layernorm.hpp"
#include "check.hpp"
#include "registry.hpp"

namespace layernorm {

// Each version's kernel file defines its Version object; versions.def lists them.
#define STUDY_VERSION(name) extern const Version name;
#include "layernorm/versions.def"
#undef STUDY_VERSION

const std::vector<Version>& versions() {
#define STUDY_VERSION(name) name,
  static const std::vector<Version> all = {
#include "layernorm/versions.def"
  };
#undef STUDY_VERSION
  return all;
}

const Version& find_version(const std::string& name) {
  return study::find_by_name(versions(), name, "layernorm");
}

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
