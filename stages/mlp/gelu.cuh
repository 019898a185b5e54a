// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as timm's nn.GELU() and the CPU reference: the one
// definition every kernel of this family uses (cuBLASLt's epilogue uses the tanh form instead).
#pragma once
#include <cuda_runtime.h>

namespace mlp {

__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}

// The same exact GELU for kernels where the GELU's instruction count matters (an epilogue that
// must fit beside a GEMM main loop): erf by Abramowitz & Stegun 7.1.26,
// erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z), z >= 0,
// odd-extended; absolute error <= 1.5e-7, plus a few ulp from the hardware reciprocal and
// exponential: far below fp16's half-ulp (2.4e-4 relative), so still the reference's GELU.
// About 14 instructions, no branch (erff: ~25 with a branch on |z| < 1), 2 of them on the
// MUFU pipe.
__device__ __forceinline__ float gelu_erf_fast(float x) {
  const float z = fabsf(x) * 0.70710678118654752f;
  const float t = __fdividef(1.f, fmaf(0.3275911f, z, 1.f));
  const float poly =
      t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 1.061405429f, -1.453152027f), 1.421413741f), -0.284496736f), 0.254829592f);
  const float erf_abs = 1.f - poly * __expf(-z * z);
  return 0.5f * x * (1.f + copysignf(erf_abs, x));
}

}  // namespace mlp
