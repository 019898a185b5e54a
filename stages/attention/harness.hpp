// Inputs, device buffers and the reference check, shared by the attention bench and test.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include "attention/attention.hpp"
#include "harness/buffer.hpp"
#include "harness/compare.hpp"
#include "harness/memory.hpp"

namespace attention {

enum class Inputs {
  Normal,   // q, k, v ~ N(0, 1): scaled scores of order 1, a spread-out softmax
  LargeQK,  // q, k ~ U(8, 16), v ~ N(0, 1): raw scores near 10^4, a peaked softmax; exp()
            // without the max subtracted overflows and fp16 score sums lose whole units
};

// Random packed QKV [batch*tokens, 3*heads*head_dim], rounded to fp16 so the reference sees
// exactly what the GPU sees.
struct HostInputs {
  std::vector<float> qkv;
};
HostInputs make_inputs(const Problem& p, std::uint64_t seed, Inputs kind = Inputs::Normal);

struct DeviceProblem {
  study::DeviceBuffer<__half> qkv, out;
  DeviceProblem(const Problem& p, const HostInputs& in);
  Args args() const { return {qkv.get(), out.get()}; }
};

// The CPU reference costs 4 * tokens^2 * head_dim flops per (batch, head) pair (138 GFLOP at
// batch 32, 16 heads, 1025 tokens: minutes). Every pair is compared when all of them cost at
// most this budget; above it, a sample: the first and the last pair (they catch offsets that
// run off either end) plus random ones up to the budget, at least 3 in all. Each sampled pair
// runs the unchanged reference on its slice of QKV (batch 1, heads 1).
constexpr double kReferenceBudgetFlops = 1.5e9;

// What the check accepts (docs/method.md, "Tolerances per family", says why): rel L2 5e-3 and,
// element by element, |out - ref| <= 2e-3 + 2e-3 |ref|. Versions that round the softmax
// probabilities to fp16 before P V carry that rounding besides the output's.
constexpr study::Tolerance kTolerance{study::kFp16RelTol, 2e-3, 2e-3};

std::vector<std::pair<int, int>> check_pairs(const Problem& p, std::uint64_t seed,
                                             double budget_flops = kReferenceBudgetFlops);

// The reference on the GPU, for every (batch, head) pair: one block per query row, scores and
// softmax in double as ref::attention has them (scores kept in a global scratch of
// kGpuReferenceScores doubles, queries taken that many at a time), over the device problem's
// fp16 QKV (what the version read). Returns out [batch*tokens, heads*head_dim] on the host.
constexpr double kGpuReferenceScores = 32.0 * (1 << 20);
std::vector<float> gpu_reference(const Problem& p, const DeviceProblem& dev);

// Bytes the bench holds at its peak for p (checked against free memory before any input is
// built): device QKV and out and, with check, the GPU reference's output and scratch; host QKV
// in fp32 with its fp16 staging copy and, with check, out copied back and the GPU reference's.
study::MemoryNeed memory_need(const Problem& p, bool check);

struct CheckResult {
  study::Comparison cmp;  // over every output element when the pairs were sampled (against the
                          // GPU reference), else over the compared pairs
  int pairs_checked = 0;  // against the CPU reference
  int pairs_total = 0;
  bool gpu_checked = false;  // every pair against the GPU reference
  std::string summary() const;
};

// Poisons out, runs the version once, and compares the pairs of check_pairs(p, seed) with the
// CPU reference; when those are a sample, every pair with gpu_reference(), which must itself
// match the CPU reference on the sampled pairs.
CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                          DeviceProblem& dev, std::uint64_t seed);

}  // namespace attention
