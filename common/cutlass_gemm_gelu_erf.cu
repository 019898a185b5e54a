// The CUTLASS GEMM layer's kernels with the epilogue "gelu_erf" (cutlass_gemm_kernels.cuh).
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& kernels_gelu_erf() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = all_kernels<Activation::GeluErf, false>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
