// cuDNN error checks (only included by cuDNN versions).
#pragma once
#include <cudnn.h>
#include "check.hpp"

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
