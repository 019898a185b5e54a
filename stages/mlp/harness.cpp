#include "mlp/harness.hpp"
#include <algorithm>
#include <cmath>
#include "harness/gpu.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

namespace mlp {

HostInputs make_inputs(const Problem& p, std::uint64_t seed, WeightScale scale) {
  const bool unit = scale == WeightScale::Unit;
  const float w1_std = unit ? 1.f / std::sqrt(static_cast<float>(p.hidden)) : 0.02f;
  const float w2_std = unit ? 1.f / std::sqrt(static_cast<float>(p.mlp_hidden)) : 0.02f;
  const size_t weights = static_cast<size_t>(p.hidden) * p.mlp_hidden;
  HostInputs in;
  in.x = study::random_normal(static_cast<size_t>(p.rows) * p.hidden, seed, 0.f, 1.f);
  in.fc1_w = study::random_normal(weights, seed + 1, 0.f, w1_std);
  in.fc1_b = study::random_normal(p.mlp_hidden, seed + 2, 0.f, 0.1f);
  in.fc2_w = study::random_normal(weights, seed + 3, 0.f, w2_std);
  in.fc2_b = study::random_normal(p.hidden, seed + 4, 0.f, 0.1f);
  for (auto* v : {&in.x, &in.fc1_w, &in.fc1_b, &in.fc2_w, &in.fc2_b}) study::round_to_half(*v);
  return in;
}

void add_residual(const Problem& p, HostInputs& in, std::uint64_t seed) {
  in.residual = study::random_normal(static_cast<size_t>(p.rows) * p.hidden, seed + 5, 0.f, 1.f);
  study::round_to_half(in.residual);
}

DeviceProblem::DeviceProblem(const Problem& p, const HostInputs& in)
    : x(study::to_device(study::to_half(in.x))),
      fc1_w(study::to_device(study::to_half(in.fc1_w))),
      fc1_b(study::to_device(study::to_half(in.fc1_b))),
      fc2_w(study::to_device(study::to_half(in.fc2_w))),
      fc2_b(study::to_device(study::to_half(in.fc2_b))),
      y(in.x.size()),
      h(static_cast<size_t>(p.rows) * p.mlp_hidden) {
  if (!in.residual.empty()) residual = study::to_device(study::to_half(in.residual));
}

Args DeviceProblem::args(study::Gemm& gemm) const {
  Args a{x.get(), fc1_w.get(), fc1_b.get(), fc2_w.get(), fc2_b.get(), y.get(), h.get(), &gemm,
         residual.size() ? residual.get() : nullptr};
  if (fp8) a.fp8 = &fp8->args;
  return a;
}

void DeviceProblem::prepare_fp8(const Version& v, const Problem& p, study::Gemm& gemm) {
  if (!v.fp8 || (fp8 && fp8->fc1_w.scaling == v.scaling)) return;
  namespace f8 = study::fp8;
  const int rows = std::min(p.rows, kCalibrationRows);
  auto cx = study::random_normal(static_cast<std::size_t>(rows) * p.hidden, kCalibrationSeed, 0.f, 1.f);
  study::round_to_half(cx);
  float x_amax = 0.f;
  for (float value : cx) x_amax = std::max(x_amax, std::fabs(value));
  const auto d_cx = study::to_device(study::to_half(cx));
  study::DeviceBuffer<__half> ch(static_cast<std::size_t>(rows) * p.mlp_hidden);
  study::GemmOperands op;
  op.x = d_cx.get();
  op.w = fc1_w.get();
  op.y = ch.get();
  op.bias = fc1_b.get();
  gemm.run({rows, p.mlp_hidden, p.hidden}, study::Epilogue::GeluBias, op, nullptr);
  study::DeviceBuffer<float> h_amax(1);
  CUDA_CHECK(cudaMemset(h_amax.get(), 0, sizeof(float)));
  f8::amax(ch.get(), static_cast<long long>(ch.size()), h_amax.get(), nullptr);
  float h_max = 0.f;
  CUDA_CHECK(cudaMemcpy(&h_max, h_amax.get(), sizeof(float), cudaMemcpyDeviceToHost));
  fp8 = std::make_unique<Fp8Inputs>();
  Fp8Inputs& f = *fp8;
  f.fc1_w = f8::quantize_weight(fc1_w.get(), p.mlp_hidden, p.hidden, v.scaling, nullptr);
  f.fc2_w = f8::quantize_weight(fc2_w.get(), p.hidden, p.mlp_hidden, v.scaling, nullptr);
  f.x_scale = f8::ActivationScale(x_amax, f8::kCalibrationMargin);
  f.h_scale = f8::ActivationScale(h_max, f8::kCalibrationMargin);
  f.x8 = study::DeviceBuffer<f8::e4m3>(static_cast<std::size_t>(p.rows) * p.hidden);
  f.args = {&f.fc1_w, &f.fc2_w, &f.x_scale, &f.h_scale, f.x8.get(), false, &f.gemm};
}

std::vector<int> checked_rows(int rows) {
  std::vector<int> r;
  if (rows <= kFullCheckRows) {
    for (int i = 0; i < rows; ++i) r.push_back(i);
    return r;
  }
  for (int i = 0; i < kSampleRows; ++i)
    r.push_back(static_cast<int>(static_cast<long long>(i) * (rows - 1) / (kSampleRows - 1)));
  return r;
}

study::Tolerance tolerance(const Version& v) {
  return v.fp8 ? study::Tolerance{v.rel_tol, kFp8Atol, kFp8Rtol} : study::Tolerance{v.rel_tol, kAtol, kRtol};
}

study::MemoryNeed memory_need(const Problem& p, bool check, std::size_t workspace_bytes) {
  const double n = static_cast<double>(p.rows) * p.hidden, nh = static_cast<double>(p.rows) * p.mlp_hidden;
  const double weights = 2.0 * p.hidden * p.mlp_hidden + p.hidden + p.mlp_hidden;
  const bool sampled = p.rows > kFullCheckRows;
  const double ref_rows = std::min(p.rows, kGpuReferenceRows);
  study::MemoryNeed m;
  m.device = (2 * n + nh + weights) * sizeof(__half) + static_cast<double>(workspace_bytes);
  if (check && sampled) m.device += ref_rows * (p.mlp_hidden + p.hidden) * sizeof(float);
  const double inputs = (n + weights) * sizeof(float), staging = std::max(n, weights) * sizeof(__half);
  // With check: y in fp32 beside its fp16 copy, then the GPU reference's y (the CPU's sampled
  // rows are small next to it).
  m.host = inputs + (check ? std::max(n * sizeof(float) + n * sizeof(__half),
                                      (sampled ? 2 : 1) * n * sizeof(float))
                           : staging);
  return m;
}

namespace {

// The reference a version is compared with, on `rows` rows of x and of the residual.
std::vector<float> cpu_reference(const Version& v, const Problem& p, const HostInputs& in, int rows,
                                 const std::vector<float>& x, const std::vector<float>& residual) {
  std::vector<float> want;
  if (v.computes_mlp) {
    ref::mlp(x, residual, rows, p.hidden, p.mlp_hidden, in.fc1_w, in.fc1_b, in.fc2_w, in.fc2_b, want);
  } else {
    std::vector<float> h;
    ref::linear(x, rows, p.hidden, in.fc1_w, {}, p.mlp_hidden, h);
    ref::linear(h, rows, p.mlp_hidden, in.fc2_w, {}, p.hidden, want);
  }
  return want;
}

std::string where(const study::Comparison& c, const std::vector<int>& rows, std::size_t hidden) {
  const std::size_t i = c.outside ? c.worst_element : c.worst_index;
  return "; worst element in row " + std::to_string(rows.empty() ? i / hidden : rows[i / hidden]) +
         ", column " + std::to_string(i % hidden);
}

}  // namespace

CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                          DeviceProblem& dev, study::Gemm& gemm) {
  dev.prepare_fp8(v, p, gemm);
  study::poison(dev.h);
  study::poison(dev.y);
  v.launch(p, dev.args(gemm), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = study::to_float(study::to_host(dev.y));
  const size_t nonfinite =
      static_cast<size_t>(std::count_if(got.begin(), got.end(), [](float f) { return !std::isfinite(f); }));

  const std::vector<int> rows = checked_rows(p.rows);
  const size_t hd = static_cast<size_t>(p.hidden);
  const std::vector<float>& residual = in.residual.empty() ? in.x : in.residual;
  std::vector<float> xs, rs, gs;
  xs.reserve(rows.size() * hd);
  rs.reserve(rows.size() * hd);
  gs.reserve(rows.size() * hd);
  for (int row : rows) {
    xs.insert(xs.end(), in.x.begin() + row * hd, in.x.begin() + (row + 1) * hd);
    rs.insert(rs.end(), residual.begin() + row * hd, residual.begin() + (row + 1) * hd);
    gs.insert(gs.end(), got.begin() + row * hd, got.begin() + (row + 1) * hd);
  }
  const std::vector<float> want = cpu_reference(v, p, in, static_cast<int>(rows.size()), xs, rs);
  const std::string what = v.computes_mlp ? "" : " (against the two plain GEMMs, no bias, GELU or residual)";
  CheckResult r;
  r.cmp = study::compare(gs, want, tolerance(v));
  if (rows.size() == static_cast<size_t>(p.rows)) {
    r.cmp.nonfinite = nonfinite;
    r.cmp.ok = r.cmp.ok && nonfinite == 0;
    r.what = "checked all " + std::to_string(p.rows) + " rows" + what;
    if (!r.cmp.ok && nonfinite == 0) r.what += where(r.cmp, rows, hd);
    return r;
  }

  r.what = "checked " + std::to_string(rows.size()) + " of " + std::to_string(p.rows) +
           " rows (evenly sampled) against the CPU reference" + what;
  if (!r.cmp.ok) {
    r.cmp.nonfinite = std::max(r.cmp.nonfinite, nonfinite);
    r.what += where(r.cmp, rows, hd);
    return r;
  }
  // Rows were sampled: every row against the GPU reference, itself checked on the sample.
  const std::vector<float> gref = gpu_reference(p, dev, v.computes_mlp);
  std::vector<float> gref_rows;
  gref_rows.reserve(rows.size() * hd);
  for (int row : rows) gref_rows.insert(gref_rows.end(), gref.begin() + row * hd, gref.begin() + (row + 1) * hd);
  r.cmp = study::compare_via_gpu_reference(got, gref, gref_rows, want, tolerance(v), "MLP", "rows");
  r.what = "checked all " + std::to_string(p.rows) + " rows against the GPU reference, " +
           std::to_string(rows.size()) + " of them (evenly sampled) also against the CPU reference" + what;
  if (!r.cmp.ok && r.cmp.nonfinite == 0) r.what += where(r.cmp, {}, hd);
  return r;
}

}  // namespace mlp
