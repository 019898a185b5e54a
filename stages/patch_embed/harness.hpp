// Inputs, device buffers and the reference check, shared by the patch-embedding bench and
// test (not by the encoder, which brings its own weights and activations).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "buffer.hpp"
#include "compare.hpp"
#include "gemm.hpp"
#include "patch_embed/patch_embed.hpp"
#include "streams.hpp"

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

struct CheckResult {
  study::Comparison cmp;    // over the images checked against the reference
  int images_checked = 0;
  int images_total = 0;
  std::size_t nonfinite = 0;  // NaN/Inf anywhere in the output (every image is scanned)
  bool ok() const { return cmp.ok && nonfinite == 0; }
  std::string summary() const;
};

// Poisons the output (NaN), runs the version once on the default stream, and compares with
// ref::patch_embed: every image when there are at most 4, else the first and the last (the
// reference runs in double on the CPU, minutes at batch 256), while the whole output is
// scanned for NaN and Inf.
CheckResult run_and_check(const Version& v, const Problem& p, const HostInputs& in, DeviceProblem& dev);

}  // namespace patch_embed
