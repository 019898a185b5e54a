// fp8_channel: fp8_tensor with one scale per output feature of each weight (cuBLASLt's
// "outer vector" scale of A), so a row of small weights keeps its resolution beside a row of
// large ones.
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

// cuBLASLt decides at run time whether it scales by outer vectors on this GPU: asked of its
// heuristic for fc1's combination (GELU, E4M3 output), the one the version cannot do without.
std::string unavailable() {
  if (auto why = study::fp8::unavailable(); !why.empty()) return why;
  study::Fp8Gemm probe(0, 1);
  return probe.why_unsupported({256, 256, 256}, study::Epilogue::GeluBias, true, study::fp8::Scaling::Channel);
}

std::string supports(const Problem& p) {
  if (auto why = fp8_supports(p); !why.empty()) return why;
  return unavailable();
}

}  // namespace

extern const Version fp8_channel{{"fp8_channel", supports, fp8_launch, unavailable},
                                 kFp8RelTol, true, true, study::fp8::Scaling::Channel};

}  // namespace mlp
