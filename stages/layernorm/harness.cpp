#include "layernorm/harness.hpp"
#include <algorithm>
#include "harness/gpu.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

namespace layernorm {

HostInputs make_inputs(const Problem& p, std::uint64_t seed, float x_mean, float x_std) {
  const size_t n = static_cast<size_t>(p.rows) * p.hidden;
  HostInputs in;
  in.x = study::random_normal(n, seed, x_mean, x_std);
  in.gamma = study::random_normal(p.hidden, seed + 1, 1.f, 0.2f);
  in.beta = study::random_normal(p.hidden, seed + 2, 0.f, 0.2f);
  for (auto* v : {&in.x, &in.gamma, &in.beta}) study::round_to_half(*v);
  return in;
}

DeviceProblem::DeviceProblem(const HostInputs& in)
    : x(study::to_device(study::to_half(in.x))),
      gamma(study::to_device(study::to_half(in.gamma))),
      beta(study::to_device(study::to_half(in.beta))),
      y(in.x.size()) {}

study::MemoryNeed memory_need(const Problem& p, bool check) {
  const double n = static_cast<double>(p.rows) * p.hidden;
  study::MemoryNeed m;
  m.device = 2 * n * sizeof(__half) + 2.0 * p.hidden * sizeof(__half);
  const double x = (n + 2.0 * p.hidden) * sizeof(float), staging = n * sizeof(__half);  // x, gamma, beta
  // With check: x, the fp32 output next to its fp16 copy, then the reference's output.
  m.host = check ? x + std::max(n * sizeof(float) + staging, 2 * n * sizeof(float)) : x + staging;
  return m;
}

study::Comparison run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                                DeviceProblem& dev) {
  study::poison(dev.y);
  v.launch(p, dev.args(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = study::to_float(study::to_host(dev.y));
  std::vector<float> want;
  ref::layernorm(in.x, in.gamma, in.beta, p.rows, p.hidden, p.eps, want);
  return study::compare(got, want, kTolerance);
}

}  // namespace layernorm
