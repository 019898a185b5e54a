#include "harness/random.hpp"
#include <cstdlib>
#include <random>

namespace study {

std::vector<float> random_uniform(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::vector<float> random_normal(std::size_t n, std::uint64_t seed, float mean, float stddev) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::vector<__half> to_half(const std::vector<float>& x) {
  std::vector<__half> h(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) h[i] = __float2half_rn(x[i]);
  return h;
}

std::vector<float> to_float(const std::vector<__half>& x) {
  std::vector<float> f(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) f[i] = __half2float(x[i]);
  return f;
}

void round_to_half(std::vector<float>& x) {
  for (auto& v : x) v = __half2float(__float2half_rn(v));
}

std::uint64_t fresh_seed() {
  if (const char* s = std::getenv("STUDY_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace study
