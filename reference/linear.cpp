#include <cmath>

#include "detail.hpp"
#include "reference.hpp"

namespace ref {

void linear(const std::vector<float>& x, int rows, int in, const std::vector<float>& w,
            const std::vector<float>& b, int out, std::vector<float>& y) {
  detail::expect_positive("linear", "rows", rows);
  detail::expect_positive("linear", "in", in);
  detail::expect_positive("linear", "out", out);
  detail::expect_size("linear", "x", x.size(), static_cast<std::size_t>(rows) * in);
  detail::expect_size("linear", "w", w.size(), static_cast<std::size_t>(out) * in);
  if (!b.empty()) detail::expect_size("linear", "b", b.size(), out);
  y.assign(static_cast<std::size_t>(rows) * out, 0.f);
  // Rows are independent, so threads change nothing but the wall time (a whole-ViT reference
  // is ~35 GFLOP per image).
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      const float* wo = w.data() + static_cast<std::size_t>(o) * in;
      double acc = b.empty() ? 0.0 : b[o];
      for (int i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * wo[i];
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc);
    }
  }
}

float gelu(float x) {
  const double xd = x;
  return static_cast<float>(0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0))));
}

void mlp(const std::vector<float>& x, const std::vector<float>& residual, int rows, int hidden,
         int mlp_hidden, const std::vector<float>& fc1_w, const std::vector<float>& fc1_b,
         const std::vector<float>& fc2_w, const std::vector<float>& fc2_b, std::vector<float>& y) {
  detail::expect_positive("mlp", "rows", rows);
  detail::expect_positive("mlp", "hidden", hidden);
  detail::expect_size("mlp", "residual", residual.size(), static_cast<std::size_t>(rows) * hidden);
  std::vector<float> h;
  linear(x, rows, hidden, fc1_w, fc1_b, mlp_hidden, h);
  for (auto& v : h) v = gelu(v);
  linear(h, rows, mlp_hidden, fc2_w, fc2_b, hidden, y);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += residual[i];
}

void mlp(const std::vector<float>& x, int rows, int hidden, int mlp_hidden, const std::vector<float>& fc1_w,
         const std::vector<float>& fc1_b, const std::vector<float>& fc2_w, const std::vector<float>& fc2_b,
         std::vector<float>& y) {
  mlp(x, x, rows, hidden, mlp_hidden, fc1_w, fc1_b, fc2_w, fc2_b, y);
}

}  // namespace ref
