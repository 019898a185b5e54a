// Version lookup by name, shared by every family's registry.
#pragma once
#include <string>
#include <vector>
#include "harness/check.hpp"

namespace study {

// The version named `name`; otherwise StudyError(Usage) listing the family's known versions.
template <typename Version>
const Version& find_by_name(const std::vector<Version>& all, const std::string& name,
                            const std::string& family) {
  std::string known;
  for (const auto& v : all) {
    if (name == v.name) return v;
    known += (known.empty() ? "" : ", ") + std::string(v.name);
  }
  throw StudyError(ErrorKind::Usage, "unknown " + family + " version '" + name + "' (known: " + known + ")");
}

}  // namespace study
