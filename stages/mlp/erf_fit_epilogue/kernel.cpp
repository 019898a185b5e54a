// erf_fit_epilogue: fastest_epilogue with fc1's GELU in its exact form, evaluated by a fitted exp2
// (common/device/gelu.cuh) at about the tanh form's cost, so the MLP computes what timm's
// nn.GELU() computes. fc1 runs on the CUTLASS kernels alone (cuBLASLt's GELU is the tanh form),
// fc2 (bias and the residual) on the faster of them and cuBLASLt's. Checked at fp16's tolerance.
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluErfFit, /*with_cublaslt=*/true, stream);
}

}  // namespace

extern const Version erf_fit_epilogue{
    {"erf_fit_epilogue", cutlass_supports, launch, study::cutlass_gemm::unavailable}};

}  // namespace mlp
