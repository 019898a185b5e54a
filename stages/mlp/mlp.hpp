// MLP family contract: y = r + fc2(GELU(fc1(x))), timm's Mlp plus the block's residual r.
// r is the MLP's own input x unless the caller gives another (in an encoder block x is LN2's
// output and r the stream before LN2).
// x, r, y: row-major [rows, hidden]; fc1_w [mlp_hidden, hidden], fc2_w [hidden, mlp_hidden]
// (PyTorch Linear layout); biases [mlp_hidden], [hidden]; fp16 storage, fp32 accumulation.
// h is the caller's [rows, mlp_hidden] scratch for the intermediate activation.
// Every version implements exactly this; bench, test and encoder swap versions by name.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "gemm/cutlass_gemm.hpp"
#include "gemm/fp8.hpp"
#include "gemm/gemm.hpp"
#include "harness/compare.hpp"
#include "harness/version.hpp"

namespace mlp {

struct Problem {
  int rows = 0;
  int hidden = 0;
  int mlp_hidden = 0;  // 4 * hidden in every ViT
};

// What an FP8 version (fp8_tensor) reads besides Args' fp16 tensors: the weights
// quantized offline, the static scales of its two GEMM inputs (calibrated on another batch:
// harness.hpp's DeviceProblem::prepare_fp8, or the encoder's calibration), an E4M3 buffer for x
// and the FP8 GEMM layer. The E4M3 intermediate h lives in Args::h's first bytes.
struct Fp8Args {
  const study::fp8::Weight* fc1_w = nullptr;
  const study::fp8::Weight* fc2_w = nullptr;
  const study::fp8::ActivationScale* x_scale = nullptr;
  const study::fp8::ActivationScale* h_scale = nullptr;
  study::fp8::e4m3* x8 = nullptr;  // [rows, hidden]
  bool x_quantized = false;        // x8 already holds x (the encoder's LayerNorm wrote it in E4M3)
  study::Fp8Gemm* gemm = nullptr;
};

struct Args {
  const __half* x;
  const __half* fc1_w;
  const __half* fc1_b;
  const __half* fc2_w;
  const __half* fc2_b;
  __half* y;
  __half* h;           // scratch [rows, mlp_hidden]
  study::Gemm* gemm;   // cuBLASLt handle, workspace and plan cache for this stream
  // [rows, hidden] added to the output, never the same buffer as y; null: x.
  const __half* residual = nullptr;
  // Launch the version's kernels with programmatic dependent launch where they support it (the
  // CUTLASS versions), so each kernel's prologue overlaps the previous kernel's tail.
  bool pdl = false;
  // FP8 versions only (required by them, ignored by the others).
  const Fp8Args* fp8 = nullptr;
};

// The residual a version adds: the caller's, or the MLP's own input.
inline const __half* residual_of(const Args& a) { return a.residual ? a.residual : a.x; }

// Tolerance of versions whose GELU is the tanh form (cuBLASLt's epilogue, our ping-pong
// kernel): fp16's plus the 2e-3 that fused_epilogue's NOTES.md derives for tanh vs erf.
constexpr double kTanhGeluRelTol = study::kFp16RelTol + 2e-3;

// Tolerance of the FP8 versions: y = r + branch, and the branch carries four E4M3 roundings (x,
// W1, h, W2: 2^-4 relative at most, ~2.6% RMS each), ~5% of the branch's RMS in all; with
// unit-scale weights the branch is as large as r, so ~4% of y. fp8_tensor's NOTES.md derives it
// and compares it with what the runs measured.
constexpr double kFp8RelTol = 0.08;

// The shared version record (common/harness/version.hpp) plus what only the MLP's check needs.
struct Version : study::VersionRecord<Problem, Args> {
  // Accepted rel L2 error against the exact-GELU reference; NOTES.md justifies anything above
  // fp16's default.
  double rel_tol = study::kFp16RelTol;
  // False for timing references whose output is not the MLP but the two plain GEMMs
  // y = (x W1^T) W2^T, without bias, GELU or residual (gemm_only, pingpong_gemm_only): they
  // are compared with that reference instead.
  bool computes_mlp = true;
  // FP8 versions: E4M3 GEMMs with weights quantized with this scaling (the caller prepares
  // Args::fp8); the rows' precision column says "fp8_e4m3".
  bool fp8 = false;
  study::fp8::Scaling scaling = study::fp8::Scaling::Tensor;
  const char* precision() const { return fp8 ? "fp8_e4m3" : "fp16"; }
};

// All versions in ladder order; find_version throws StudyError(Usage) for an unknown name.
const std::vector<Version>& versions();
const Version& find_version(const std::string& name);

// Fewest bytes any version must move: x in, y out, both weights and biases once. The
// intermediate h is not counted: a fused two-GEMM kernel could keep it on chip.
double bytes(const Problem& p);
// The two GEMMs (2 * rows * hidden * mlp_hidden each); bias, GELU and residual are noise.
double flops(const Problem& p);

// Checks every version shares: positive sizes.
std::string check_common(const Problem& p);

// The versions on the CUTLASS GEMM layer (cutlass_epilogue, cutlass_epilogue_erf,
// fastest_epilogue, half_gelu_epilogue): check_common, widths the layer's 16-byte rows allow, and
// a build and GPU with its kernels. Their launch: fc1 with bias and the given GELU (a GELU
// activation of the layer), fc2 with bias and the residual, on common/gemm/cutlass_gemm.hpp;
// with_cublaslt: a.gemm (cuBLASLt's fused epilogues) is one more candidate of each GEMM's search;
// small_m: so are the layer's few-rows split-K kernels (RunOptions::small_m).
std::string cutlass_supports(const Problem& p);
void cutlass_launch(const Problem& p, const Args& a, study::cutlass_gemm::Activation gelu, bool with_cublaslt,
                    cudaStream_t stream, bool small_m = false);

// The FP8 versions: check_common and widths of 16-byte FP8 rows (hidden a multiple of 16);
// their launch: x quantized (unless Args::fp8 says it already is), fc1 + bias + GELU (tanh) with
// an E4M3 output in h's scale, fc2 + bias + residual in fp16, both on study::Fp8Gemm. Throws
// StudyError(Usage) without Args::fp8.
std::string fp8_supports(const Problem& p);
void fp8_launch(const Problem& p, const Args& a, cudaStream_t stream);
// The same on the CUTLASS layer's FP8 kernels (fp8_cutlass), each GEMM searched per shape with
// Args::fp8's cuBLASLt FP8 GEMM one more candidate, launched with PDL when Args::pdl: fp8_supports
// and a build and GPU with the CUTLASS kernels.
std::string fp8_cutlass_supports(const Problem& p);
void fp8_cutlass_launch(const Problem& p, const Args& a, cudaStream_t stream);

}  // namespace mlp
