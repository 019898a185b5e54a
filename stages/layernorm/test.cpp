// GPU test of one LayerNorm version (study::kStageVersion) against the CPU reference: fresh random
// inputs every run, output poisoned before each launch, ViT's shapes and odd ones.
#include <doctest/doctest.h>
#include <cstring>
#include <set>
#include "harness/gpu_test_main.hpp"
#include "harness/random.hpp"
#include "harness/stage_version.hpp"
#include "layernorm/harness.hpp"

using namespace layernorm;

namespace {

const Version& version() { return find_version(study::kStageVersion); }

// Hidden sizes that no fast path specializes, and which versions are expected to refuse
// them: the test fails if a version refuses what it should compute, or the other way round.
const int kOddHidden[] = {250, 1000};
std::set<int> expected_refusals(const std::string& name) {
  if (name == "v4_vectorized") return {250};       // not a multiple of 8
  if (name == "v5_unrolled") return {250, 1000};   // compiled for ViT sizes only
  return {};
}

void check_shape(int rows, int hidden, float x_mean = 0.5f, float x_std = 1.f) {
  const Problem p{rows, hidden};
  const auto seed = study::fresh_seed();
  CAPTURE(rows);
  CAPTURE(hidden);
  CAPTURE(seed);
  const auto in = make_inputs(p, seed, x_mean, x_std);
  DeviceProblem dev(in);
  const auto c = run_and_check(version(), p, in, dev);
  INFO(c.summary());
  CHECK(c.ok);
}

}  // namespace

TEST_CASE("matches the CPU reference at ViT shapes") {
  for (int hidden : {192, 384, 768, 1024}) {
    for (int rows : {1, 3, 197, 6304}) {
      REQUIRE_MESSAGE(version().supports({rows, hidden}).empty(), version().supports({rows, hidden}));
      check_shape(rows, hidden);
    }
  }
}

TEST_CASE("a hidden size no fast path specializes is computed or refused as declared") {
  const auto refusals = expected_refusals(study::kStageVersion);
  for (int hidden : kOddHidden) {
    CAPTURE(hidden);
    const std::string why = version().supports({197, hidden});
    if (refusals.count(hidden)) {
      CHECK_MESSAGE(!why.empty(), "expected a refusal");
      CHECK(why.find(std::to_string(hidden)) != std::string::npos);  // the reason names it
    } else {
      REQUIRE_MESSAGE(why.empty(), why);
      check_shape(197, hidden);
      check_shape(3, hidden);
    }
  }
}

TEST_CASE("large activations keep their accuracy") {
  // Activations in late ViT blocks reach magnitudes of tens; statistics stay in fp32.
  check_shape(197, 768, 4.f, 16.f);
}

TEST_CASE("whole rows of one value normalize to beta") {
  const Problem p{3, 768};
  auto in = make_inputs(p, study::fresh_seed());
  std::fill(in.x.begin(), in.x.end(), 2.5f);  // variance 0: output is beta exactly
  DeviceProblem dev(in);
  const auto c = run_and_check(version(), p, in, dev);
  INFO(c.summary());
  CHECK(c.ok);
}

TEST_CASE("a prefetch request (Args::prefetch) leaves the output bit for bit as it was") {
  if (!carries_prefetch(version())) return;
  const Problem p{197, 768};
  const auto in = make_inputs(p, study::fresh_seed());
  DeviceProblem dev(in);
  const auto c = run_and_check(version(), p, in, dev);  // y without a request, checked
  INFO(c.summary());
  REQUIRE(c.ok);
  const auto plain = study::to_host(dev.y);
  // 3 MB and a tail that is not a whole 16-byte unit: more chunks than some grids have threads.
  study::DeviceBuffer<char> far(std::size_t(3) << 20 | 40);
  Args a = dev.args();
  a.prefetch = {far.get(), far.bytes()};
  study::poison(dev.y);
  version().launch(p, a, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto with = study::to_host(dev.y);
  CHECK(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(__half)) == 0);
}

TEST_CASE("empty problems are refused") {
  CHECK_FALSE(version().supports({0, 768}).empty());
  CHECK_FALSE(version().supports({197, 0}).empty());
  CHECK_FALSE(version().supports({-1, 768}).empty());
}

int main(int argc, char** argv) {
  return gpu_test_main(argc, argv, study::stage_program("layernorm").c_str(), version());
}
