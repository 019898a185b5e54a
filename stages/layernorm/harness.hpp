// Inputs, device buffers and the reference check, shared by the LayerNorm bench and test.
#pragma once
#include <cstdint>
#include <vector>
#include "harness/buffer.hpp"
#include "harness/compare.hpp"
#include "harness/memory.hpp"
#include "layernorm/layernorm.hpp"

namespace layernorm {

// Random inputs shaped like ViT activations (normal, nonzero mean) and a nontrivial affine,
// all rounded to fp16 so the reference sees exactly what the GPU sees.
struct HostInputs {
  std::vector<float> x, gamma, beta;
};
HostInputs make_inputs(const Problem& p, std::uint64_t seed, float x_mean = 0.5f, float x_std = 1.f);

struct DeviceProblem {
  study::DeviceBuffer<__half> x, gamma, beta, y;
  explicit DeviceProblem(const HostInputs& in);
  Args args() const { return {x.get(), gamma.get(), beta.get(), y.get()}; }
};

// What the check accepts (docs/method.md, "Tolerances per family", says why): rel L2 5e-3 and, element by
// element, |y - ref| <= 1e-3 + 2e-3 |ref|. Every version computes in fp32 and rounds y to
// fp16 once, so each element's error is that rounding.
constexpr study::Tolerance kTolerance{study::kFp16RelTol, 1e-3, 2e-3};

// Bytes the bench holds at its peak for p (checked against free memory before any input is
// built): device x, y, gamma, beta; host x in fp32 and its fp16 staging copy, and with check
// the output copied back (fp16, then fp32) and the reference's output.
study::MemoryNeed memory_need(const Problem& p, bool check);

// Poisons y, runs the version once, and compares every element of y with the CPU reference.
study::Comparison run_and_check(const Version& v, const Problem& p, const HostInputs& in,
                                DeviceProblem& dev);

}  // namespace layernorm
