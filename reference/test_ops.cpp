// Hand-computed cases and invariants for each component.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "harness/check.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

using doctest::Approx;

namespace {

double exact_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Column offset of element d of head h in block (0 q, 1 k, 2 v) of a packed qkv row.
std::size_t col(int block, int h, int d, int heads, int head_dim) {
  return static_cast<std::size_t>(block) * heads * head_dim + static_cast<std::size_t>(h) * head_dim + d;
}

}  // namespace

TEST_CASE("layernorm of [1,2,3,4], plain and with gamma/beta") {
  // mean 2.5, biased variance 1.25; eps 0 so the values are exact.
  const double s = 1.0 / std::sqrt(1.25);
  std::vector<float> y;
  ref::layernorm({1, 2, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 0}, 1, 4, 0.f, y);
  CHECK(y[0] == Approx(-1.5 * s).epsilon(1e-6));
  CHECK(y[1] == Approx(-0.5 * s).epsilon(1e-6));
  CHECK(y[2] == Approx(0.5 * s).epsilon(1e-6));
  CHECK(y[3] == Approx(1.5 * s).epsilon(1e-6));

  // Distinct gamma and beta per feature: a swap of the two, or a misplaced index, changes the result.
  ref::layernorm({1, 2, 3, 4}, {1, -1, 0.5f, 2}, {0, 1, -1, 0.5f}, 1, 4, 0.f, y);
  CHECK(y[0] == Approx(-1.5 * s).epsilon(1e-6));
  CHECK(y[1] == Approx(0.5 * s + 1).epsilon(1e-6));
  CHECK(y[2] == Approx(0.25 * s - 1).epsilon(1e-6));
  CHECK(y[3] == Approx(3.0 * s + 0.5).epsilon(1e-6));

  // eps enters under the square root: var 1.25 + eps 0.75 = 2.
  ref::layernorm({1, 2, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 0}, 1, 4, 0.75f, y);
  CHECK(y[0] == Approx(-1.5 / std::sqrt(2.0)).epsilon(1e-6));
}

