// The CUTLASS GEMM layer's split kernels with the epilogue "bias_residual" (cutlass_gemm_kernels.cuh).
#define STUDY_CUTLASS_SPLIT_TU
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& split_kernels_bias_residual() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = split_kernels<Activation::None, true>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
