// Inputs, device buffers and the reference check, shared by the MLP bench and test.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "harness/buffer.hpp"
#include "harness/memory.hpp"
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

// An FP8 version's inputs besides the fp16 ones (mlp.hpp, Fp8Args), made offline: the weights
// quantized with the version's scaling, and static scales from a calibration batch of
// kCalibrationRows rows of fresh N(0, 1) x (not the checked or timed x): amax of x, and of
// GELU(fc1(x)) through cuBLASLt's fp16 GEMM, each times kCalibrationMargin.
constexpr int kCalibrationRows = 4096;
constexpr std::uint64_t kCalibrationSeed = 0xca1b;
struct Fp8Inputs {
  study::fp8::Weight fc1_w, fc2_w;
  study::fp8::ActivationScale x_scale, h_scale;
  study::DeviceBuffer<study::fp8::e4m3> x8;
  study::Fp8Gemm gemm;
  Fp8Args args;
};

struct DeviceProblem {
  study::DeviceBuffer<__half> x, fc1_w, fc1_b, fc2_w, fc2_b, y, h, residual;  // residual may be empty
  std::unique_ptr<Fp8Inputs> fp8;  // an FP8 version's (prepare_fp8)
  DeviceProblem(const Problem& p, const HostInputs& in);
  // Quantizes the weights with v's scaling and calibrates the scales (once; again only when the
  // scaling changes). Versions that are not FP8 need nothing.
  void prepare_fp8(const Version& v, const Problem& p, study::Gemm& gemm);
  Args args(study::Gemm& gemm) const;
};

// What the check accepts (docs/method.md, "Tolerances per family", says why): the version's
// rel L2 and, element by element, |y - ref| <= kAtol + kRtol |ref|. h is stored in fp16
// between the GEMMs, so y carries that rounding, spread over fc2's sum, besides its own.
constexpr double kAtol = 5e-3;
constexpr double kRtol = 2e-3;
// FP8 versions, element by element: the branch's error is ~5% of its RMS (mlp.hpp, kFp8RelTol),
// at most ~0.07 with unit-scale weights; 0.5 is ~7 of those, the largest of a few million
// Gaussian errors staying under 5.5. A wrong row or column misses by the branch itself.
constexpr double kFp8Atol = 0.5;
constexpr double kFp8Rtol = 0.05;
study::Tolerance tolerance(const Version& v);

// The CPU reference costs 4 * rows * hidden * mlp_hidden flops in double (50432 x 768 x 3072
// would take minutes), and rows are independent: above kFullCheckRows rows only kSampleRows
// rows, spread evenly with the first and last included, are compared with it. Every row is
// then compared with gpu_reference(), which must itself match the CPU reference on those
// sampled rows.
constexpr int kFullCheckRows = 256;
constexpr int kSampleRows = 64;
std::vector<int> checked_rows(int rows);

// The reference on the GPU, for every row: plain kernels, one thread per output element, sums
// in double and fp32 storage as ref::linear has them, over the device problem's fp16 inputs
// (what the version read). mlp: ref::mlp with the device problem's residual (or x); else
// the two plain GEMMs of gemm_only. Runs kGpuReferenceRows rows at a time; returns
// [rows, hidden] on the host.
constexpr int kGpuReferenceRows = 4096;
std::vector<float> gpu_reference(const Problem& p, const DeviceProblem& dev, bool mlp);

// Bytes the bench holds at its peak for p (checked against free memory before any input is
// built): device inputs, y, h, the GEMM workspace and, with check, the GPU reference's
// buffers; host inputs in fp32 with their fp16 staging copies and, with check, y copied back
// and the GPU reference's output.
study::MemoryNeed memory_need(const Problem& p, bool check, std::size_t workspace_bytes);

struct CheckResult {
  study::Comparison cmp;  // over every row (against the GPU reference when rows were sampled)
  std::string what;       // which rows were compared, for the CSV note and test messages
};

// Poisons h and y with NaN (prepares an FP8 version's inputs first), runs the version once, copies y back and compares it with its
// reference within tolerance(v): ref::mlp (with in.residual when given), or the two plain
// GEMMs for a version whose output is not the MLP (gemm_only); sampled rows on the CPU and,
// above kFullCheckRows rows, every row against gpu_reference().
CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                          DeviceProblem& dev, study::Gemm& gemm);

}  // namespace mlp
