// fp8_cutlass: fp8_tensor's two FP8 GEMMs (x quantized unless the caller's LayerNorm wrote it in
// E4M3, fc1 + bias + GELU to E4M3 in h's scale, fc2 + bias + residual to fp16) on the CUTLASS
// layer's E4M3 Hopper kernels, each GEMM's kernel searched per shape with cuBLASLt's FP8 GEMM one
// more candidate: the faster library per shape (NOTES.md).
#include "gemm/cutlass_gemm.hpp"
#include "mlp/mlp.hpp"

namespace mlp {

namespace {
std::string unavailable() {
  if (auto why = study::fp8::unavailable(); !why.empty()) return why;
  return study::cutlass_gemm::unavailable();
}
}  // namespace

// fp8_tensor's arithmetic (the same four E4M3 roundings): its tolerance.
extern const Version fp8_cutlass{{"fp8_cutlass", fp8_cutlass_supports, fp8_cutlass_launch, unavailable},
                                 kFp8RelTol, true, true, study::fp8::Scaling::Tensor};

}  // namespace mlp
