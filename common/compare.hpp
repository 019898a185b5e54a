// Comparison of a GPU result with the CPU reference. NaN or Inf in the result never passes.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace study {

struct Comparison {
  double max_abs = 0;   // max |got - ref| over finite elements
  double rel_l2 = 0;    // ||got - ref|| / ||ref||
  std::size_t nonfinite = 0;
  std::size_t worst_index = 0;
  bool ok = false;
  std::string summary() const;
};

// fp16 outputs: rel L2 <= 5e-3 unless a version's NOTES.md justifies more.
constexpr double kFp16RelTol = 5e-3;

Comparison compare(const std::vector<float>& got, const std::vector<float>& ref,
                   double rel_tol = kFp16RelTol);

}  // namespace study
