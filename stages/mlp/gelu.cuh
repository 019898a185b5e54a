// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as timm's nn.GELU() and the CPU reference: the one
// definition every kernel of this family uses (cuBLASLt's epilogue uses the tanh form instead).
#pragma once
#include <cuda_runtime.h>

namespace mlp {

__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}

// GELU's tanh form, 0.5 a (1 + tanh(k (a + 0.044715 a^3))), k = sqrt(2 / pi), the form
// cuBLASLt's GELU epilogue computes (fused_epilogue's NOTES.md: at most 4.73e-4 from the exact
// GELU, and the tolerance that follows). Written as a sigmoid, a / (1 + exp(-2 k u)), so it
// costs 6 instructions with no branch: 2 FMA-pipe ones, ex2 and rcp on the MUFU pipe (each
// accurate to a few ulp), for an epilogue that must fit beside a GEMM main loop.
__device__ __forceinline__ float gelu_tanh(float a) {
  constexpr float c = 2.f * 0.7978845608028654f * 1.4426950408889634f;  // 2 k log2(e)
  const float minus_u = -a * fmaf(0.044715f * c, a * a, c);              // -2 k log2(e) u
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(minus_u));
  return __fdividef(a, 1.f + e);  // exp2 overflow to inf gives -0 for very negative a
}

}  // namespace mlp
