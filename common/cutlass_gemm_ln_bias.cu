// The CUTLASS GEMM layer's LayerNorm-folded kernels with the epilogue "ln_bias" (cutlass_gemm_kernels.cuh).
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& kernels_ln_bias() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = ln_kernels<Activation::None>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
