#include "harness/check.hpp"
#include "harness/compare.hpp"
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace study {

Comparison compare(const std::vector<float>& got, const std::vector<float>& ref, const Tolerance& tol) {
  if (got.size() != ref.size()) throw std::invalid_argument("compare: size mismatch");
  Comparison c;
  c.tol = tol;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      if (c.nonfinite++ == 0) c.worst_index = i;
      continue;
    }
    const double r = ref[i];
    const double d = static_cast<double>(got[i]) - r;
    diff2 += d * d;
    ref2 += r * r;
    if (std::fabs(d) > c.max_abs && c.nonfinite == 0) {
      c.max_abs = std::fabs(d);
      c.worst_index = i;
    }
    // Written so that a NaN in the reference counts as outside.
    const double bound = tol.atol + tol.rtol * std::fabs(r);
    if (!(std::fabs(d) <= bound)) ++c.outside;
    const double ratio = bound > 0 ? std::fabs(d) / bound : (d == 0 ? 0 : INFINITY);
    if (!(ratio <= c.worst_ratio)) {
      c.worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
      c.worst_element = i;
      c.worst_got = got[i];
      c.worst_ref = r;
    }
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  c.ok = c.nonfinite == 0 && c.outside == 0 && c.rel_l2 <= tol.rel_l2 && !got.empty();
  return c;
}

std::string Comparison::summary() const {
  char buf[400];
  int n = std::snprintf(buf, sizeof buf, "rel_l2=%.3g max_abs=%.3g nonfinite=%zu (first bad index %zu)",
                        rel_l2, max_abs, nonfinite, worst_index);
  if (outside > 0 && n > 0 && static_cast<std::size_t>(n) < sizeof buf)
    std::snprintf(buf + n, sizeof buf - n,
                  "; %zu element(s) outside atol + rtol |ref| (atol=%.3g rtol=%.3g), worst at index %zu: "
                  "got %.6g, ref %.6g (%.3gx its bound)",
                  outside, tol.atol, tol.rtol, worst_element, worst_got, worst_ref, worst_ratio);
  return buf;
}

Comparison compare_via_gpu_reference(const std::vector<float>& got, const std::vector<float>& gref,
                                     const std::vector<float>& gref_sample, const std::vector<float>& want,
                                     const Tolerance& tol, const std::string& reference, const std::string& unit) {
  const Comparison agree = compare(gref_sample, want, kReferencesAgree);
  if (!agree.ok)
    throw StudyError(ErrorKind::Data, "the GPU " + reference + " reference disagrees with the CPU reference on the "
                                      "sampled " + unit + " (a fault of the reference, not of the version): " +
                                      agree.summary());
  return compare(got, gref, tol);
}

double rms(const std::vector<float>& v) {
  double sum2 = 0;
  for (float x : v) sum2 += static_cast<double>(x) * x;
  return v.empty() ? 0 : std::sqrt(sum2 / static_cast<double>(v.size()));
}

}  // namespace study
