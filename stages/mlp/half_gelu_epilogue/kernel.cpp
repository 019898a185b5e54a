// half_gelu_epilogue: fastest_epilogue with fc1's bias add and tanh GELU computed in fp16 pairs
// on the CUTLASS kernels (common/gemm/cutlass_gemm.hpp, Activation::GeluTanhF16: one
// tanh.approx.f16x2 per two outputs), cuBLASLt's fused epilogue still a candidate of each GEMM's
// search; fc2 with bias and the residual as in fastest_epilogue. Two launches.
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluTanhF16, /*with_cublaslt=*/true, stream);
}

}  // namespace

// The tanh form's tolerance: the fp16 epilogue adds ~3 fp16 roundings per output of fc1 (bias
// add, GELU's products, tanh.approx.f16), each 2^-11 relative, well inside its 2e-3 margin.
extern const Version half_gelu_epilogue{
    {"half_gelu_epilogue", cutlass_supports, launch, study::cutlass_gemm::unavailable}, kTanhGeluRelTol};

}  // namespace mlp
