// A cuDNN version in a build without cuDNN or its frontend headers still exists, so the ladder,
// the bench and the sweeps know it: it reports itself unavailable with the reason (its test
// suite is skipped), refuses every problem with the same reason (its bench writes a `skipped`
// row), and throws it if launched anyway. Any family's Problem and Args.
#pragma once
#include <string>
#include <cuda_runtime.h>
#include "harness/check.hpp"

namespace study {

template <class Problem, class Args>
struct CudnnNotBuilt {
  static std::string unavailable() {
    return "not built: cuDNN or the cuDNN frontend headers were not found at configure time";
  }
  static std::string supports(const Problem&) { return unavailable(); }
  static void launch(const Problem&, const Args&, cudaStream_t) {
    throw StudyError(ErrorKind::Usage, unavailable());
  }
};

}  // namespace study
