// pingpong_gemm_only: fc1's and fc2's GEMMs alone on the ping-pong kernel, no bias, GELU or
// residual. Not an MLP: the timing reference of pingpong_epilogue, as gemm_only is of the
// cuBLASLt versions.
#include "mlp/mlp.hpp"
#include "mlp/pingpong_gemm.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  pingpong_gemm(p.rows, p.mlp_hidden, p.hidden, PingpongEpilogue::None, a.x, a.fc1_w, a.h, nullptr, nullptr,
                stream);
  pingpong_gemm(p.rows, p.hidden, p.mlp_hidden, PingpongEpilogue::None, a.h, a.fc2_w, a.y, nullptr, nullptr,
                stream);
}

}  // namespace

extern const Version pingpong_gemm_only{{"pingpong_gemm_only", pingpong_supports_mlp, launch, pingpong_unavailable},
                                        study::kFp16RelTol, false};

}  // namespace mlp
