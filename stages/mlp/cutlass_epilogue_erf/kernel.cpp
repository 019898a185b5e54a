// cutlass_epilogue_erf: cutlass_epilogue with GELU in its exact erf form (timm's default, and the
// reference's) in fc1's epilogue instead of the tanh form: what exactness costs in time. Checked
// at fp16's tolerance, not the tanh form's.
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluErf, /*with_cublaslt=*/false, stream);
}

}  // namespace

extern const Version cutlass_epilogue_erf{
    {"cutlass_epilogue_erf", cutlass_supports, launch, study::cutlass_gemm::unavailable}};

}  // namespace mlp
