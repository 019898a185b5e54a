// The problem's checks and counts; nothing here depends on a block runner.
#include "encoder/encoder.hpp"
#include "harness/check.hpp"

namespace encoder {

std::string check_problem(const Problem& p) {
  if (p.batch <= 0) return "batch must be positive";
  if (p.image_size <= 0 || p.image_size % study::kPatch)
    return "image size " + std::to_string(p.image_size) + " is not a positive multiple of the patch size 16";
  if (p.model.hidden <= 0 || p.model.heads <= 0 || p.model.layers <= 0) return "model sizes must be positive";
  if (p.model.hidden % p.model.heads) return "hidden is not a multiple of heads";
  if (p.num_classes <= 0) return "num_classes must be positive";
  if (p.rows() * 4 * p.model.hidden >= (1LL << 31))
    return "batch * tokens * 4 * hidden = " + std::to_string(p.rows() * 4 * p.model.hidden) +
           " elements overflows 32-bit indexing";
  return {};
}

double flops(const Problem& p) {
  const double T = p.tokens(), d = p.model.hidden;
  const double per_block = 24.0 * T * d * d + 4.0 * T * T * d;
  const double k = study::kChannels * study::kPatch * study::kPatch;
  return p.batch * (p.model.layers * per_block + 2.0 * (T - 1) * k * d + 2.0 * d * p.num_classes);
}

double weight_count(const Problem& p) {
  const double d = p.model.hidden, T = p.tokens();
  const double k = study::kChannels * study::kPatch * study::kPatch;
  const double block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
  return (k * d + d) + d + T * d + p.model.layers * block + 2 * d + (d * p.num_classes + p.num_classes);
}

double bytes(const Problem& p) {
  const double images = static_cast<double>(p.batch) * study::kChannels * p.image_size * p.image_size;
  return sizeof(__half) * (weight_count(p) + images + static_cast<double>(p.batch) * p.num_classes);
}

}  // namespace encoder
