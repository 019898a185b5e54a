// A second GEMM layer, on CUTLASS's Hopper kernels (warp-specialized, TMA, persistent; sm_90a),
// for the encoder's four GEMMs with their epilogues fused through CUTLASS's epilogue visitor
// trees: the same contract as study::Gemm (gemm.hpp),
//   row-major Y[m, n] = act(X[m, k] W^T + bias[n]) (+ residual[m, n]),
// W in PyTorch Linear layout [n, k]; fp16 storage, fp32 accumulation. act is none, GELU in its
// tanh form (cuBLASLt's) computed in fp32 or in fp16 pairs, or GELU in its erf form (timm's
// default). The bias is required.
//
// Each (tile, cluster, schedule, tile scheduler) is its own compiled kernel
// (cutlass_gemm_kernels.cuh); the raster order and swizzle are run-time arguments of the tile
// scheduler. The first call of a shape times every compiled kernel x raster x swizzle on the
// caller's operands (L2
// flushed before each run, as a forward finds each layer's weights) and keeps the fastest; the
// choice is cached in memory and on disk (CutlassCache below: one line per GPU, shape and
// epilogue), so a later process reuses it without searching. A search cannot run
// inside a CUDA graph capture: the caller runs each shape once eagerly first (the encoder does).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include "gemm/fp8.hpp"
#include "gemm/gemm.hpp"

namespace study::cutlass_gemm {

// GeluTanhF16: the tanh form with the epilogue (bias add and GELU) in fp16 pairs, one
// tanh.approx.f16x2 per two outputs instead of one tanh.approx.f32 per output.
enum class Activation { None, GeluTanh, GeluErf, GeluTanhF16, GeluErfFit };
// Every activation with the name the search cache and the rows spell it with (a new activation:
// its enumerator, this line, its functor in cutlass_gemm_kernels.cuh and its kernel list).
struct ActivationName {
  Activation act;
  const char* name;
};
inline constexpr ActivationName kActivations[] = {{Activation::None, "none"},
                                                  {Activation::GeluTanh, "gelu_tanh"},
                                                  {Activation::GeluErf, "gelu_erf"},
                                                  {Activation::GeluTanhF16, "gelu_tanh_f16"},
                                                  {Activation::GeluErfFit, "gelu_erf_fit"}};
const char* activation_name(Activation a);

// A LayerNorm folded into the GEMM that follows it, y = LN(x) W^T + b with LN(x) = (x - mu) rstd
// gamma + beta: with W' = W diag(gamma) (fp16), colsum[n] = sum_k W'[n, k] and bias' = b + W beta
// (fp32; fold_layernorm below), y = rstd[m] (x W'^T - mu[m] colsum[n]) + bias'[n]. The GEMM reads
// the un-normalized x and takes the row statistics mu, rstd (fp32, one pass over x) and the two
// per-column vectors in its epilogue: the LayerNorm's output is never written.
struct LnFold {
  const float* row_mean = nullptr;  // [m]
  const float* row_rstd = nullptr;  // [m]
  const float* col_sum = nullptr;   // [n]
  const float* col_bias = nullptr;  // [n]: bias' (GemmOperands::bias is unused)
};

// Empty when this build has CUTLASS kernels that run on this GPU; otherwise why not.
std::string unavailable();

// What the search keeps for one shape and epilogue: which compiled kernel, and the tile
// scheduler's raster order (0: along M, 1: along N) and maximum swizzle.
struct Choice {
  std::string kernel;  // e.g. "128x256x64_c2x1_coop"
  int raster = 0;
  int swizzle = 1;
  float us = 0.f;  // its median time when it was chosen
};

// The search's key: the GPU, the shape, the epilogue and whether a residual is added.
struct Key {
  std::string gpu;  // device name and SM count, e.g. "NVIDIA H200/132"
  int m = 0, n = 0, k = 0;
  Activation act = Activation::None;
  bool residual = false;
  bool ln = false;  // a LayerNorm folded in (LnFold)
  bool fp8 = false;  // E4M3 operands (run_fp8)
  bool e4m3_out = false;  // and an E4M3 output (Fp8Operands::y8)
  bool cublaslt = false;  // cuBLASLt was a candidate too (RunOptions::cublaslt)
  // Which kernels the search chose among (8 hex digits hashing their names, set by the layer): a
  // build with other kernels compiled searches again instead of reusing a choice made without them.
  std::string candidates;
  bool operator<(const Key& o) const;
};

// The on-disk record of choices: a tab-separated text file, one choice per line
//   gpu  m  n  k  activation  residual  kernel  raster  swizzle  us  candidates
// (activation prefixed "ln_" for the LayerNorm-folded kernels and "fp8_" for the FP8 ones, suffixed "_e4m3" for an E4M3
// output and "+cublaslt" when cuBLASLt was a candidate; kernel "cublaslt" when cuBLASLt won).
// Lines that do not parse, and choices made among other candidates than this build's, are
// ignored (a rebuild with other kernels searches again); a later line for the same key wins.
// A key missing from memory is looked for in the file again before the search runs: another
// process (a sweep's next bench, its kept anchor process) may have searched it since this one
// read the file, and a sitting should run one choice per shape, not one per process.
// With $STUDY_CUTLASS_SEARCH_LOG set to a file, a search also appends every candidate it timed
// there, in the same line format (the runners-up, for the NOTES): the first sweep, then the
// finalists' rounds (run() below).
class CutlassCache {
 public:
  // The file: $STUDY_CUTLASS_CACHE, else $XDG_CACHE_HOME/vit-cuda-study/cutlass_gemm.tsv, else
  // ~/.cache/vit-cuda-study/cutlass_gemm.tsv.
  static std::string default_path();
  explicit CutlassCache(std::string path);
  // The choice for key: from memory, else from lines appended to the file since it was read
  // (those add keys; they never replace one this process holds).
  std::optional<Choice> find(const Key& key);
  // Adds the choice to memory and appends it to the file; a file that cannot be written costs
  // only the reuse (one warning on stderr), never the run.
  void store(const Key& key, const Choice& choice);
  const std::string& path() const { return path_; }

