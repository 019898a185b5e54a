// The FP8 recipe on the host, for tests that judge an FP8 stage against what it was fed: the
// GPU's own E4M3 inputs and scales, with each quantization done as the study's kernels do it
// (common/gemm/fp8.hpp), so that only the arithmetic before each rounding differs.
#pragma once
#include <vector>
#include "gemm/fp8.hpp"
#include "harness/compare.hpp"

namespace study::fp8 {

// E4M3 values (unscaled) of x * inv_scale: round to nearest, saturating, as the quantizing
// kernels and GEMM epilogues convert.
std::vector<float> quantized(const std::vector<float>& x, float inv_scale);
// W [n, k] as quantize_weight quantizes it (per tensor, or per row), dequantized: s * E4M3(w / s).
std::vector<float> dequantized_weight(const std::vector<float>& w, int n, int k, Scaling scaling);
// v * s for every element.
std::vector<float> scaled(std::vector<float> v, float s);
// n E4M3 values a kernel wrote (device), copied back as floats (unscaled).
std::vector<float> host_values(const e4m3* device, std::size_t n);
// The tanh GELU of cuBLASLt's GELU_BIAS epilogue.
float gelu_tanh(float x);

// An E4M3 stage output (unscaled values, up to 448) against the recipe: equal up to one E4M3 step
// where the GPU's arithmetic before the rounding put a value on the other side of a rounding
// boundary (a step is 2^-3 of the value at most), plus 1e-2 of the tensor's RMS for the values
// near zero, where that arithmetic's error is of the tensor's scale (fp16 P in the flash kernels,
// the epilogue's GELU): a few subnormal steps. Rel L2 at most 1e-2; an H100 measured 2.5e-3 to
// 5.8e-3 in the encoder's FP8 stages (vit_ti 176 px, vit_b 224 px).
study::Tolerance e4m3_stage_tolerance(const std::vector<float>& want);
// An fp16 output that adds a branch to a stream (y = stream + branch), judged on the branch
// (y - stream): the GEMM's fp32 sums against the reference's double ones, and y's fp16 rounding,
// an ulp of the stream element (2^-10 at |y| < 2: atol counts 2^-10 of the largest element of y)
// where the branch is ten times smaller. Rel L2 at most 1e-2; measured 8e-4 to 1.5e-3.
study::Tolerance branch_tolerance(const std::vector<float>& branch, const std::vector<float>& y);

}  // namespace study::fp8
