// pingpong_epilogue: both GEMMs on the family's own Hopper ping-pong kernel (pingpong_gemm.hpp)
// with the epilogues fused and overlapped with the next tile's main loop: fc1 with bias and
// GELU (tanh form, as cuBLASLt's epilogue), fc2 with bias and the residual. Two launches, no
// cuBLASLt.
#include "mlp/mlp.hpp"
#include "mlp/pingpong_gemm.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  pingpong_gemm(p.rows, p.mlp_hidden, p.hidden, PingpongEpilogue::BiasGelu, a.x, a.fc1_w, a.h, a.fc1_b, nullptr,
                stream);
  pingpong_gemm(p.rows, p.hidden, p.mlp_hidden, PingpongEpilogue::BiasResidual, a.h, a.fc2_w, a.y, a.fc2_b,
                residual_of(a), stream);
}

}  // namespace

extern const Version pingpong_epilogue{{"pingpong_epilogue", pingpong_supports_mlp, launch, pingpong_unavailable},
                                       kTanhGeluRelTol};

}  // namespace mlp
