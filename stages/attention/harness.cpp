#include "attention/harness.hpp"
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include "harness/gpu.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

namespace attention {

HostInputs make_inputs(const Problem& p, std::uint64_t seed, Inputs kind) {
  const size_t width = static_cast<size_t>(p.heads) * p.head_dim;
  const size_t rows = static_cast<size_t>(p.batch) * p.tokens;
  HostInputs in;
  in.qkv = study::random_normal(rows * 3 * width, seed);
  if (kind == Inputs::LargeQK) {
    const auto mag = study::random_uniform(rows * 2 * width, seed + 1, 8.f, 16.f);
    for (size_t r = 0; r < rows; ++r)
      std::copy_n(mag.begin() + r * 2 * width, 2 * width, in.qkv.begin() + r * 3 * width);
  }
  study::round_to_half(in.qkv);
  return in;
}

DeviceProblem::DeviceProblem(const Problem& p, const HostInputs& in)
    : qkv(study::to_device(study::to_half(in.qkv))),
      out(static_cast<size_t>(p.batch) * p.tokens * p.heads * p.head_dim) {}

std::vector<std::pair<int, int>> check_pairs(const Problem& p, std::uint64_t seed, double budget_flops) {
  const long long total = static_cast<long long>(p.batch) * p.heads;
  const double per_pair = 4.0 * p.tokens * static_cast<double>(p.tokens) * p.head_dim;
  std::vector<std::pair<int, int>> pairs;
  if (total * per_pair <= budget_flops) {
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h) pairs.emplace_back(b, h);
    return pairs;
  }
  const long long want = std::min<long long>(total, std::max(3LL, static_cast<long long>(budget_flops / per_pair)));
  std::set<long long> chosen = {0, total - 1};
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<long long> pick(0, total - 1);
  while (static_cast<long long>(chosen.size()) < want) chosen.insert(pick(gen));
  for (long long i : chosen) pairs.emplace_back(static_cast<int>(i / p.heads), static_cast<int>(i % p.heads));
  return pairs;
}

std::string CheckResult::summary() const {
  return cmp.summary() + (gpu_checked ? " over all " + std::to_string(pairs_total) + " (batch, head) pairs (" +
                                            std::to_string(pairs_checked) + " of them also against the CPU reference)"
                                      : " over " + std::to_string(pairs_checked) + " of " +
                                            std::to_string(pairs_total) + " (batch, head) pairs");
}

study::MemoryNeed memory_need(const Problem& p, bool check) {
  const double rows = static_cast<double>(p.batch) * p.tokens;
  const double qkv = rows * 3 * p.heads * p.head_dim, out = rows * p.heads * p.head_dim;
  // As check_pairs(): every pair when all of them fit the CPU reference's budget.
  const bool sampled = static_cast<double>(p.batch) * p.heads * 4.0 * p.tokens * p.tokens * p.head_dim >
                       kReferenceBudgetFlops;
  study::MemoryNeed m;
  m.device = (qkv + out) * sizeof(__half);
  if (check && sampled) m.device += out * sizeof(float) + kGpuReferenceScores * sizeof(double);
  // With check: out in fp32 beside its fp16 copy, then the GPU reference's out.
  m.host = qkv * sizeof(float) + (check ? std::max(out * (sizeof(float) + sizeof(__half)),
                                                   (sampled ? 2 : 1) * out * sizeof(float))
                                        : qkv * sizeof(__half));
  return m;
}

namespace {

// Elements of the pairs (b, h) of a [batch*tokens, heads*head_dim] output, pair after pair.
std::vector<float> gather(const std::vector<float>& out, const Problem& p,
                          const std::vector<std::pair<int, int>>& pairs) {
  const std::size_t width = static_cast<std::size_t>(p.heads) * p.head_dim;
  std::vector<float> v;
  v.reserve(pairs.size() * p.tokens * p.head_dim);
  for (const auto& [b, h] : pairs)
    for (int t = 0; t < p.tokens; ++t) {
      const auto first = out.begin() + (static_cast<std::size_t>(b) * p.tokens + t) * width +
                         static_cast<std::size_t>(h) * p.head_dim;
      v.insert(v.end(), first, first + p.head_dim);
    }
  return v;
}

}  // namespace

CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in, DeviceProblem& dev,
                          std::uint64_t seed) {
  study::poison(dev.out);
  v.launch(p, dev.args(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = study::to_float(study::to_host(dev.out));

  const int T = p.tokens, D = p.head_dim;
  const size_t width = static_cast<size_t>(p.heads) * D;
  const auto pairs = check_pairs(p, seed);
  std::vector<float> want, slice(static_cast<size_t>(T) * 3 * D), ref_out;
  CheckResult r;
  r.pairs_total = p.batch * p.heads;
  for (const auto& [b, h] : pairs) {
    // Token t of pair (b, h): its q, k and v columns of the packed row become one row of a
    // batch-1, heads-1 packed buffer.
    for (int t = 0; t < T; ++t) {
      const size_t row = (static_cast<size_t>(b) * T + t) * 3 * width;
      for (int blk = 0; blk < 3; ++blk)
        std::copy_n(in.qkv.begin() + row + blk * width + static_cast<size_t>(h) * D, D,
                    slice.begin() + (static_cast<size_t>(t) * 3 + blk) * D);
    }
    ref::attention(slice, 1, T, 1, D, ref_out);
    want.insert(want.end(), ref_out.begin(), ref_out.end());
    ++r.pairs_checked;
  }
  r.cmp = study::compare(gather(out, p, pairs), want, kTolerance);
  if (r.pairs_checked < r.pairs_total && r.cmp.ok) {
    // A sample: every pair against the GPU reference, itself checked on the sample.
    const std::vector<float> gref = gpu_reference(p, dev);
    r.cmp = study::compare_via_gpu_reference(out, gref, gather(gref, p, pairs), want, kTolerance, "attention", "pairs");
    r.gpu_checked = true;
  }
  // Pairs outside the sample are still checked for being written (poison is NaN).
  const auto nonfinite = static_cast<size_t>(
      std::count_if(out.begin(), out.end(), [](float x) { return !std::isfinite(x); }));
  if (nonfinite > r.cmp.nonfinite) {
    r.cmp.nonfinite = nonfinite;
    r.cmp.ok = false;
  }
  return r;
}

}  // namespace attention
