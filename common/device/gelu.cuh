// GELU in its exact form, x Phi(x) with Phi the standard normal CDF (timm's nn.GELU(), the CPU
// reference's), at about the cost of the tanh form. Phi(-a) for a = |x| is 2^q(a), q a degree-6
// polynomial fitted to log2 Phi(-a) on [0, 6] (least squares reweighted towards the smallest
// largest error of GELU itself), so GELU costs one ex2 on the MUFU pipe and ~12 FMA-pipe
// instructions where erff takes ~25. Why not the tanh form: its error (up to 4.7e-4 near
// x = -2.7) has one sign for a given x, and where the pre-activations sit in GELU's negative
// knee it is 100x fp16's rounding of the values there; with every parameter drawn, timm parity
// showed the tanh form's forward twice as far from timm's fp32 logits as timm's own fp16 one.
// |error| <= 9e-8 over all x with fp32 arithmetic and an exact exp2 (tests/test_common.cpp walks
// it on the host); ex2.approx adds at most 2 ulp of Phi(-a), below 1.2e-7 * |x| Phi(-|x|).
#pragma once
#include <cmath>

#ifndef __CUDACC__
#define STUDY_HOST_DEVICE
#else
#define STUDY_HOST_DEVICE __host__ __device__
#endif

namespace study {

STUDY_HOST_DEVICE inline float gelu_erf_fit(float x) {
  const float a = fminf(fabsf(x), 6.f);
  float q = 3.3094144e-05f;  // log2 Phi(-a), highest power first
  q = fmaf(q, a, -7.692315e-04f);
  q = fmaf(q, a, 8.080755e-03f);
  q = fmaf(q, a, -5.3412165e-02f);
  q = fmaf(q, a, -4.5877093e-01f);
  q = fmaf(q, a, -1.1512017f);
  q = fmaf(q, a, -9.999931e-01f);
#ifdef __CUDA_ARCH__
  float tail;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(tail) : "f"(q));
#else
  float tail = std::exp2(q);
#endif
  tail = a < 6.f ? tail : 0.f;  // Phi(-6) = 1e-9: GELU is x or 0 beyond, exactly
  return x * (x >= 0.f ? 1.f - tail : tail);
}

}  // namespace study
