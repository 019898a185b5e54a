// Inputs, device buffers and the reference check, shared by the patch-embedding bench and
// test (not by the encoder, which brings its own weights and activations).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "gemm/gemm.hpp"
#include "harness/buffer.hpp"
#include "harness/compare.hpp"
#include "harness/memory.hpp"
#include "harness/streams.hpp"
#include "patch_embed/patch_embed.hpp"

namespace patch_embed {

// Random images in [-1, 1] (normalized pixels) and weights at timm's scale, with a bias, cls
// token and position embedding that are not zero, all rounded to fp16 so the reference sees
// exactly what the GPU sees.
struct HostInputs {
  std::vector<float> images, conv_w, conv_b, cls_token, pos_embed;
};
HostInputs make_inputs(const Problem& p, std::uint64_t seed);

// Everything one version needs on the device: inputs, output, its scratch, its streams and,
// for the GEMM version, a cuBLASLt layer. Created outside timing.
struct DeviceProblem {
  study::DeviceBuffer<__half> images, conv_w, conv_b, cls_token, pos_embed, out;
  study::DeviceBuffer<char> scratch;
  std::unique_ptr<study::StreamSet> streams;
  std::unique_ptr<study::Gemm> gemm;
  DeviceProblem(const Problem& p, const Version& v, const HostInputs& in);
  Args args(Timeline* timeline = nullptr) const;
};

// What the check accepts (docs/method.md, "Tolerances per family", says why): rel L2 5e-3 and,
// element by element, |out - ref| <= 5e-3 + 2e-3 |ref|. The GEMM versions round the
// convolution (+ bias) to fp16 before the position embedding is added, so an output element
// carries two roundings, the first of a value that can be larger than the output.
constexpr study::Tolerance kTolerance{study::kFp16RelTol, 5e-3, 2e-3};

// The reference on the GPU, for every image: one thread per output element, the convolution
// summed in double as ref::patch_embed has it, over the device problem's fp16 inputs (what the
// version read); images taken kGpuReferenceElems output elements at a time. Returns
// [batch * tokens, hidden] on the host.
constexpr double kGpuReferenceElems = 64.0 * (1 << 20);
std::vector<float> gpu_reference(const Problem& p, const DeviceProblem& dev);

// Bytes the bench holds at its peak for p and version v (checked against free memory before
// any input is built): device inputs, output, v's scratch and, with check, the GPU reference's
// output; host inputs in fp32 with their fp16 staging copy, the routine's pinned images and
// output (cpu_baseline: its fp32 output instead) and, with check, the output copied back and
// the GPU reference's.
study::MemoryNeed memory_need(const Problem& p, const Version& v, bool check);

struct CheckResult {
  study::Comparison cmp;    // over every image when the images were sampled (against the GPU
                            // reference), else over the images checked against the CPU one
  int images_checked = 0;   // against the CPU reference
  int images_total = 0;
  bool gpu_checked = false;  // every image against the GPU reference
  std::size_t nonfinite = 0;  // NaN/Inf anywhere in the output (every image is scanned)
  bool ok() const { return cmp.ok && nonfinite == 0; }
  std::string summary() const;
};

// Poisons the output (NaN), runs the version once on the default stream, and compares with
// ref::patch_embed: every image when there are at most 4, else the first and the last (the
// reference runs in double on the CPU, minutes at batch 256) and then every image with
// gpu_reference(), which must itself match the CPU reference on those two; the whole output
// is scanned for NaN and Inf.
CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in, DeviceProblem& dev);

}  // namespace patch_embed
