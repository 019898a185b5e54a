// cutlass_epilogue: both GEMMs on the CUTLASS GEMM layer (common/gemm/cutlass_gemm.hpp: Hopper
// warp-specialized persistent kernels; the kernel, raster order and swizzle searched per shape
// and cached on disk): fc1 with bias and GELU in its tanh form (as fused_epilogue's cuBLASLt
// epilogue) in the epilogue, fc2 with bias and the residual (C with beta = 1). Two launches.
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluTanh, /*with_cublaslt=*/false, stream);
}

}  // namespace

extern const Version cutlass_epilogue{{"cutlass_epilogue", cutlass_supports, launch, study::cutlass_gemm::unavailable},
                                      kTanhGeluRelTol};

}  // namespace mlp
