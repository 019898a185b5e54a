// Argument checks shared by the reference's files (not part of its interface).
#pragma once
#include <cstddef>
#include <string>

#include "harness/check.hpp"

namespace ref::detail {

inline void expect_positive(const char* fn, const char* arg, long long v) {
  if (v <= 0)
    throw study::StudyError(study::ErrorKind::Usage,
                            std::string("ref::") + fn + ": " + arg + " must be positive, got " + std::to_string(v));
}

inline void expect_size(const char* fn, const char* arg, std::size_t got, std::size_t want) {
  if (got != want)
    throw study::StudyError(study::ErrorKind::Usage, std::string("ref::") + fn + ": " + arg + " has " +
                                                         std::to_string(got) + " elements, expected " +
                                                         std::to_string(want));
}

}  // namespace ref::detail
