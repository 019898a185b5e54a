// GPU test of the FP8 layer (common/gemm/fp8.hpp): amax, quantization of activations and weights
// (per tensor and per channel), the LayerNorm that writes E4M3, and the FP8 GEMM with each
// epilogue and output type, against references computed on the host from the very E4M3 values
// the GPU multiplied (so a GEMM's error is its accumulation and output rounding alone).
#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include "gemm/fp8.hpp"
#include "gemm/fp8_gemm_case.hpp"
#include "harness/compare.hpp"
#include "harness/gpu.hpp"
#include "harness/gpu_test_main.hpp"
#include "harness/random.hpp"

// f8 (study::fp8), Epilogue and the shared helpers.
using namespace fp8_test;

TEST_CASE("amax and quantize: exact maximum, every value within E4M3 rounding, saturation instead of NaN") {
  const auto seed = study::fresh_seed();
  CAPTURE(seed);
  for (long long n : {8LL, 197LL * 768, 50432LL * 8}) {
    CAPTURE(n);
    auto x = rounded_normal(static_cast<std::size_t>(n), seed, 1.f);
    const auto dx = study::to_device(study::to_half(x));
    study::DeviceBuffer<float> amax(1);
    CUDA_CHECK(cudaMemset(amax.get(), 0, sizeof(float)));
    f8::amax(dx.get(), n, amax.get(), nullptr);
    const float want_amax = host_amax(x);
    CHECK(host(amax)[0] == want_amax);
    // The scale of half the amax: the top half of the values saturate at 448 * scale.
    const f8::ActivationScale s(want_amax, 0.5f);
    study::DeviceBuffer<f8::e4m3> q(static_cast<std::size_t>(n));
    CUDA_CHECK(cudaMemset(q.get(), 0x7f, q.bytes()));  // E4M3 NaN
    f8::quantize(dx.get(), n, s.inv_scale(), q.get(), nullptr);
    const auto got = dequantize(host(q), 1, static_cast<int>(n), {s.host_scale});
    std::size_t bad = 0, saturated = 0;
    for (long long i = 0; i < n; ++i) {
      const float limit = f8::kE4M3Max * s.host_scale;
      const float want = std::clamp(x[i], -limit, limit);
      saturated += std::fabs(x[i]) > limit;
      bad += !std::isfinite(got[i]) || !within_rounding(got[i], want, s.host_scale);
    }
    CHECK(bad == 0);
    if (n > 8) CHECK(saturated > 0);
  }
  // amax keeps the larger of its old value and the tensor's (a calibration over batches).
  const auto dx = study::to_device(study::to_half(std::vector<float>(64, 0.5f)));
  study::DeviceBuffer<float> amax(1);
  const float big = 3.f;
  CUDA_CHECK(cudaMemcpy(amax.get(), &big, sizeof big, cudaMemcpyHostToDevice));
  f8::amax(dx.get(), 64, amax.get(), nullptr);
  CHECK(host(amax)[0] == big);
  const f8::ActivationScale one(f8::kE4M3Max, 1.f);
  study::DeviceBuffer<f8::e4m3> q(64);
  CHECK_THROWS_AS(f8::quantize(dx.get(), 12, one.inv_scale(), q.get(), nullptr), std::invalid_argument);
}

