// main() for GPU doctest suites: without a CUDA driver or device the whole suite is skipped with
// exit code 77 (meson reports SKIP) and one clear line, instead of failing. So is a suite whose
// version cannot run in this build or on this GPU at all (its record's why_unavailable() says
// why, e.g. a wgmma kernel in a build without sm_90a, or a cuDNN version in a build without
// cuDNN); every other refusal is the tests' business. Any other CUDA error while looking for a
// device fails the suite, and with STUDY_REQUIRE_GPU=1 (the GPU job) every skip is a failure.
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
  // A skip, or with STUDY_REQUIRE_GPU=1 a failure, with its reason.
  const auto skip = [suite](const std::string& why) {
    const bool required = study::gpu_required();
    std::printf("%s: %s: %s\n", suite, why.c_str(),
                required ? "failing (STUDY_REQUIRE_GPU=1)" : "skipping the suite");
    return required ? 1 : 77;
  };
  try {
    if (study::gpu_count() == 0) return skip("no CUDA device");
    if (unavailable) {
      if (const auto why = unavailable(); !why.empty()) return skip(why);
    }
  } catch (const std::exception& e) {
    std::printf("%s: %s: failing\n", suite, e.what());
    return 1;
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
