// The CUTLASS GEMM layer's split kernels with the epilogue "bias" (cutlass_gemm_kernels.cuh).
#define STUDY_CUTLASS_SPLIT_TU
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& split_kernels_bias() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = split_kernels<Activation::None, false>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