TEST_CASE("weights: per-tensor and per-channel scales from the amax, values within E4M3 rounding") {
  const auto seed = study::fresh_seed();
  CAPTURE(seed);
  const int n = 96, k = 80;
  auto w = rounded_normal(static_cast<std::size_t>(n) * k, seed, 0.02f);
  for (int c = 0; c < k; ++c) w[5 * k + c] *= 40.f;  // an outlier row
  for (int c = 0; c < k; ++c) w[7 * k + c] = 0.f;    // an all-zero row
  study::round_to_half(w);
  const auto dw = study::to_device(study::to_half(w));
  for (auto scaling : {f8::Scaling::Tensor, f8::Scaling::Channel}) {
    CAPTURE(f8::scaling_name(scaling));
    const f8::Weight q = f8::quantize_weight(dw.get(), n, k, scaling, nullptr);
    const auto scale = host(q.scale);
    if (scaling == f8::Scaling::Tensor) {
      REQUIRE(scale.size() == 1);
      CHECK(scale[0] == host_amax(w) / f8::kE4M3Max);
    } else {
      REQUIRE(scale.size() == static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) {
        const std::vector<float> row(w.begin() + r * k, w.begin() + (r + 1) * k);
        CHECK(scale[r] == (r == 7 ? 1.f : host_amax(row) / f8::kE4M3Max));
      }
    }
    const auto got = dequantize(host(q.q), n, k, scale);
    std::size_t bad = 0;
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * k + c;
        bad += !within_rounding(got[i], w[i], scale[scale.size() == 1 ? 0 : r]);
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("layernorm_quantize: LayerNorm in fp32 written in E4M3, at every ViT width and odd row counts") {
  const auto seed = study::fresh_seed();
  CAPTURE(seed);
  for (int hidden : {192, 384, 768, 1024})
    for (int rows : {1, 197, 3 * 197}) {
      CAPTURE(hidden);
      CAPTURE(rows);
      auto x = rounded_normal(static_cast<std::size_t>(rows) * hidden, seed, 1.f);
      for (int r = 0; r < rows; ++r) x[static_cast<std::size_t>(r) * hidden] += 3.f * (r % 5);  // offset rows
      study::round_to_half(x);
      auto g = rounded_normal(hidden, seed + 1, 1.f), b = rounded_normal(hidden, seed + 2, 0.5f);
      const float eps = 1e-6f;
      std::vector<float> want(x.size());
      for (int r = 0; r < rows; ++r) {
        const float* xr = &x[static_cast<std::size_t>(r) * hidden];
        double mean = 0, var = 0;
        for (int c = 0; c < hidden; ++c) mean += xr[c];
        mean /= hidden;
        for (int c = 0; c < hidden; ++c) var += (xr[c] - mean) * (xr[c] - mean);
        const double rstd = 1.0 / std::sqrt(var / hidden + eps);
        for (int c = 0; c < hidden; ++c)
          want[static_cast<std::size_t>(r) * hidden + c] = static_cast<float>((xr[c] - mean) * rstd * g[c] + b[c]);
      }
      const f8::ActivationScale s(host_amax(want), 1.f);
      const auto dx = study::to_device(study::to_half(x)), dg = study::to_device(study::to_half(g)),
                 db = study::to_device(study::to_half(b));
      study::DeviceBuffer<f8::e4m3> q(x.size());
      CUDA_CHECK(cudaMemset(q.get(), 0x7f, q.bytes()));
      f8::layernorm_quantize(dx.get(), dg.get(), db.get(), rows, hidden, eps, s.inv_scale(), q.get(), nullptr);
      const auto got = dequantize(host(q), 1, static_cast<int>(x.size()), {s.host_scale});
      std::size_t bad = 0;
      for (std::size_t i = 0; i < x.size(); ++i)  // fp32 statistics: a little over the rounding alone
        bad += !std::isfinite(got[i]) || !within_rounding(got[i], want[i] * (1 - 1e-5f), s.host_scale * 1.01f);
      CHECK(bad == 0);
    }
  const f8::ActivationScale one(1.f, 1.f);
  study::DeviceBuffer<__half> x(1100);
  study::DeviceBuffer<f8::e4m3> q(1100);
  CHECK_THROWS_AS(f8::layernorm_quantize(x.get(), x.get(), x.get(), 1, 1100, 1e-6f, one.inv_scale(), q.get(), nullptr),
                  std::invalid_argument);
}

namespace {

// QKV, projection (+ residual), fc1 (GELU, E4M3 out), fc2 (+ residual) at batch 1 of ViT-B, then
// odd row counts: one token, three images of 197.
void check_every_form(study::Fp8Gemm& gemm, f8::Scaling scaling) {
  const Fp8Run run = [&gemm](const study::GemmShape& s, Epilogue e, const study::Fp8Operands& op) {
    gemm.run(s, e, op, nullptr);
  };
  check_gemm(run, {{197, 2304, 768}, Epilogue::Bias, false, false, scaling});
  check_gemm(run, {{197, 2304, 768}, Epilogue::Bias, false, true, scaling});  // for an E4M3 attention
  check_gemm(run, {{197, 768, 768}, Epilogue::Bias, true, false, scaling});
  check_gemm(run, {{197, 3072, 768}, Epilogue::GeluBias, false, true, scaling});
  check_gemm(run, {{197, 3072, 768}, Epilogue::GeluBias, false, false, scaling});
  check_gemm(run, {{197, 768, 3072}, Epilogue::Bias, true, false, scaling});
  check_gemm(run, {{1, 768, 768}, Epilogue::Bias, false, false, scaling});
  check_gemm(run, {{3 * 197, 192, 768}, Epilogue::GeluBias, false, true, scaling});
  check_gemm(run, {{3, 16, 32}, Epilogue::GeluBias, false, false, scaling});
  check_gemm(run, {{256, 256, 512}, Epilogue::None, false, false, scaling});  // the ceiling's form
  CHECK(gemm.choices().size() >= 10);
}

// Per-tensor scales are cuBLASLt's FP8 baseline; outer-vector (per-channel) scales depend on the
// GPU and cuBLASLt release, so their cases are a suite of their own (fp8_gemm_per_channel, main
// below), which skips where cuBLASLt's heuristic has none.
constexpr const char* kPerChannelCase = "FP8 GEMM with per-channel weight scales*";
std::string why_no_per_channel() {
  return study::Fp8Gemm().why_unsupported({197, 768, 768}, Epilogue::Bias, false, f8::Scaling::Channel);
}

}  // namespace

TEST_CASE("FP8 GEMM: no epilogue, bias, bias + residual, GELU with an E4M3 output, per-tensor weight scales") {
  study::Fp8Gemm gemm;
  check_every_form(gemm, f8::Scaling::Tensor);
}

TEST_CASE("FP8 GEMM with per-channel weight scales: every form") {
  study::Fp8Gemm gemm;
  check_every_form(gemm, f8::Scaling::Channel);
}

TEST_CASE("FP8 GEMM: malformed calls are refused") {
  study::Fp8Gemm gemm;
  const SmallOperands small;
  const study::Fp8Operands op = small.op();
  const auto& x = small.x;
  const auto& y = small.y;
  const auto& s = small.s;
  CHECK_THROWS_AS(gemm.run({64, 24, 64}, Epilogue::Bias, op, nullptr), std::invalid_argument);  // n % 16
  CHECK_THROWS_AS(gemm.run({0, 64, 64}, Epilogue::Bias, op, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(gemm.run({64, 64, 64}, Epilogue::None, op, nullptr), std::invalid_argument);  // a bias
  study::Fp8Operands gelu_residual = op;
  gelu_residual.residual = y.get();
  CHECK_THROWS_AS(gemm.run({64, 64, 64}, Epilogue::GeluBias, gelu_residual, nullptr), std::invalid_argument);
  study::Fp8Operands both = op;
  both.y8 = x.get();
  both.y_inv_scale = s.inv_scale();
  CHECK_THROWS_AS(gemm.run({64, 64, 64}, Epilogue::Bias, both, nullptr), std::invalid_argument);
  study::Fp8Operands no_bias = op;
  no_bias.bias = nullptr;
  CHECK_THROWS_AS(gemm.run({64, 64, 64}, Epilogue::Bias, no_bias, nullptr), std::invalid_argument);
}

// With --per-channel: the per-channel cases alone, skipped (77) with the reason where this
// cuBLASLt cannot run them; without it, every other case.
int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  const auto flag =
      std::find_if(args.begin(), args.end(), [](const char* a) { return std::strcmp(a, "--per-channel") == 0; });
  const bool per_channel = flag != args.end();
  if (per_channel) args.erase(flag);
  std::string filter = std::string(per_channel ? "--test-case=" : "--test-case-exclude=") + kPerChannelCase;
  args.push_back(filter.data());
  const int n = static_cast<int>(args.size());
  if (!per_channel) return gpu_test_main(n, args.data(), "fp8_gemm", f8::unavailable);
  try {
    if (study::gpu_count() > 0 && f8::unavailable().empty())
      if (const auto why = why_no_per_channel(); !why.empty()) {
        std::printf("fp8_gemm_per_channel: this cuBLASLt has no per-channel FP8 GEMM: %s: skipping\n", why.c_str());
        return 77;  // a capability of the library, not a missing GPU: a skip under STUDY_REQUIRE_GPU=1 too
      }
  } catch (const std::exception& e) {
    std::printf("fp8_gemm_per_channel: %s: failing\n", e.what());
    return 1;
  }
  return gpu_test_main(n, args.data(), "fp8_gemm_per_channel", f8::unavailable);
}
