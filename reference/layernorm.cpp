#include <cmath>

#include "detail.hpp"
#include "reference.hpp"

namespace ref {

void layernorm(const std::vector<float>& x, const std::vector<float>& gamma, const std::vector<float>& beta,
               int rows, int hidden, float eps, std::vector<float>& y) {
  detail::expect_positive("layernorm", "rows", rows);
  detail::expect_positive("layernorm", "hidden", hidden);
  const std::size_t n = static_cast<std::size_t>(rows) * hidden;
  detail::expect_size("layernorm", "x", x.size(), n);
  detail::expect_size("layernorm", "gamma", gamma.size(), hidden);
  detail::expect_size("layernorm", "beta", beta.size(), hidden);
  y.assign(n, 0.f);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + static_cast<std::size_t>(r) * hidden;
    float* yr = y.data() + static_cast<std::size_t>(r) * hidden;
    // Two passes: the one-pass E[x^2] - E[x]^2 form cancels badly when |mean| >> std.
    double mean = 0;
    for (int i = 0; i < hidden; ++i) mean += xr[i];
    mean /= hidden;
    double var = 0;
    for (int i = 0; i < hidden; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= hidden;  // biased, as nn.LayerNorm
    const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int i = 0; i < hidden; ++i)
      yr[i] = static_cast<float>((xr[i] - mean) * inv_std * gamma[i] + beta[i]);
  }
}

}  // namespace ref
