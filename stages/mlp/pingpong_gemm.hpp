// The MLP family's own Hopper GEMM, row-major Y[m, n] = X[m, k] W^T (PyTorch Linear layout W
// [n, k]) with its epilogue fused and overlapped with the main loop: a warp-specialized,
// persistent ping-pong kernel (one producer warpgroup streaming X and W tiles by TMA, two
// consumer warpgroups taking output tiles in turn, so one runs its epilogue while the other
// runs its wgmma main loop). fp16 storage, fp32 accumulation. Needs sm_90a.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include "mlp/mlp.hpp"

namespace mlp {

enum class PingpongEpilogue {
  None,          // Y = X W^T
  BiasGelu,      // Y = GELU(X W^T + b), GELU's tanh form (gelu.cuh gelu_tanh), as cuBLASLt's
  BiasResidual,  // Y = X W^T + b + R
};

// Why this build or GPU cannot run the GEMM at all (no sm_90a build, not Hopper); empty if it can.
std::string pingpong_unavailable();

// Empty when the GEMM runs here for this shape; otherwise why not (no sm_90a build or GPU,
// sizes not positive, or k and n not multiples of 8: TMA needs 16-byte row strides).
std::string pingpong_supports(int m, int n, int k);

// Enqueues the GEMM on `stream`. bias: [n] (BiasGelu, BiasResidual); residual: [m, n]
// (BiasResidual), never the same buffer as y. Pointers 16-byte aligned. Throws
// StudyError(Usage) when pingpong_supports refuses.
// Both MLP GEMMs of `p` on this kernel (fc1: rows x mlp_hidden x hidden, fc2: rows x hidden x
// mlp_hidden), plus the family's own checks: the supports() of the ping-pong versions.
std::string pingpong_supports_mlp(const Problem& p);

void pingpong_gemm(int m, int n, int k, PingpongEpilogue e, const __half* x, const __half* w, __half* y,
                   const __half* bias, const __half* residual, cudaStream_t stream);

}  // namespace mlp
