// main() for GPU doctest suites: without a CUDA device the whole suite is skipped with exit
// code 77 (meson reports SKIP) and one clear line, instead of failing. So is a suite whose
// version cannot run in this build or on this GPU at all (its record's why_unavailable() says
// why, e.g. a wgmma kernel in a build without sm_90a, or a cuDNN version in a build without
// cuDNN); every other refusal is the tests' business.
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <doctest/doctest.h>
#include "harness/gpu.hpp"
#include "harness/version.hpp"

// `unavailable` is asked only once a device is known to exist (it may query the device).
inline int gpu_test_main(int argc, char** argv, const char* suite,
                         const std::function<std::string()>& unavailable = {}) {
  if (study::gpu_count() == 0) {
    std::printf("%s: no CUDA device: skipping the GPU suite\n", suite);
    return 77;
  }
  if (unavailable) {
    if (const auto why = unavailable(); !why.empty()) {
      std::printf("%s: %s: skipping the suite\n", suite, why.c_str());
      return 77;
    }
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

// The suite of one version: skipped when the version is unavailable here.
template <class Problem, class Args>
int gpu_test_main(int argc, char** argv, const char* suite,
                  const study::VersionRecord<Problem, Args>& version) {
  return gpu_test_main(argc, argv, suite, [&version] { return version.why_unavailable(); });
}