  static std::string format_line(const Key& key, const Choice& choice);
  static bool parse_line(const std::string& line, Key& key, Choice& choice);

 private:
  std::string path_;
  std::map<Key, Choice> choices_;
  void read_new_keys();
  bool warned_ = false;
};

// Runs the GEMM on `stream` with the kernel the search chose for this shape (searching first
// when neither memory nor the disk cache has a choice). The search times every candidate once
// (5 runs, median), then the six fastest kernels again (each in its fastest configuration), in
// turns, and keeps the fastest of those: at 50432 rows the first sweep's times drift by ~10% as
// the GPU heats up and throttles, which would otherwise favour whichever kernel ran first.
// Throws StudyError(Usage) for shapes no compiled kernel can run (k or n not a multiple of 8,
// misaligned pointers), StudyError(Library) when CUTLASS is unavailable, and StudyError(Usage)
// when a search would run inside a capture.
struct RunOptions {
  // Launch with programmatic dependent launch, so that the kernel's prologue (barriers, TMA
  // descriptors) overlaps the tail of the previous kernel on the stream; it waits for that kernel
  // (griddepcontrol.wait) before its first read. The search itself times plain launches.
  bool pdl = false;
  // When set, cuBLASLt (this Gemm: its plans and workspace, with the same fused epilogue) is one
  // more candidate of the search, chosen where it is faster (small M, where its split-K kernels
  // fill the GPU), and runs through this Gemm. Not for erf GELU, which cuBLASLt has no epilogue
  // for: the CUTLASS kernels alone are searched then.
  Gemm* cublaslt = nullptr;
  // The few-rows split-K kernels (small_m.cu: every row of a 224 px image in one tile, K split
  // over a thread-block cluster that adds its partial tiles in shared memory) as more candidates,
  // for bias, bias and residual, and the exact GELUs: they win where M is a few hundred rows.
  bool small_m = false;
};
void run(const GemmShape& s, Activation act, const GemmOperands& op, cudaStream_t stream, const RunOptions& opt = {});

// run() with a LayerNorm folded in (LnFold): act None or GeluTanh, no residual; op.bias is not
// read (ln.col_bias is the bias). Searched and cached like run(), under its own key; CUTLASS
// kernels only (opt.cublaslt must be null).
void run_ln_folded(const GemmShape& s, Activation act, const GemmOperands& op, const LnFold& ln, cudaStream_t stream,
                   const RunOptions& opt = {});

// The folding, on the device, stream-ordered (ln_fold.cu): from a Linear's w [n, k] and b [n] and
// the LayerNorm before it (gamma, beta [k]), w_folded = w diag(gamma) (fp16), col_sum[n] = the
// row sums of w_folded (fp32, from the rounded fp16 values the GEMM multiplies), col_bias = b +
// w beta (fp32). Once per weight set.
void fold_layernorm(const __half* w, const __half* b, const __half* gamma, const __half* beta, int n, int k,
                    __half* w_folded, float* col_sum, float* col_bias, cudaStream_t stream);
// Per-row mean and 1 / sqrt(variance + eps) of x [rows, cols] (fp32, two passes over the row held
// in registers: cols <= 1024 and a multiple of 8). One pass over x per forward and LayerNorm.
void row_stats(const __half* x, int rows, int cols, float eps, float* mean, float* rstd, cudaStream_t stream);

// FP8: the contract of study::Fp8Gemm (gemm/fp8.hpp), y = sx sw (X8 W8^T) + bias (+ residual)
// in fp16 (Epilogue::Bias with op.y), saturate((...) * y_inv_scale) in E4M3 (Epilogue::Bias with
// op.y8: an FP8 attention's input), or saturate(gelu_tanh(...) * y_inv_scale) in E4M3
// (Epilogue::GeluBias with op.y8), on CUTLASS's E4M3 Hopper kernels (fp32 accumulation, fast: as
// cuBLASLt's), per tensor scales only (op.w->scaling Tensor). Searched and cached like run(), under
// its own key ("fp8_none", "fp8_none_e4m3", "fp8_gelu_tanh_e4m3"); with opt.cublaslt, cuBLASLt's
// FP8 GEMM (that Fp8Gemm) is one more candidate and runs where it is faster. Throws
// StudyError(Usage) for a combination no kernel has (per-channel weights, an fp16 GELU output,
// E4M3 with a residual, k or n not a multiple of 16, misaligned pointers), StudyError(Library)
// when CUTLASS is unavailable.
struct Fp8RunOptions {
  bool pdl = false;
  Fp8Gemm* cublaslt = nullptr;
};
void run_fp8(const GemmShape& s, Epilogue e, const Fp8Operands& op, cudaStream_t stream,
             const Fp8RunOptions& opt = {});

// Runs one named compiled kernel (kernel_names(), small_m_kernel_names()) with the choice's raster order and swizzle
// (Choice::us unused), without the search: what the GPU suite uses to check every kernel.
// Throws StudyError(Usage) for an unknown name or a shape that kernel cannot run. With `ln`, the
// LayerNorm-folded kernel of that name.
void run_kernel(const Choice& choice, const GemmShape& s, Activation act, const GemmOperands& op, cudaStream_t stream,
                const LnFold* ln = nullptr);

// The choices this process has used on the current device, one line each ("6304x3072x768
// gelu_tanh: 128x256x64_c2x1_coop raster N swizzle 2, 101.2 us (searched)" or "(cached)"), for a
// row's note; empty when the process has not used the layer there.
std::vector<std::string> choices();

// The names of one epilogue's compiled kernels (empty without CUTLASS): each epilogue compiles
// its own tiles (cutlass_gemm_kernels.cuh). residual: bias and the residual (act None only).
std::vector<std::string> kernel_names(Activation act, bool residual = false);
// The names of the few-rows kernels of one epilogue (RunOptions::small_m), which run_kernel runs
// too: "small_m_128_s6" is a 256 x 128 tile with K split over 6 CTAs. Empty for the tanh forms.
std::vector<std::string> small_m_kernel_names(Activation act, bool residual = false);
// The names of the LayerNorm-folded kernels of one activation (None or GeluTanh).
std::vector<std::string> ln_kernel_names(Activation act);
// The names of the FP8 kernels of one epilogue (Bias, GeluBias), residual (Bias only) and output
// (GeluBias: E4M3 only).
std::vector<std::string> fp8_kernel_names(Epilogue e, bool residual, bool e4m3_out);
// run_fp8 with one named FP8 kernel (fp8_kernel_names()), without the search: the GPU suite's
// check of every kernel.
void run_fp8_kernel(const Choice& choice, const GemmShape& s, Epilogue e, const Fp8Operands& op, cudaStream_t stream);

}  // namespace study::cutlass_gemm
