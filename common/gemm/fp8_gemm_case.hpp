// The FP8 GEMM tests' shared case (test_fp8_gemm.cpp: cuBLASLt; test_cutlass_gemm.cpp: CUTLASS):
// one GEMM on fresh inputs against the host's product of the very E4M3 values the GPU multiplied,
// so that a GEMM's error is its accumulation and output rounding alone; and the helpers of both.
#pragma once
#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>
#include "gemm/fp8.hpp"
#include "harness/check.hpp"
#include "harness/compare.hpp"
#include "harness/gpu.hpp"
#include "harness/random.hpp"

namespace fp8_test {

namespace f8 = study::fp8;
using study::Epilogue;

// E4M3 rounds to nearest with 3 mantissa bits: within 2^-4 of a normal value; below 2^-6 the
// spacing is the subnormal step 2^-9, so within 2^-10 (times the scale).
inline bool within_rounding(float got, float want, float scale) {
  return std::fabs(got - want) <= std::ldexp(std::fabs(want), -4) + std::ldexp(scale, -10) * 1.0001f;
}

inline std::vector<float> rounded_normal(std::size_t n, std::uint64_t seed, float stddev) {
  auto v = study::random_normal(n, seed, 0.f, stddev);
  study::round_to_half(v);
  return v;
}

template <class T>
std::vector<T> host(const study::DeviceBuffer<T>& d) {
  std::vector<T> h(d.size());
  CUDA_CHECK(cudaMemcpy(h.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return h;
}

inline std::vector<float> dequantize(const std::vector<f8::e4m3>& q, int rows, int cols, const std::vector<float>& scale) {
  std::vector<float> out(q.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      out[i] = f8::to_float(q[i]) * scale[scale.size() == 1 ? 0 : r];
    }
  return out;
}

inline double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

inline float host_amax(const std::vector<float>& v) {
  float m = 0.f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

struct GemmCase {
  study::GemmShape s;
  Epilogue e;
  bool residual, fp8_out;
  f8::Scaling scaling;
};

// Runs one FP8 GEMM (`run`: a layer's call) on fresh inputs and compares it with the host's product.
using Fp8Run = std::function<void(const study::GemmShape&, Epilogue, const study::Fp8Operands&)>;
inline void check_gemm(const Fp8Run& run, const GemmCase& c) {
  const auto seed = study::fresh_seed();
  CAPTURE(seed);
  CAPTURE(c.s.m);
  CAPTURE(c.s.n);
  CAPTURE(c.s.k);
  CAPTURE(study::epilogue_name(c.e));
  CAPTURE(c.residual);
  CAPTURE(c.fp8_out);
  CAPTURE(f8::scaling_name(c.scaling));
  const std::size_t mk = static_cast<std::size_t>(c.s.m) * c.s.k, nk = static_cast<std::size_t>(c.s.n) * c.s.k,
                    mn = static_cast<std::size_t>(c.s.m) * c.s.n;
  const auto x = rounded_normal(mk, seed, 1.f);
  auto w = rounded_normal(nk, seed + 1, 1.f / std::sqrt(static_cast<float>(c.s.k)));
  for (int col = 0; col < c.s.k; ++col) w[static_cast<std::size_t>(3 % c.s.n) * c.s.k + col] *= 20.f;  // a large row
  study::round_to_half(w);
  const auto bias = rounded_normal(c.s.n, seed + 2, 0.5f), res = rounded_normal(mn, seed + 3, 1.f);
  const auto dx = study::to_device(study::to_half(x)), dw = study::to_device(study::to_half(w)),
             db = study::to_device(study::to_half(bias)), dr = study::to_device(study::to_half(res));
  const f8::ActivationScale xs(host_amax(x), 1.f);
  study::DeviceBuffer<f8::e4m3> x8(mk);
  f8::quantize(dx.get(), static_cast<long long>(mk), xs.inv_scale(), x8.get(), nullptr);
  const f8::Weight w8 = f8::quantize_weight(dw.get(), c.s.n, c.s.k, c.scaling, nullptr);
  // The reference multiplies exactly what the GPU multiplies.
  const auto xq = dequantize(host(x8), 1, static_cast<int>(mk), {xs.host_scale});
  const auto wq = dequantize(host(w8.q), c.s.n, c.s.k, host(w8.scale));
  std::vector<float> want(mn);
  for (int i = 0; i < c.s.m; ++i)
    for (int j = 0; j < c.s.n; ++j) {
      double acc = c.e == Epilogue::None ? 0.0 : bias[j];
      for (int k = 0; k < c.s.k; ++k)
        acc += static_cast<double>(xq[static_cast<std::size_t>(i) * c.s.k + k]) * wq[static_cast<std::size_t>(j) * c.s.k + k];
      if (c.e == Epilogue::GeluBias) acc = gelu_tanh(acc);
      if (c.residual) acc += res[static_cast<std::size_t>(i) * c.s.n + j];
      want[static_cast<std::size_t>(i) * c.s.n + j] = static_cast<float>(acc);
    }
  study::Fp8Operands op;
  op.x = x8.get();
  op.x_scale = xs.scale();
  op.w = &w8;
  if (c.e != Epilogue::None) op.bias = db.get();
  if (c.residual) op.residual = dr.get();
  study::DeviceBuffer<__half> y(mn);
  study::DeviceBuffer<f8::e4m3> y8(mn);
  const f8::ActivationScale ys(host_amax(want), 1.f);
  if (c.fp8_out) {
    op.y8 = y8.get();
    op.y_inv_scale = ys.inv_scale();
    CUDA_CHECK(cudaMemset(y8.get(), 0x7f, y8.bytes()));
  } else {
    op.y = y.get();
    study::poison(y);
  }
  try {
    run(c.s, c.e, op);
  } catch (const study::StudyError& e) {  // each combination reported on its own
    FAIL_CHECK(std::string(e.what()));
    return;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = c.fp8_out ? dequantize(host(y8), 1, static_cast<int>(mn), {ys.host_scale})
                             : study::to_float(study::to_host(y));
  // Products of E4M3 values are exact in fp32; fast accumulation keeps partial sums in fewer
  // bits between promotions (a few 1e-3 of the sum's scale); then the output's rounding: 2^-11
  // for fp16, 2^-4 (plus the subnormal step) for E4M3.
  // The accumulation error scales with the partial sums, so the large row's column (~20x the
  // others) errs ~20x more in absolute terms: atol takes 2e-3 of the largest output besides
  // 1e-2 of the RMS.
  const double rms = std::sqrt(std::inner_product(want.begin(), want.end(), want.begin(), 0.0) / mn);
  const double atol = 1e-2 * rms + 2e-3 * host_amax(want);
  const study::Tolerance tol = c.fp8_out ? study::Tolerance{0.05, atol + std::ldexp(ys.host_scale, -9), 0.07}
                                         : study::Tolerance{1e-2, atol, 1e-2};
  const auto cmp = study::compare(got, want, tol);
  INFO(cmp.summary());
  CHECK(cmp.ok);
}

// Small, well-formed operands of a 64 x 64 x 64 FP8 GEMM (bias, fp16 output; zero weights, per
// tensor): the refusal tests change one field of op() at a time.
struct SmallOperands {
  study::DeviceBuffer<f8::e4m3> x = study::DeviceBuffer<f8::e4m3>(64 * 64);
  study::DeviceBuffer<__half> w = zeros(64 * 64), b = zeros(64), y = zeros(64 * 64);
  f8::Weight w8 = f8::quantize_weight(w.get(), 64, 64, f8::Scaling::Tensor, nullptr);
  f8::ActivationScale s = f8::ActivationScale(1.f, 1.f);

  study::Fp8Operands op() const {
    study::Fp8Operands o;
    o.x = x.get();
    o.x_scale = s.scale();
    o.w = &w8;
    o.bias = b.get();
    o.y = y.get();
    return o;
  }

 private:
  static study::DeviceBuffer<__half> zeros(std::size_t n) {
    study::DeviceBuffer<__half> d(n);
    CUDA_CHECK(cudaMemset(d.get(), 0, d.bytes()));
    return d;
  }
};

}  // namespace fp8_test
