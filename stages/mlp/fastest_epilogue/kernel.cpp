// fastest_epilogue: each GEMM on the faster of the CUTLASS layer's kernels and cuBLASLt's fused
// epilogue (fused_epilogue's), chosen per shape by the layer's search with cuBLASLt one more
// candidate (common/gemm/cutlass_gemm.hpp, RunOptions::cublaslt): fc1 with bias and tanh GELU, fc2
// with bias and the residual. Two launches, whichever library runs them.
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluTanh, /*with_cublaslt=*/true, stream);
}

}  // namespace

extern const Version fastest_epilogue{{"fastest_epilogue", cutlass_supports, launch, study::cutlass_gemm::unavailable},
                                      kTanhGeluRelTol};

}  // namespace mlp
