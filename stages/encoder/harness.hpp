// Inputs, weights and the reference check of the encoder, shared by its bench and its test.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "encoder/session.hpp"
#include "harness/compare.hpp"
#include "reference.hpp"

namespace encoder {

// Logits of an fp16 forward against the CPU reference: fp16 activations through every block
// (the reference keeps fp32 storage and double sums) and the tanh GELU of cuBLASLt's epilogue
// give about 2e-3 on random timm-scale weights; 1e-2 is the bar a parity check with timm's own
// fp16 forward uses too (stages/encoder/NOTES.md).
constexpr double kLogitsRelTol = 1e-2;
// And element by element, |logit - ref| <= atol + 1e-2 |ref| with atol 5e-2 of the reference
// logits' RMS: the error of a logit scales with the logits (~0.5 with random weights, several
// with trained ones); at the rel L2 bar of 1e-2 it is 1e-2 of their RMS on average and ~3x
// that at worst over 1000 classes. One image's logits in another image's place, or a class
// shifted, miss by about the RMS itself.
study::Tolerance logits_tolerance(const std::vector<float>& ref);
// An FP8 forward's logits (blocks=fp8): every block's four GEMM inputs and weights carry
// E4M3's rounding (~2.6% RMS each), so the logits differ from the reference by several percent
// of their RMS on random weights; stages/encoder/e12_fp8/NOTES.md derives the bound and
// compares it with the runs. The real judge of FP8 is experiments/fp8_accuracy.py (top-1
// agreement with timm on hundreds of images).
constexpr double kFp8LogitsRelTol = 0.15;
study::Tolerance fp8_logits_tolerance(const std::vector<float>& ref);

// The residual stream after a block, and a block's intermediates, element by element: fp16
// storage and the fp16 LayerNorm and GEMM outputs before it leave ~1e-3 of the stream's RMS after
// two blocks. Element bound atol 1e-2 of the RMS + 1e-2 relative: one row of another token, an
// MLP or attention branch missing from a row, miss it by several times.
constexpr double kStreamRelTol = 5e-3;
study::Tolerance stream_tolerance(const std::vector<float>& ref);
// An FP8 forward's residual stream: the whole-output bound of its logits (fp8_logits_tolerance);
// each FP8 stage is judged on its own, at ~1e-2, by the encoder's test.
study::Tolerance fp8_stream_tolerance(const std::vector<float>& ref);

// The calibration batch of an FP8 forward: kCalibrationImages images drawn like make_images but
// from another seed than the checked and timed ones.
constexpr int kCalibrationImages = 32;
std::vector<float> calibration_images(int image_size, std::uint64_t seed);
// Calibrates w for c when c is an FP8 composition (nothing otherwise): `images` host [n, 3, S, S]
// (n = images.size() / image elements), or calibration_images(seed) when empty.
void calibrate_if_fp8(const Composition& c, const Problem& p, DeviceWeights& w, std::vector<float> images,
                      std::uint64_t seed);
// The same for a session's composition, at p's image size.
void calibrate_if_fp8(Session& s, const Problem& p, std::vector<float> images, std::uint64_t seed);

// Image i of a batch depends on (seed, i) alone, so the same image recurs at every batch size
// and its reference logits can be reused. Values N(0, 1), rounded to fp16.
std::vector<float> make_images(int batch, int image_size, std::uint64_t seed);

// Weights rounded to fp16 (what the GPU holds): timm-scale random ones for a seed, or a timm
// state dict saved as safetensors when `path` is not empty.
ref::VitWeights make_weights(const Problem& p, std::uint64_t seed, const std::string& path);
// Names the weights in the reference cache's keys: "seed=N" or the file's path and size.
std::string weights_id(std::uint64_t seed, const std::string& path);

// CPU logits of images `which` (indices into `images`, [n, 3, S, S]). A whole-ViT reference
// costs ~35 GFLOP per image, so with a non-empty cache_dir each image's logits are kept in a
// file keyed by model, image size, weights and image, and read back on the next call.
std::vector<std::vector<float>> reference_logits(const ref::VitWeights& w, const std::vector<float>& images,
                                                 const std::vector<int>& which, const std::string& weights,
                                                 std::uint64_t image_seed, const std::string& cache_dir);

}  // namespace encoder
