#include "harness/stats.hpp"
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace study {

Stats summarize(std::vector<double> s) {
  if (s.empty()) throw std::invalid_argument("summarize: no samples");
  std::sort(s.begin(), s.end());
  Stats r;
  r.count = static_cast<int>(s.size());
  r.min = s.front();
  r.max = s.back();
  r.mean = std::accumulate(s.begin(), s.end(), 0.0) / r.count;
  const std::size_t n = s.size();
  r.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  double ss = 0;
  for (double x : s) ss += (x - r.mean) * (x - r.mean);
  r.std = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  return r;
}

}  // namespace study
