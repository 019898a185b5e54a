// The CUTLASS GEMM layer's kernels with the epilogue "bias + tanh GELU in fp16"
// (cutlass_gemm_kernels.cuh).
#include "cutlass_gemm_kernels.cuh"

namespace study::cutlass_gemm::detail {

const std::vector<KernelEntry>& kernels_gelu_tanh_f16() {
#ifdef STUDY_HAVE_CUTLASS
  static const std::vector<KernelEntry> kernels = fc1_kernels<Activation::GeluTanhF16>();
#else
  static const std::vector<KernelEntry> kernels;
#endif
  return kernels;
}

}  // namespace study::cutlass_gemm::detail
