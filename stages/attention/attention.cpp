#include "attention/attention.hpp"
#include <cstdint>
#include "harness/check.hpp"
#include "harness/registry.hpp"

namespace attention {

// The registry: every version of versions.def (common/harness/registry_versions.inc).
#define STUDY_VERSIONS_DEF "attention/versions.def"
#define STUDY_FAMILY_NAME "attention"
#include "harness/registry_versions.inc"

double bytes(const Problem& p) {
  const double rows = static_cast<double>(p.batch) * p.tokens;
  return (3.0 + 1.0) * rows * p.heads * p.head_dim * sizeof(__half);
}

double flops(const Problem& p) {
  return 4.0 * p.batch * p.heads * static_cast<double>(p.tokens) * p.tokens * p.head_dim;
}

std::string check_common(const Problem& p) {
  if (p.batch <= 0) return "batch must be positive";
  if (p.tokens <= 0) return "tokens must be positive";
  if (p.heads <= 0) return "heads must be positive";
  if (p.head_dim <= 0) return "head_dim must be positive";
  const double elements = 3.0 * p.batch * p.tokens * p.heads * p.head_dim;
  if (elements > static_cast<double>(INT32_MAX))
    return "the packed QKV buffer has more than 2^31 elements: kernels index it with 32 bits";
  return {};
}

std::string check_tiled(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if (p.head_dim != 64)
    return "head_dim " + std::to_string(p.head_dim) + " is not supported: tiles are compiled for 64";
  if (p.batch > 65535 || p.heads > 65535) return "batch and heads must be at most 65535 (grid z and y)";
  return {};
}

void require_aligned(const void* qkv, const void* out, unsigned bytes, const char* version) {
  const auto misaligned = [bytes](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % bytes; };
  if (misaligned(qkv) || misaligned(out))
    throw study::StudyError(study::ErrorKind::Usage, std::string(version) + ": qkv and out must be " +
                                                         std::to_string(bytes) + "-byte aligned");
}

}  // namespace attention
