// gemm_only: fc1's and fc2's GEMMs alone, no bias, GELU or residual. Not an MLP: a timing
// reference for what the epilogues cost on top of the two GEMMs.
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

std::string supports(const Problem& p) { return check_common(p); }

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  a.gemm->run({p.rows, p.mlp_hidden, p.hidden}, study::Epilogue::None, {a.x, a.fc1_w, a.h}, stream);
  a.gemm->run({p.rows, p.hidden, p.mlp_hidden}, study::Epilogue::None, {a.h, a.fc2_w, a.y}, stream);
}

}  // namespace

extern const Version gemm_only{{"gemm_only", supports, launch}, study::kFp16RelTol, false};

}  // namespace mlp