TEST_CASE("layernorm rows have mean 0 and variance 1 when gamma=1, beta=0") {
  const int rows = 5, hidden = 193;  // odd width on purpose
  auto x = study::random_uniform(static_cast<std::size_t>(rows) * hidden, 7, -3.f, 3.f);
  for (int i = 0; i < hidden; ++i) x[2 * hidden + i] += 1000.f;  // large mean: two-pass must cope
  std::vector<float> y;
  ref::layernorm(x, std::vector<float>(hidden, 1.f), std::vector<float>(hidden, 0.f), rows, hidden, 0.f, y);
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < hidden; ++i) mean += y[static_cast<std::size_t>(r) * hidden + i];
    mean /= hidden;
    for (int i = 0; i < hidden; ++i) var += std::pow(y[static_cast<std::size_t>(r) * hidden + i] - mean, 2);
    var /= hidden;
    CHECK(std::fabs(mean) < 1e-6);
    CHECK(var == Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("linear: x [2,3] times W [4,3]^T plus bias") {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> w = {1, 0, -1, 0.5f, 0.5f, 0.5f, 0, 1, 0, 2, 0, 0};
  std::vector<float> y;
  ref::linear(x, 2, 3, w, {}, 4, y);
  CHECK(y == std::vector<float>{-2, 3, 2, 2, -2, 7.5f, 5, 8});
  ref::linear(x, 2, 3, w, {10, -1, 0.5f, 0}, 4, y);
  CHECK(y == std::vector<float>{8, 2, 2.5f, 2, 8, 6.5f, 5.5f, 8});
}

TEST_CASE("gelu is the exact erf form") {
  CHECK(ref::gelu(1.f) == Approx(0.8413447460685429).epsilon(1e-7));
  CHECK(ref::gelu(-1.f) == Approx(-0.15865525393145707).epsilon(1e-7));
  CHECK(ref::gelu(2.f) == Approx(1.9544997361036416).epsilon(1e-7));
  CHECK(ref::gelu(0.5f) == Approx(0.34573123063700656).epsilon(1e-7));
  CHECK(ref::gelu(-3.f) == Approx(-0.00404969409489031).epsilon(1e-6));
  CHECK(ref::gelu(0.f) == 0.f);
  // The tanh approximation gives 0.841192 at 1: 1.5e-4 away, far outside the tolerance above.
  CHECK(std::fabs(ref::gelu(1.f) - 0.8411919906082768) > 1e-4);
}

TEST_CASE("mlp: x + fc2(gelu(fc1(x))), hand-sized") {
  // hidden 2, mlp_hidden 3
  const std::vector<float> x = {1, -1};
  const std::vector<float> fc1_w = {1, 0, 0, 1, 1, 1}, fc1_b = {0, 0, 0.5f};
  const std::vector<float> fc2_w = {1, 1, 0, 0, 0, 2}, fc2_b = {0.1f, -0.1f};
  std::vector<float> y;
  ref::mlp(x, 1, 2, 3, fc1_w, fc1_b, fc2_w, fc2_b, y);
  // fc1(x) = [1, -1, 0.5]
  CHECK(y[0] == Approx(1 + exact_gelu(1) + exact_gelu(-1) + 0.1).epsilon(1e-6));
  CHECK(y[1] == Approx(-1 + 2 * exact_gelu(0.5) - 0.1).epsilon(1e-6));
  // The same MLP with another residual stream adds that stream instead of x.
  std::vector<float> yr;
  ref::mlp(x, {10, 20}, 1, 2, 3, fc1_w, fc1_b, fc2_w, fc2_b, yr);
  CHECK(yr[0] == Approx(10 + exact_gelu(1) + exact_gelu(-1) + 0.1).epsilon(1e-6));
  CHECK(yr[1] == Approx(20 + 2 * exact_gelu(0.5) - 0.1).epsilon(1e-6));
}

TEST_CASE("attention with one token returns V") {
  const int batch = 2, tokens = 1, heads = 3, head_dim = 5;
  const auto qkv = study::random_uniform(static_cast<std::size_t>(batch) * tokens * 3 * heads * head_dim, 11);
  std::vector<float> out;
  ref::attention(qkv, batch, tokens, heads, head_dim, out);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < head_dim; ++d)
        CHECK(out[static_cast<std::size_t>(b) * heads * head_dim + h * head_dim + d] ==
              qkv[static_cast<std::size_t>(b) * 3 * heads * head_dim + col(2, h, d, heads, head_dim)]);
}

TEST_CASE("attention with identical keys averages the V rows") {
  const int batch = 2, tokens = 4, heads = 2, head_dim = 3;
  const std::size_t row = 3 * heads * head_dim;
  auto qkv = study::random_uniform(static_cast<std::size_t>(batch) * tokens * row, 12);
  for (int b = 0; b < batch; ++b)
    for (int t = 1; t < tokens; ++t)
      for (int c = heads * head_dim; c < 2 * heads * head_dim; ++c)
        qkv[(static_cast<std::size_t>(b) * tokens + t) * row + c] = qkv[static_cast<std::size_t>(b) * tokens * row + c];
  std::vector<float> out;
  ref::attention(qkv, batch, tokens, heads, head_dim, out);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < head_dim; ++d) {
        double mean = 0;
        for (int t = 0; t < tokens; ++t)
          mean += qkv[(static_cast<std::size_t>(b) * tokens + t) * row + col(2, h, d, heads, head_dim)];
        mean /= tokens;
        for (int i = 0; i < tokens; ++i)
          CHECK(out[(static_cast<std::size_t>(b) * tokens + i) * heads * head_dim + h * head_dim + d] ==
                Approx(mean).epsilon(1e-6));
      }
}

