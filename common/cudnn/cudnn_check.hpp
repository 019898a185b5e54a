// cuDNN error checks (only included by cuDNN versions).
#pragma once
#include <string>
#include <cudnn.h>
#include "harness/cudnn_version.hpp"
#include "harness/check.hpp"

// The build's headers are those of the cuDNN it links (meson.build passes that cuDNN's version;
// another cuDNN's headers earlier on the include path would make this fail).
#if defined(STUDY_CUDNN_BUILD_VERSION) && STUDY_CUDNN_BUILD_VERSION != CUDNN_VERSION
#error "cudnn.h on the include path is not the header of the cuDNN this build links (see meson.build, cudnn_root)"
#endif

#define CUDNN_CHECK(expr)                                                                 \
  do {                                                                                    \
    cudnnStatus_t study_st_ = (expr);                                                     \
    if (study_st_ != CUDNN_STATUS_SUCCESS)                                                \
      throw ::study::StudyError(::study::ErrorKind::Library,                              \
                                std::string("cuDNN error ") + cudnnGetErrorString(study_st_) + \
                                    " in " #expr " at " __FILE__ ":" + std::to_string(__LINE__)); \
  } while (0)

// cuDNN frontend calls return an error object instead of a status.
#define CUDNN_FE_CHECK(expr)                                                              \
  do {                                                                                    \
    auto study_fe_ = (expr);                                                              \
    if (study_fe_.is_bad())                                                               \
      throw ::study::StudyError(::study::ErrorKind::Library,                              \
                                std::string("cuDNN frontend error: ") + study_fe_.get_message() + \
                                    " in " #expr " at " __FILE__ ":" + std::to_string(__LINE__)); \
  } while (0)

namespace study {

// Empty when the cuDNN loaded now is the build's; otherwise why no cuDNN version may run (each
// version's `unavailable` and `supports` return it, and the handle is never created).
inline std::string cudnn_unavailable() {
  static const std::string why = cudnn_mismatch(CUDNN_VERSION, static_cast<long>(cudnnGetVersion()));
  return why;
}

}  // namespace study
