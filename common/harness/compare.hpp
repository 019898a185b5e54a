// Comparison of a GPU result with the CPU reference. NaN or Inf in the result never passes.
// Two criteria, both must hold: the relative L2 error over all elements (a bound on the
// error as a whole), and an element-wise bound |got - ref| <= atol + rtol * |ref| on every
// element, as torch.testing.assert_close has it (one wrong row among 50432 moves the relative
// L2 error by only ~sqrt(1/50432) of the output's scale, but misses its element bound).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace study {

// fp16 outputs: rel L2 <= 5e-3 unless a version's NOTES.md justifies more.
constexpr double kFp16RelTol = 5e-3;
// fp16 outputs of order 1 computed in fp32: rounding the output to fp16 errs by at most half
// an ulp, 2^-11 |y| (4.9e-4 |y|), one ulp where the fp32 value lands differently; rtol 2e-3 is
// twice that. atol is for elements near 0, where the fp32 arithmetic before the rounding
// dominates; families whose outputs carry more error (fp16 intermediates) set their own.
constexpr double kFp16Rtol = 2e-3;
constexpr double kFp16Atol = 1e-3;

struct Tolerance {
  double rel_l2 = kFp16RelTol;  // ||got - ref|| / ||ref||
  double atol = kFp16Atol;      // element-wise: |got - ref| <= atol + rtol * |ref|
  double rtol = kFp16Rtol;
};

// Two references that both sum in double and store fp32 (a CPU one and its GPU twin) agree to
// fp32 rounding: anything above this is a fault of one of them.
constexpr Tolerance kReferencesAgree{1e-5, 1e-5, 1e-5};

struct Comparison {
  double max_abs = 0;   // max |got - ref| over finite elements
  double rel_l2 = 0;    // ||got - ref|| / ||ref||
  std::size_t nonfinite = 0;
  std::size_t worst_index = 0;  // the first non-finite element, else the one of max_abs
  // Elements outside atol + rtol |ref| (non-finite ones not counted; a non-finite reference
  // element is), and the one furthest outside: its |got - ref| / (atol + rtol |ref|).
  std::size_t outside = 0;
  std::size_t worst_element = 0;
  double worst_ratio = 0;
  double worst_got = 0, worst_ref = 0;
  Tolerance tol;
  bool ok = false;
  std::string summary() const;
};

Comparison compare(const std::vector<float>& got, const std::vector<float>& ref, const Tolerance& tol = {});

// Root mean square of v (0 when empty), summed in double: the scale tolerances are set against.
double rms(const std::vector<float>& v);

// `got` against a GPU reference `gref` that covers every element, once the GPU reference itself
// agrees with the CPU reference `want` where the CPU computed it (`gref_sample`: gref gathered as
// want is). A disagreement there is a fault of the GPU reference, not of the version: it throws
// StudyError(Data) naming the family's `reference` ("MLP") and the sampled `unit` ("rows").
Comparison compare_via_gpu_reference(const std::vector<float>& got, const std::vector<float>& gref,
                                     const std::vector<float>& gref_sample, const std::vector<float>& want,
                                     const Tolerance& tol, const std::string& reference, const std::string& unit);

}  // namespace study