TEST_CASE("attention: one-hot V rows expose the softmax, which sums to 1") {
  // 1 batch, 1 head, 3 tokens, head_dim 4 (scale 1/2). V row j = e_j, so output row i is the
  // softmax row i itself. q_i . k_j / 2 gives scores [0,1,2], [0,0,0] and [0,-2,-4].
  const int tokens = 3, head_dim = 4;
  std::vector<float> qkv(static_cast<std::size_t>(tokens) * 3 * head_dim, 0.f);
  const float q0[tokens] = {2, 0, -4};
  for (int t = 0; t < tokens; ++t) {
    qkv[t * 3 * head_dim + col(0, 0, 0, 1, head_dim)] = q0[t];
    qkv[t * 3 * head_dim + col(1, 0, 0, 1, head_dim)] = static_cast<float>(t);
    qkv[t * 3 * head_dim + col(2, 0, t, 1, head_dim)] = 1.f;
  }
  std::vector<float> out;
  ref::attention(qkv, 1, tokens, 1, head_dim, out);
  const double scores[tokens][tokens] = {{0, 1, 2}, {0, 0, 0}, {0, -2, -4}};
  for (int i = 0; i < tokens; ++i) {
    double z = 0, sum = 0;
    for (int j = 0; j < tokens; ++j) z += std::exp(scores[i][j]);
    for (int j = 0; j < tokens; ++j) {
      CHECK(out[i * head_dim + j] == Approx(std::exp(scores[i][j]) / z).epsilon(1e-6));
      sum += out[i * head_dim + j];
    }
    CHECK(sum == Approx(1.0).epsilon(1e-6));
    CHECK(out[i * head_dim + 3] == 0.f);
  }
  CHECK(out[0] == Approx(0.09003057317038046).epsilon(1e-6));
}

TEST_CASE("attention: batches and heads are independent") {
  const int batch = 2, tokens = 5, heads = 2, head_dim = 3;
  const std::size_t row = 3 * heads * head_dim, width = heads * head_dim;
  const auto qkv = study::random_uniform(batch * tokens * row, 13, -2.f, 2.f);
  std::vector<float> both;
  ref::attention(qkv, batch, tokens, heads, head_dim, both);

  // Each batch alone gives the same rows.
  for (int b = 0; b < batch; ++b) {
    std::vector<float> one(qkv.begin() + b * tokens * row, qkv.begin() + (b + 1) * tokens * row), out;
    ref::attention(one, 1, tokens, heads, head_dim, out);
    for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == both[b * tokens * width + i]);
  }
  // Swapping the heads' columns in q, k and v swaps the heads' output columns.
  auto swapped = qkv;
  for (std::size_t r = 0; r < static_cast<std::size_t>(batch) * tokens; ++r)
    for (int blk = 0; blk < 3; ++blk)
      for (int d = 0; d < head_dim; ++d)
        std::swap(swapped[r * row + col(blk, 0, d, heads, head_dim)], swapped[r * row + col(blk, 1, d, heads, head_dim)]);
  std::vector<float> out;
  ref::attention(swapped, batch, tokens, heads, head_dim, out);
  for (std::size_t r = 0; r < static_cast<std::size_t>(batch) * tokens; ++r)
    for (int d = 0; d < head_dim; ++d) {
      CHECK(out[r * width + d] == both[r * width + head_dim + d]);
      CHECK(out[r * width + head_dim + d] == both[r * width + d]);
    }
}

TEST_CASE("patch_embed of a one-hot image picks one conv weight") {
  const int batch = 2, image = 32, hidden = 3, tokens = 5;  // 2x2 patches + cls
  const auto conv_w = study::random_uniform(static_cast<std::size_t>(hidden) * 3 * 16 * 16, 21);
  const auto conv_b = study::random_uniform(hidden, 22);
  const auto cls = study::random_uniform(hidden, 23);
  const auto pos = study::random_uniform(static_cast<std::size_t>(tokens) * hidden, 24);
  // One pixel lit: batch 1, channel 2, row 16+5, column 7 -> patch (1, 0) = token 3, kernel (5, 7).
  std::vector<float> images(static_cast<std::size_t>(batch) * 3 * image * image, 0.f);
  images[((1 * 3 + 2) * image + 21) * image + 7] = 1.f;
  std::vector<float> out;
  ref::patch_embed(images, batch, image, hidden, conv_w, conv_b, cls, pos, out);
  REQUIRE(out.size() == static_cast<std::size_t>(batch) * tokens * hidden);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < tokens; ++t)
      for (int o = 0; o < hidden; ++o) {
        double want = pos[t * hidden + o] + (t == 0 ? cls[o] : conv_b[o]);
        if (b == 1 && t == 3) want += conv_w[((o * 3 + 2) * 16 + 5) * 16 + 7];
        CHECK(out[(b * tokens + t) * hidden + o] == Approx(want).epsilon(1e-6));
      }
}

