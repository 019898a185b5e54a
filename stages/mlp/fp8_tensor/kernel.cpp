// fp8_tensor: both GEMMs in FP8 (E4M3) on cuBLASLt, one scale per weight tensor and static
// activation scales; x quantized by one kernel, fc1's bias + GELU epilogue writes h in E4M3 for
// fc2, fc2's bias + residual epilogue writes y in fp16. Three launches.
#include "mlp/mlp.hpp"

namespace mlp {

// What four E4M3 roundings (x, W1, h, W2) leave on y: stages/mlp/fp8_tensor/NOTES.md.
extern const Version fp8_tensor{{"fp8_tensor", fp8_supports, fp8_launch, study::fp8::unavailable},
                                kFp8RelTol, true, true, study::fp8::Scaling::Tensor};

}  // namespace mlp
