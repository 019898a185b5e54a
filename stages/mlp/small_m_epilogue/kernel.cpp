// small_m_epilogue: erf_fit_epilogue with the CUTLASS layer's few-rows split-K kernels as more
// candidates of both GEMMs' searches (common/gemm/small_m.cu): at a few hundred rows a 256-row
// tile whose K is split over a thread-block cluster reads each weight once and fills the SMs,
// where the library kernels stream K = 768 or 3072 through a fraction of them. Where the search
// finds them slower (thousands of rows) the MLP is erf_fit_epilogue's. Checked at fp16's tolerance.
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluErfFit, /*with_cublaslt=*/true, stream, /*small_m=*/true);
}

}  // namespace

extern const Version small_m_epilogue{
    {"small_m_epilogue", cutlass_supports, launch, study::cutlass_gemm::unavailable}};

}  // namespace mlp
