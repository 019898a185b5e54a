// GPU test of one attention version (STAGE_VERSION) against the CPU reference: fresh random
// inputs every run, the output poisoned (NaN) before each launch, ViT's token counts and odd
// ones. Shapes whose full reference would cost more than kReferenceBudgetFlops are compared
// on a sample of (batch, head) pairs (harness.hpp says how), and every pair against the GPU
// reference, itself checked against the CPU reference.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <set>
#include "gpu_test_main.hpp"
#include "attention/harness.hpp"
#include "random.hpp"
#include "reference.hpp"

using namespace attention;

namespace {

const Version& version() { return find_version(STAGE_VERSION); }

// head_dim values no ViT uses; which versions refuse them (the test fails if a version
// refuses what it should compute, or the other way round).
const int kOddHeadDims[] = {32, 80};
std::set<int> expected_refusals(const std::string& name) {
  if (name == "v0_naive" || name == "cudnn_sdpa") return {};
  return {32, 80};  // v1..v7 tile head_dim 64 at compile time
}

void check_shape(const Problem& p, Inputs kind = Inputs::Normal) {
  const auto seed = study::fresh_seed();
  CAPTURE(p.batch);
  CAPTURE(p.tokens);
  CAPTURE(p.heads);
  CAPTURE(p.head_dim);
  CAPTURE(seed);
  REQUIRE_MESSAGE(version().supports(p).empty(), version().supports(p));
  const auto in = make_inputs(p, seed, kind);
  DeviceProblem dev(p, in);
  const auto c = run_and_check(version(), p, in, dev, seed);
  INFO(c.summary());
  CHECK(c.cmp.ok);
}

}  // namespace

TEST_CASE("matches the CPU reference at ViT token counts and odd ones") {
  for (int tokens : {1, 17, 50, 197, 577, 1025})
    for (int batch : {1, 3, 32})
      for (int heads : {3, 12, 16}) check_shape({batch, tokens, heads, 64});
}

TEST_CASE("the GPU reference (every pair of a sampled shape) matches the CPU reference") {
  const Problem shapes[] = {{1, 1, 1, 64}, {3, 17, 3, 64}, {2, 197, 12, 64}, {1, 50, 3, 80}, {1, 300, 2, 32},
                            {1, 1025, 1, 64}};
  for (const auto& p : shapes)
    for (Inputs kind : {Inputs::Normal, Inputs::LargeQK}) {
      const auto seed = study::fresh_seed();
      CAPTURE(p.batch);
      CAPTURE(p.tokens);
      CAPTURE(p.heads);
      CAPTURE(p.head_dim);
      CAPTURE(seed);
      const auto in = make_inputs(p, seed, kind);
      const DeviceProblem dev(p, in);
      std::vector<float> want;
      ref::attention(in.qkv, p.batch, p.tokens, p.heads, p.head_dim, want);
      const auto c = study::compare(gpu_reference(p, dev), want, study::kReferencesAgree);
      INFO(c.summary());
      CHECK(c.ok);
    }
}

TEST_CASE("large q and k (raw scores near 10^4) stay finite and correct") {
  for (int tokens : {17, 197, 577}) check_shape({3, tokens, 12, 64}, Inputs::LargeQK);
}

TEST_CASE("a head_dim other than 64 is computed or refused as declared") {
  const auto refusals = expected_refusals(STAGE_VERSION);
  for (int head_dim : kOddHeadDims) {
    CAPTURE(head_dim);
    const Problem p{3, 197, 12, head_dim};
    const std::string why = version().supports(p);
    if (refusals.count(head_dim)) {
      CHECK_MESSAGE(!why.empty(), "expected a refusal");
      CHECK(why.find(std::to_string(head_dim)) != std::string::npos);  // the reason names it
    } else {
      REQUIRE_MESSAGE(why.empty(), why);
      check_shape(p);
      check_shape({1, 50, 3, head_dim});
    }
  }
}

TEST_CASE("empty and oversized problems are refused") {
  CHECK_FALSE(version().supports({1000, 1025, 16, 64}).empty());  // 3.1e9 QKV elements
  CHECK_FALSE(version().supports({0, 197, 12, 64}).empty());
  CHECK_FALSE(version().supports({1, 0, 12, 64}).empty());
  CHECK_FALSE(version().supports({1, 197, 0, 64}).empty());
  CHECK_FALSE(version().supports({1, 197, 12, 0}).empty());
  CHECK_FALSE(version().supports({-1, 197, 12, 64}).empty());
}

int main(int argc, char** argv) {
  return gpu_test_main(argc, argv, "attention_" STAGE_VERSION, version());
}
