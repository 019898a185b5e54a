#include "patch_embed/patch_embed.hpp"
#include <algorithm>
#include <limits>
#include "harness/check.hpp"
#include "harness/registry.hpp"

namespace patch_embed {

// The registry: every version of versions.def (common/harness/registry_versions.inc).
#define STUDY_VERSIONS_DEF "patch_embed/versions.def"
#define STUDY_FAMILY_NAME "patch_embed"
#include "harness/registry_versions.inc"

std::size_t scratch_bytes(const Problem& p) {
  std::size_t most = 0;
  for (const auto& v : versions())
    if (v.scratch) most = std::max(most, v.scratch(p));
  return most;
}

int patches_per_image(const Problem& p) { return (p.image_size / kPatch) * (p.image_size / kPatch); }
int tokens(const Problem& p) { return 1 + patches_per_image(p); }

double bytes(const Problem& p) {
  const double h = sizeof(__half);
  return h * (static_cast<double>(p.batch) * kChannels * p.image_size * p.image_size  // images
              + static_cast<double>(p.hidden) * kPatchElems + 2.0 * p.hidden          // weight, bias, cls
              + static_cast<double>(tokens(p)) * p.hidden                             // position embedding
              + static_cast<double>(p.batch) * tokens(p) * p.hidden);                 // token rows
}

double flops(const Problem& p) {
  return 2.0 * p.batch * patches_per_image(p) * p.hidden * kPatchElems;
}

double work(const Version& v, const Problem& p) {
  if (v.work) return v.work(p);
  return v.launch_count ? v.launch_count(p) : 0;
}

std::string check_common(const Problem& p, bool multi_stream) {
  if (p.batch <= 0) return "batch must be positive";
  if (p.hidden <= 0) return "hidden must be positive";
  if (p.image_size <= 0 || p.image_size % kPatch)
    return "image size " + std::to_string(p.image_size) + " is not a positive multiple of the patch size 16";
  if (p.streams < 1) return "streams must be positive";
  if (!multi_stream && p.streams != 1)
    return "runs on one stream (streams 1 only, got " + std::to_string(p.streams) + ")";
  // Element offsets inside a kernel stay in 64-bit arithmetic, but grid sizes and per-image
  // indices are 32-bit: keep every buffer below 2^31 elements.
  constexpr double kMax = static_cast<double>(std::numeric_limits<int>::max());
  if (static_cast<double>(p.batch) * kChannels * p.image_size * p.image_size > kMax ||
      static_cast<double>(p.batch) * tokens(p) * p.hidden > kMax ||
      static_cast<double>(p.batch) * patches_per_image(p) * kPatchElems > kMax)
    return "problem too large: a buffer would exceed 2^31 elements";
  return {};
}

Timeline::Timeline(std::size_t launches) : start(launches), end(launches), stream(launches, 0) {
  CUDA_CHECK(cudaEventCreate(&origin));
  for (std::size_t i = 0; i < launches; ++i) {
    CUDA_CHECK(cudaEventCreate(&start[i]));
    CUDA_CHECK(cudaEventCreate(&end[i]));
  }
}

Timeline::~Timeline() {
  for (auto e : start) cudaEventDestroy(e);
  for (auto e : end) cudaEventDestroy(e);
  if (origin) cudaEventDestroy(origin);
}

}  // namespace patch_embed
