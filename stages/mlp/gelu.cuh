// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as timm's nn.GELU() and the CPU reference: the one
// definition every kernel of this family uses (cuBLASLt's epilogue uses the tanh form instead).
#pragma once
#include <cuda_runtime.h>

namespace mlp {

__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}

}  // namespace mlp