TEST_CASE("encoder block with zero linear weights leaves x unchanged") {
  const study::ModelConfig cfg{"zero", 8, 2, 1};
  const int batch = 2, tokens = 3, h = cfg.hidden, m = cfg.mlp();
  ref::BlockWeights w;
  w.ln1_g = study::random_uniform(h, 31);
  w.ln1_b = study::random_uniform(h, 32);
  w.ln2_g = study::random_uniform(h, 33);
  w.ln2_b = study::random_uniform(h, 34);
  w.qkv_w.assign(3 * h * h, 0.f);
  w.qkv_b.assign(3 * h, 0.f);
  w.proj_w.assign(h * h, 0.f);
  w.proj_b.assign(h, 0.f);
  w.fc1_w.assign(m * h, 0.f);
  w.fc1_b.assign(m, 0.f);
  w.fc2_w.assign(h * m, 0.f);
  w.fc2_b.assign(h, 0.f);
  const auto x0 = study::random_uniform(static_cast<std::size_t>(batch) * tokens * h, 35);
  auto x = x0;
  ref::encoder_block(x, batch, tokens, cfg, w);
  CHECK(x == x0);

  // Only the two output biases non-zero: each residual branch adds exactly its bias.
  w.proj_b = study::random_uniform(h, 36);
  w.fc2_b = study::random_uniform(h, 37);
  ref::encoder_block(x, batch, tokens, cfg, w);
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(x[i] == Approx(x0[i] + w.proj_b[i % h] + w.fc2_b[i % h]).epsilon(1e-6));
}

TEST_CASE("size mismatches are usage errors, not out-of-bounds reads") {
  std::vector<float> y;
  auto kind_of = [](auto&& f) {
    try {
      f();
    } catch (const study::StudyError& e) {
      return e.kind;
    }
    return study::ErrorKind::Cuda;  // "did not throw"
  };
  CHECK(kind_of([&] { ref::linear({1, 2, 3}, 1, 3, {1, 2}, {}, 1, y); }) == study::ErrorKind::Usage);
  CHECK_THROWS_WITH(ref::linear({1, 2, 3}, 1, 3, {1, 2}, {}, 1, y), "ref::linear: w has 2 elements, expected 3");
  CHECK(kind_of([&] { ref::linear({1, 2, 3}, 1, 3, {1, 2, 3}, {1, 2}, 1, y); }) == study::ErrorKind::Usage);
  CHECK(kind_of([&] { ref::layernorm({1, 2, 3}, {1, 1}, {0, 0}, 1, 3, 1e-6f, y); }) == study::ErrorKind::Usage);
  CHECK(kind_of([&] { ref::mlp({1, 2}, {1}, 1, 2, 1, {1, 1}, {}, {1, 1}, {}, y); }) == study::ErrorKind::Usage);
  CHECK(kind_of([&] { ref::attention(std::vector<float>(17), 1, 1, 2, 3, y); }) == study::ErrorKind::Usage);
  CHECK(kind_of([&] { ref::attention({}, 1, 0, 2, 3, y); }) == study::ErrorKind::Usage);
  CHECK(kind_of([&] { ref::patch_embed({}, 1, 30, 4, {}, {}, {}, {}, y); }) == study::ErrorKind::Usage);
}
