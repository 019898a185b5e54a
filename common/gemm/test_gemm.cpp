// GPU test of the study's GEMM layer (common/gemm/gemm.hpp): every epilogue, with and without the
// residual, against ref::linear; unaligned operands; the plan cache; which GELU the epilogue
// computes.
#include <doctest/doctest.h>
#include <cmath>
#include <stdexcept>
#include "gemm/gemm.hpp"
#include "harness/compare.hpp"
#include "harness/gpu.hpp"
#include "harness/gpu_test_main.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

using study::Epilogue;

namespace {

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

std::vector<float> rounded_normal(size_t n, std::uint64_t seed, float stddev) {
  auto v = study::random_normal(n, seed, 0.f, stddev);
  study::round_to_half(v);
  return v;
}

// Y = X W^T (+ b) then GELU (tanh form, as cuBLASLt documents its epilogue), then + residual.
std::vector<float> expected(const study::GemmShape& s, Epilogue e, const std::vector<float>& x,
                            const std::vector<float>& w, const std::vector<float>& b,
                            const std::vector<float>& residual) {
  std::vector<float> y;
  ref::linear(x, s.m, s.k, w, e == Epilogue::None ? std::vector<float>() : b, s.n, y);
  if (e == Epilogue::GeluBias)
    for (auto& v : y) v = static_cast<float>(gelu_tanh(v));
  for (size_t i = 0; i < residual.size(); ++i) y[i] += residual[i];
  return y;
}

// Runs one GEMM with operands placed `offset` elements past an aligned allocation.
void check_gemm(study::Gemm& gemm, const study::GemmShape& s, Epilogue e, bool with_residual,
                int offset = 0) {
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  CAPTURE(study::epilogue_name(e));
  CAPTURE(with_residual);
  CAPTURE(offset);
  const auto seed = study::fresh_seed();
  CAPTURE(seed);
  const size_t nx = size_t(s.m) * s.k, nw = size_t(s.n) * s.k, ny = size_t(s.m) * s.n;
  const auto x = rounded_normal(nx, seed, 1.f);
  const auto w = rounded_normal(nw, seed + 1, 1.f / std::sqrt(float(s.k)));
  const auto b = rounded_normal(s.n, seed + 2, 0.5f);
  const auto r = with_residual ? rounded_normal(ny, seed + 3, 1.f) : std::vector<float>();

  auto upload = [&](const std::vector<float>& host, size_t n) {
    std::vector<float> padded(offset, 0.f);
    padded.insert(padded.end(), host.begin(), host.end());
    padded.resize(offset + n);
    return study::to_device(study::to_half(padded));
  };
  auto dx = upload(x, nx), dw = upload(w, nw), db = upload(b, s.n), dr = upload(r, ny);
  study::DeviceBuffer<__half> dy(offset + ny);
  study::poison(dy);
  study::GemmOperands op;
  op.x = dx.get() + offset;
  op.w = dw.get() + offset;
  op.y = dy.get() + offset;
  if (e != Epilogue::None) op.bias = db.get() + offset;
  if (with_residual) op.residual = dr.get() + offset;
  gemm.run(s, e, op, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  auto got = study::to_float(study::to_host(dy));
  got.erase(got.begin(), got.begin() + offset);
  // Element-wise: fp16 rounding of y (rtol) and, near y = 0, the epilogue's fp32 GELU, whose
  // tanh cuBLASLt may evaluate with a fast approximation (~5e-4 of 0.5 |x|, atol 3e-3).
  const auto c = study::compare(got, expected(s, e, x, w, b, r), {study::kFp16RelTol, 3e-3, study::kFp16Rtol});
  INFO(c.summary());
  CHECK(c.ok);
}

}  // namespace

TEST_CASE("every epilogue, with and without residual, matches ref::linear") {
  study::Gemm gemm;
  // Sizes keep the CPU reference to a few seconds; 6304 rows exercise many row tiles.
  const study::GemmShape shapes[] = {{1, 64, 32}, {197, 3072, 768}, {197, 768, 3072}, {6304, 96, 64}};
  for (const auto& s : shapes)
    for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::GeluBias})
      for (bool res : {false, true})
        if (!(e == Epilogue::GeluBias && res)) check_gemm(gemm, s, e, res);
}

TEST_CASE("unaligned sizes and pointers are computed (the heuristic is told the alignment)") {
  study::Gemm gemm;
  for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::GeluBias}) {
    const bool res = e != Epilogue::GeluBias;
    check_gemm(gemm, {197, 400, 100}, e, res);  // leading dimensions not multiples of 8
    check_gemm(gemm, {197, 768, 256}, e, res, 1);  // every operand only 2-byte aligned
  }
}

