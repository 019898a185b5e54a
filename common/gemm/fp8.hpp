// FP8 (E4M3) for the study's inference GEMMs: the kernels that move fp16 tensors into E4M3 and
// the GEMM layer that multiplies them, on cuBLASLt.
//
// A quantized tensor is E4M3 values q and a dequantization scale s (fp32, on the device):
// the tensor is s * q. Weights are quantized offline, per tensor (s = amax / 448) or per output
// feature (one s per row of W [n, k]); activations with a static scale from a calibration batch
// (s = margin * amax / 448), so no kernel of the forward computes a scale. Conversions saturate
// at +-448 (E4M3's largest finite value): a value beyond the calibrated range is clamped, never
// NaN.
#pragma once
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "gemm/gemm.hpp"
#include "harness/buffer.hpp"

namespace study {
namespace fp8 {

using e4m3 = __nv_fp8_e4m3;
constexpr float kE4M3Max = 448.f;

// How a weight matrix is scaled: one scale, or one per output feature (row of W).
enum class Scaling { Tensor, Channel };
const char* scaling_name(Scaling s);

// A linear layer's weight W [n, k] in E4M3 with its scales (1 or n floats), on the device.
struct Weight {
  DeviceBuffer<e4m3> q;
  DeviceBuffer<float> scale;
  Scaling scaling = Scaling::Tensor;
};
// Quantizes W [n, k] (fp16, device) on `stream`: scales from its amax (per tensor or per row;
// an all-zero row gets scale 1), values rounded to nearest E4M3.
Weight quantize_weight(const __half* w, int n, int k, Scaling scaling, cudaStream_t stream);

// The margin of a static activation scale over the calibration batch's amax: the data served
// later reaches further than a calibration batch saw, and values past the range are clamped. A
// power of two leaves every E4M3 mantissa as it was; it costs one binade at the subnormal end.
constexpr float kCalibrationMargin = 2.f;

// A static activation scale on the device: scale = margin * amax / 448 and its inverse (the
// quantizing kernels multiply by the inverse). amax <= 0 (an all-zero calibration) gives 1.
struct ActivationScale {
  DeviceBuffer<float> values;  // {scale, 1 / scale}
  float host_scale = 1.f;
  ActivationScale() = default;
  ActivationScale(float amax, float margin);
  const float* scale() const { return values.get(); }
  const float* inv_scale() const { return values.get() + 1; }
};

// max |x| over n elements into *amax (device). *amax is not reset: the result is the maximum of
// its old value and this tensor's, so a calibration can gather several batches; zero it first.
void amax(const __half* x, long long n, float* amax, cudaStream_t stream);
// q = saturate(x * inv_scale) for n elements (n a multiple of 8, pointers 16-byte aligned).
void quantize(const __half* x, long long n, const float* inv_scale, e4m3* q, cudaStream_t stream);
// LayerNorm of each row of x [rows, hidden] (fp32 statistics, eps as the LayerNorm family's)
// written in E4M3: q = saturate((LN(x) * gamma + beta) * inv_scale). hidden a multiple of 8 and
// at most kLayerNormMaxHidden; the LN's fp16 output never exists.
constexpr int kLayerNormMaxHidden = 1024;
void layernorm_quantize(const __half* x, const __half* gamma, const __half* beta, int rows, int hidden, float eps,
                        const float* inv_scale, e4m3* q, cudaStream_t stream);
// Why this GPU cannot run cuBLASLt's FP8 GEMMs (compute capability below 8.9); empty: it can.
std::string unavailable();

// out[0..n) = *value: an activation's scalar scale as the per-row vector a per-channel GEMM takes.
void broadcast(const float* value, float* out, int n, cudaStream_t stream);

// E4M3 -> float on the host (tests and references).
float to_float(e4m3 v);

}  // namespace fp8

// Y[m, n] = sx * X8[m, k] (sw * W8[n, k])^T + bias (GELU-tanh'd for GeluBias) (+ residual),
// row-major as study::Gemm has it; fp32 accumulation (cuBLASLt's fast FP8 accumulation, as
// inference GEMMs use it). Output fp16 (y), or E4M3 (y8 = saturate(Y * y_inv_scale), the next
// GEMM's input; then no residual).
struct Fp8Operands {
  const fp8::e4m3* x = nullptr;
  const float* x_scale = nullptr;  // device scalar
  const fp8::Weight* w = nullptr;
  const __half* bias = nullptr;      // [n]: with the Bias and GeluBias epilogues only
  const __half* residual = nullptr;  // [m, n] fp16, added with beta = 1; fp16 output only
  __half* y = nullptr;               // fp16 output, or
  fp8::e4m3* y8 = nullptr;           // E4M3 output with
  const float* y_inv_scale = nullptr;
};

// One cuBLASLt handle, workspace and plan cache (per shape, epilogue, output type and scaling),
// as study::Gemm; a plan's algorithm is the fastest of the heuristic's top candidates, timed
// once on the first call (outside any capture). Not thread-safe; one per stream.
class Fp8Gemm {
 public:
  explicit Fp8Gemm(std::size_t workspace_bytes = std::size_t(32) << 20, int candidates = 8);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Epilogue None, Bias or GeluBias. Throws StudyError(Library) when cuBLASLt has no algorithm for
  // the combination (naming it), std::invalid_argument on a malformed call.
  void run(const GemmShape& s, Epilogue e, const Fp8Operands& op, cudaStream_t stream);
  // Why cuBLASLt has no algorithm for this combination (asked of its heuristic; nothing runs);
  // empty when it has one. For versions to say "unavailable here" instead of failing.
  std::string why_unsupported(const GemmShape& s, Epilogue e, bool fp8_out, fp8::Scaling scaling);
  // One line per plan: shape, epilogue, output, scaling and the chosen algorithm.
  std::vector<std::string> choices() const;

 private:
  struct Key {
    int m, n, k;
    Epilogue epilogue;
    bool residual, fp8_out;
    fp8::Scaling scaling;
    bool operator<(const Key& o) const;
  };
  struct Plan;
  std::unique_ptr<Plan> make_plan(const Key& key);
  static std::string describe(const Key& key);
  void set_pointers(Plan& plan, const Fp8Operands& op);
  void choose_algorithm(Plan& plan, const Key& key, const Fp8Operands& op, cudaStream_t stream);
  bool launch(Plan& plan, const cublasLtMatmulAlgo_t& algo, const Fp8Operands& op, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<char> workspace_;
  // Per-channel plans scale B (X) by an "outer vector" too, as cuBLASLt wants both operands in
  // one scale mode: x's scalar scale broadcast over the rows, grown to the largest m.
  DeviceBuffer<float> row_scale_;
  int candidates_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace study
