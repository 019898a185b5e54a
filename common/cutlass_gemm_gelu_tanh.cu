// The CUTLASS GEMM layer's kernels with the epilogue "gelu_tanh" (cutlass_gemm_kernels.cuh).
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& kernels_gelu_tanh() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = all_kernels<Activation::GeluTanh, false>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