TEST_CASE("plans are cached per shape, epilogue and alignment; every-call mode re-queries") {
  study::GemmConfig cfg;
  study::Gemm cached(cfg);
  cfg.heuristic_every_call = true;
  study::Gemm every(cfg);
  for (auto* g : {&cached, &every})
    for (int i = 0; i < 3; ++i) check_gemm(*g, {197, 768, 768}, Epilogue::Bias, false);
  CHECK(cached.plan_count() == 1);
  CHECK(cached.heuristic_queries() == 1);
  CHECK(every.plan_count() == 1);
  CHECK(every.heuristic_queries() == 3);
  check_gemm(cached, {197, 768, 768}, Epilogue::GeluBias, false);
  check_gemm(cached, {197, 768, 768}, Epilogue::Bias, false, 1);
  CHECK(cached.plan_count() == 3);
}

TEST_CASE("searching every cuBLASLt algorithm keeps one that computes the right result") {
  study::GemmConfig cfg;
  cfg.search_all = true;
  study::Gemm gemm(cfg);
  check_gemm(gemm, {197, 768, 256}, Epilogue::GeluBias, false);
  check_gemm(gemm, {197, 256, 768}, Epilogue::Bias, true);
  const auto choices = gemm.choices();
  REQUIRE(choices.size() == 2);
  for (const auto& c : choices) {
    MESSAGE(c);
    CHECK(c.find("fastest of") != std::string::npos);
  }
}

TEST_CASE("the GELU_BIAS epilogue computes the tanh approximation, not erf") {
  // W = 0, so the epilogue sees only the bias: 4096 pre-activations in [0.5, 1.5], where
  // tanh-GELU sits 1.5e-4 to 2.2e-4 below erf-GELU, under fp16's half-ulp there. The mean
  // signed deviation over all of them separates the two forms (rounding averages out).
  const study::GemmShape s{64, 4096, 64};
  std::vector<float> b(s.n);
  for (int j = 0; j < s.n; ++j) b[j] = 0.5f + float(j) / s.n;
  study::round_to_half(b);
  auto dx = study::to_device(study::to_half(study::random_normal(size_t(s.m) * s.k, 7)));
  auto dw = study::to_device(std::vector<__half>(size_t(s.n) * s.k, __float2half(0.f)));
  auto db = study::to_device(study::to_half(b));
  study::DeviceBuffer<__half> dy(size_t(s.m) * s.n);
  study::Gemm gemm;
  gemm.run(s, Epilogue::GeluBias, {dx.get(), dw.get(), dy.get(), db.get()}, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = study::to_float(study::to_host(dy));
  double shift = 0, predicted = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = b[i % s.n];
    shift += got[i] - ref::gelu(static_cast<float>(a));
    predicted += gelu_tanh(a) - ref::gelu(static_cast<float>(a));
  }
  shift /= got.size();
  predicted /= got.size();
  MESSAGE("mean(epilogue - erf GELU) = " << shift << ", tanh form predicts " << predicted);
  CHECK(std::fabs(shift - predicted) < 0.25 * std::fabs(predicted));
}

TEST_CASE("misuse is refused") {
  study::Gemm gemm;
  study::DeviceBuffer<__half> a(64), b(64), y(64), bias(8);
  const study::GemmShape s{8, 8, 8};
  CHECK_THROWS_AS(gemm.run(s, Epilogue::None, {a.get(), b.get(), y.get(), bias.get()}, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(gemm.run(s, Epilogue::Bias, {a.get(), b.get(), y.get()}, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(gemm.run({0, 8, 8}, Epilogue::None, {a.get(), b.get(), y.get()}, nullptr),
                  std::invalid_argument);
}

int main(int argc, char** argv) { return gpu_test_main(argc, argv, "gemm"); }

TEST_CASE("a residual after the GELU epilogue is refused") {
  study::Gemm gemm;
  study::DeviceBuffer<__half> x(64 * 64), w(64 * 64), b(64), r(64 * 64), y(64 * 64);
  study::GemmOperands op;
  op.x = x.get();
  op.w = w.get();
  op.y = y.get();
  op.bias = b.get();
  op.residual = r.get();
  CHECK_THROWS_AS(gemm.run({64, 64, 64}, Epilogue::GeluBias, op, nullptr), std::invalid_argument);
}
