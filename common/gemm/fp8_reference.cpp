#include "gemm/fp8_reference.hpp"
#include <cuda_fp8.h>
#include <algorithm>
#include <cmath>
#include "harness/check.hpp"

namespace study::fp8 {

std::vector<float> quantized(const std::vector<float>& x, float inv_scale) {
  std::vector<float> q(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) q[i] = static_cast<float>(__nv_fp8_e4m3(x[i] * inv_scale));
  return q;
}

std::vector<float> scaled(std::vector<float> v, float s) {
  for (auto& x : v) x *= s;
  return v;
}

std::vector<float> dequantized_weight(const std::vector<float>& w, int n, int k, Scaling scaling) {
  std::vector<float> out(w.size());
  float tensor_amax = 0.f;
  for (float v : w) tensor_amax = std::max(tensor_amax, std::fabs(v));
  for (int r = 0; r < n; ++r) {
    const auto row = w.begin() + static_cast<std::ptrdiff_t>(r) * k;
    float amax = tensor_amax;
    if (scaling == Scaling::Channel) {
      amax = 0.f;
      for (int c = 0; c < k; ++c) amax = std::max(amax, std::fabs(row[c]));
    }
    const float s = amax > 0.f ? amax / kE4M3Max : 1.f, inv = 1.f / s;  // quantize_rows_kernel's
    for (int c = 0; c < k; ++c)
      out[static_cast<std::size_t>(r) * k + c] = static_cast<float>(__nv_fp8_e4m3(row[c] * inv)) * s;
  }
  return out;
}

std::vector<float> host_values(const e4m3* device, std::size_t n) {
  std::vector<e4m3> q(n);
  CUDA_CHECK(cudaMemcpy(q.data(), device, n * sizeof(e4m3), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = to_float(q[i]);
  return out;
}

float gelu_tanh(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
}

study::Tolerance e4m3_stage_tolerance(const std::vector<float>& want) {
  return {1e-2, 0x1p-9 + 1e-2 * study::rms(want), 0.13};
}

study::Tolerance branch_tolerance(const std::vector<float>& branch, const std::vector<float>& y) {
  float amax = 0.f;
  for (float v : y) amax = std::max(amax, std::fabs(v));
  return {1e-2, 2e-2 * study::rms(branch) + 0x1p-10 * amax, 2e-2};
}

}  // namespace study::fp8
