// fused_epilogue: bias and GELU run inside fc1's GEMM (cuBLASLt GELU_BIAS epilogue), bias and
// residual inside fc2's (BIAS epilogue, residual as the C operand with beta = 1): two
// launches, and h and y are each written once and never re-read by a pointwise pass.
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

std::string supports(const Problem& p) { return check_common(p); }

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  a.gemm->run({p.rows, p.mlp_hidden, p.hidden}, study::Epilogue::GeluBias,
              {a.x, a.fc1_w, a.h, a.fc1_b}, stream);
  a.gemm->run({p.rows, p.hidden, p.mlp_hidden}, study::Epilogue::Bias,
              {a.h, a.fc2_w, a.y, a.fc2_b, residual_of(a)}, stream);
}

}  // namespace

extern const Version fused_epilogue{{"fused_epilogue", supports, launch}, kTanhGeluRelTol};

}  // namespace mlp
