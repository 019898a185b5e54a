// Inputs, device buffers and the reference check, shared by the MLP bench and test.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "buffer.hpp"
#include "mlp/mlp.hpp"

namespace mlp {

// Weight scale of the random inputs. Timm: timm's init (std 0.02), realistic values, where
// the MLP branch is 10-45% of y next to the residual. Unit: std 1/sqrt(fan_in), so fc1's
// outputs are ~N(0, 1) and GELU is exercised over its whole curve, and the branch is about as
// large as the residual (a wrong branch cannot hide behind x). Biases are N(0, 0.1) in both:
// larger than timm's trained-from-zero start, so a dropped or misplaced bias fails the check.
enum class WeightScale { Timm, Unit };

// x ~ N(0, 1); everything rounded to fp16 so the reference sees exactly what the GPU sees.
// residual: empty, x is the residual (Args::residual null); else [rows, hidden], passed apart.
struct HostInputs {
  std::vector<float> x, fc1_w, fc1_b, fc2_w, fc2_b, residual;
};
HostInputs make_inputs(const Problem& p, std::uint64_t seed, WeightScale scale = WeightScale::Timm);
// Gives `in` a residual stream of its own, ~ N(0, 1) and independent of x, as in an encoder
// block (where the MLP's input is LN2's output and the residual the stream before LN2).
void add_residual(const Problem& p, HostInputs& in, std::uint64_t seed);

struct DeviceProblem {
  study::DeviceBuffer<__half> x, fc1_w, fc1_b, fc2_w, fc2_b, y, h, residual;  // residual may be empty
  DeviceProblem(const Problem& p, const HostInputs& in);
  Args args(study::Gemm& gemm) const;
};

// The CPU reference costs 4 * rows * hidden * mlp_hidden flops in double (50432 x 768 x 3072
// would take minutes), and rows are independent: above kFullCheckRows rows only kSampleRows
// rows, spread evenly with the first and last included, are compared. Every element of y
// is still checked for NaN (the poison) and Inf.
constexpr int kFullCheckRows = 256;
constexpr int kSampleRows = 64;
std::vector<int> checked_rows(int rows);

struct CheckResult {
  study::Comparison cmp;  // over the checked rows; nonfinite counts the whole of y
  std::string what;       // which rows were compared, for the CSV note and test messages
};

// Poisons h and y with NaN, runs the version once, copies y back and compares it with
// ref::mlp (with in.residual when given) within the version's rel_tol. A version whose output is not the MLP (gemm_only)
// is only checked to run and leave no NaN.
CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                          DeviceProblem& dev, study::Gemm& gemm);

}  // namespace mlp
