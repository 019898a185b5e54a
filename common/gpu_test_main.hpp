// main() for GPU doctest suites: without a CUDA device the whole suite is skipped with exit
// code 77 (meson reports SKIP) and one clear line, instead of failing.
#pragma once
#include <cstdio>
#include <doctest/doctest.h>
#include "gpu.hpp"

inline int gpu_test_main(int argc, char** argv, const char* suite) {
  if (study::gpu_count() == 0) {
    std::printf("%s: no CUDA device: skipping the GPU suite\n", suite);
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
