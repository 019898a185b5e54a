// The CUTLASS GEMM layer's kernels with the epilogue "bias" (cutlass_gemm_kernels.cuh).
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& kernels_bias() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = all_kernels<Activation::None, false>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
