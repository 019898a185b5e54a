#include <algorithm>
#include <cmath>

#include "detail.hpp"
#include "reference.hpp"

namespace ref {

void attention(const std::vector<float>& qkv, int batch, int tokens, int heads, int head_dim,
               std::vector<float>& out) {
  detail::expect_positive("attention", "batch", batch);
  detail::expect_positive("attention", "tokens", tokens);
  detail::expect_positive("attention", "heads", heads);
  detail::expect_positive("attention", "head_dim", head_dim);
  const std::size_t width = static_cast<std::size_t>(heads) * head_dim;  // of q, k, v and out
  const std::size_t rows = static_cast<std::size_t>(batch) * tokens;
  detail::expect_size("attention", "qkv", qkv.size(), rows * 3 * width);
  out.assign(rows * width, 0.f);

  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  // (batch, head) pairs are independent: threads change nothing but the wall time.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      std::vector<double> p(tokens);
      // Element d of head h for token t: row (b*tokens + t), column block*width + h*head_dim + d.
      auto at = [&](int t, int block, int d) {
        return static_cast<double>(
            qkv[(static_cast<std::size_t>(b) * tokens + t) * 3 * width + block * width +
                static_cast<std::size_t>(h) * head_dim + d]);
      };
      for (int i = 0; i < tokens; ++i) {
        double max_s = -INFINITY;
        for (int j = 0; j < tokens; ++j) {
          double s = 0;
          for (int d = 0; d < head_dim; ++d) s += at(i, 0, d) * at(j, 1, d);
          p[j] = s * scale;
          max_s = std::max(max_s, p[j]);
        }
        // Subtracting the row max changes nothing mathematically and keeps exp() finite.
        double sum = 0;
        for (int j = 0; j < tokens; ++j) {
          p[j] = std::exp(p[j] - max_s);
          sum += p[j];
        }
        for (int d = 0; d < head_dim; ++d) {
          double acc = 0;
          for (int j = 0; j < tokens; ++j) acc += p[j] * at(j, 2, d);
          out[(static_cast<std::size_t>(b) * tokens + i) * width + static_cast<std::size_t>(h) * head_dim + d] =
              static_cast<float>(acc / sum);
        }
      }
    }
  }
}

}  // namespace ref
