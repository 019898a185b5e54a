// The CUTLASS GEMM layer's LayerNorm-folded kernels with the epilogue "ln_gelu_tanh" (cutlass_gemm_kernels.cuh).
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& kernels_ln_gelu_tanh() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = ln_kernels<Activation::GeluTanh>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
