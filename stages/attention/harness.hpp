// Inputs, device buffers and the reference check, shared by the attention bench and test.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include "buffer.hpp"
#include "compare.hpp"
#include "attention/attention.hpp"

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

std::vector<std::pair<int, int>> check_pairs(const Problem& p, std::uint64_t seed,
                                             double budget_flops = kReferenceBudgetFlops);

struct CheckResult {
  study::Comparison cmp;  // over the output elements of the compared pairs
  int pairs_checked = 0;
  int pairs_total = 0;
  std::string summary() const;
};

// Poisons out, runs the version once, and compares the pairs of check_pairs(p, seed).
CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                          DeviceProblem& dev, std::uint64_t seed);

}  // namespace attention
