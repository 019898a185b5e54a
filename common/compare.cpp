#include "compare.hpp"
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace study {

Comparison compare(const std::vector<float>& got, const std::vector<float>& ref, double rel_tol) {
  if (got.size() != ref.size()) throw std::invalid_argument("compare: size mismatch");
  Comparison c;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      if (c.nonfinite++ == 0) c.worst_index = i;
      continue;
    }
    const double d = static_cast<double>(got[i]) - ref[i];
    diff2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
    if (std::fabs(d) > c.max_abs && c.nonfinite == 0) {
      c.max_abs = std::fabs(d);
      c.worst_index = i;
    }
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  c.ok = c.nonfinite == 0 && c.rel_l2 <= rel_tol && !got.empty();
  return c;
}

std::string Comparison::summary() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "rel_l2=%.3g max_abs=%.3g nonfinite=%zu (first bad index %zu)",
                rel_l2, max_abs, nonfinite, worst_index);
  return buf;
}

}  // namespace study
