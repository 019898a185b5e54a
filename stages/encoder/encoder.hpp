// The whole ViT forward, composed from the families' versions: patch embedding (+ cls and
// position) -> `layers` encoder blocks -> final LayerNorm -> classifier head on the cls rows.
//   block: LN1 -> QKV GEMM (+bias) -> attention -> projection GEMM (+bias, +residual)
//          -> LN2 -> MLP (fc1 + bias + GELU, fc2 + bias + residual)
// Activations are row-major [batch*tokens, hidden] fp16, as every family's contract has them,
// so one family's output is the next one's input with no transposes.
//
// A ladder version (e1_library ... e6_best) is a named Composition: which version of each
// family, and which whole-forward techniques (buffer reuse, CUDA graph, streams, fusion).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <array>
#include <memory>
#include <string>
#include <vector>
#include "buffer.hpp"
#include "l2_prefetch.hpp"
#include "memory.hpp"
#include "vit_config.hpp"

namespace ref { struct VitWeights; }

namespace encoder {

struct Composition {
  std::string patch_embed, layernorm, attention, mlp;
  bool arena = true;            // false: a separate buffer for every intermediate of every layer
  bool graph = false;           // capture the forward once, replay it
  int streams = 1;              // the batch split over this many streams
  bool fused_residual = false;  // projection's residual in its GEMM epilogue (else an add kernel)
  bool cutlass_gemms = false;   // QKV and projection on the CUTLASS GEMM layer (else cuBLASLt)
  bool pdl = false;             // CUTLASS GEMMs launched with programmatic dependent launch
  bool ln_folded = false;       // LN1 and LN2 folded into the QKV and fc1 GEMMs (needs cutlass_gemms)
  bool cublaslt_candidates = false;  // the CUTLASS layer's search also times cuBLASLt, per shape
  bool split_gemms = false;     // ... and the layer's split kernels (stream-K, split-K), per shape
  // QKV, projection, fc1 and fc2 in FP8 E4M3 (common/fp8.hpp; the MLP version must be an FP8
  // one): weights quantized per tensor when the forward is set up, activations with the static
  // scales of the weights' Fp8Calibration; LayerNorms write E4M3, the residual stream stays fp16.
  bool fp8 = false;
  // With fp8: the attention writes the projection's E4M3 input itself (attention::Version::
  // launch_e4m3, with the projection input's static scale) instead of an fp16 output that one
  // more pass quantizes.
  bool attention_e4m3 = false;
  // Every block in one persistent kernel (persistent.hpp): its own GEMM and attention tiles,
  // LayerNorms in the GEMMs' prologues, grid barriers between phases; the layernorm, attention
  // and mlp versions then only serve the final LayerNorm (layernorm) or nothing.
  bool persistent = false;
  // The first half of the next block's weights (the head's after the last block) requested into
  // L2 by each block's second LayerNorm kernel (layernorm::Args::prefetch), so that the GEMMs
  // find those weights in L2 instead of DRAM (at batch 1 every GEMM waits on DRAM; e14's NOTES).
  bool l2_prefetch = false;
  // The row's version for a custom mix: "custom:pe=..,ln=..,attn=..,mlp=..[,reuse][,graph]
  // [,streams=N][,fused][,cutlass][,pdl][,lnfold][,cublaslt][,split][,fp8][,attn8][,persistent]
  // [,prefetch]", one fixed format.
  std::string describe() const;
};

struct Step {
  const char* name;
  const char* what;  // one line: what the step changes
  Composition composition;
};

// e1_library ... e15_fp8_attention_e4m3 in ladder order. The family versions of e6_best and the
// steps after it are resolved for this build and GPU by best_composition().
const std::vector<Step>& ladder();
// A ladder step, or "best"; throws StudyError(Usage) naming the known ones.
Composition find_step(const std::string& name);

// The fastest measured version of each family that this build and GPU can run, from a
// committed preference list (fastest first). `resolved` says, per family, which one was taken
// and what was passed over and why.
Composition best_composition(std::string* resolved = nullptr);
// e7_cutlass_gemms: best_composition() with QKV and projection on the CUTLASS GEMM layer and the
// MLP version cutlass_epilogue.
// e8_pdl: the same, with every CUTLASS GEMM launched with programmatic dependent launch;
// e9_ln_folded: e8 with both LayerNorms of each block folded into the GEMM after them;
// e10_fastest_gemms: e8 with cuBLASLt a candidate of every GEMM's search (the faster per shape);
// e11_split_gemms: e10 with the CUTLASS layer's split kernels candidates too (MLP split_epilogue).
Composition cutlass_composition(std::string* resolved = nullptr, bool pdl = false, bool ln_folded = false,
                                bool cublaslt_candidates = false, bool split_gemms = false);

// e12_fp8: e6_best with the four GEMMs of every block in FP8 (MLP version fp8_tensor);
// e15_fp8_attention_e4m3 (attention_e4m3): with the attention writing the projection's E4M3 input.
Composition fp8_composition(std::string* resolved = nullptr, bool attention_e4m3 = false);

// e13_persistent: e6_best with every block in the persistent kernel.
Composition persistent_composition(std::string* resolved = nullptr);

// e14_l2_prefetch: e10_fastest_gemms with the next block's weights prefetched into L2.
Composition prefetch_composition(std::string* resolved = nullptr);

// Why a composition cannot run in this build or on this GPU at all (empty: it can): the first
// component version that is unavailable, named.
std::string why_unavailable(const Composition& c);

struct Problem {
  study::ModelConfig model;
  int batch = 0;
  int image_size = 0;
  int num_classes = 1000;
  int tokens() const { return study::tokens_for_image(image_size); }
  long long rows() const { return static_cast<long long>(batch) * tokens(); }
};

// Positive sizes, image a multiple of 16, heads dividing hidden, and 32-bit row indexing.
std::string check_problem(const Problem& p);

// Per image: 24 T d^2 per block (QKV, projection, fc1, fc2) + 4 T^2 d (Q K^T, P V), patch
// embedding 2 P 768 d, head 2 d classes. ViT-B/16 at 224 px: 35.1 GFLOP.
double flops(const Problem& p);
// The floor of one forward: every weight once, images in, logits out (fp16).
double bytes(const Problem& p);
double weight_count(const Problem& p);
// Bytes the bench holds at its peak for p and c (checked against free memory before any input
// is built): device weights, images, logits, c's activations (one set, or one per layer
// without the arena), patch-embedding scratch and one GEMM workspace per stream; host weights
// in fp32 with their fp16 staging copy, images in fp32, fp16 and pinned. The CPU reference's
// one or two images are small beside them.
study::MemoryNeed memory_need(const Problem& p, const Composition& c);

// The static activation scales of an FP8 forward: per block, the amax of its four GEMM inputs
// (LN1's output, attention's output, LN2's output, GELU's output) over the images of a
// calibration forward in fp16 (calibrate_fp8). Each scale is kCalibrationMargin * amax / 448.
struct Fp8Calibration {
  enum Input { Ln1, Attention, Ln2, Gelu, kInputs };
  std::vector<std::array<float, kInputs>> amax;  // one entry per block
  int images = 0;                                // the calibration batch
};

// All weights in one device buffer (fp16), with a view per block. Uploaded once.
struct BlockView {
  const __half *ln1_g, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_g, *ln2_b, *fc1_w, *fc1_b,
      *fc2_w, *fc2_b;
};
class DeviceWeights {
 public:
  explicit DeviceWeights(const ref::VitWeights& w);
  const __half *patch_w, *patch_b, *cls_token, *pos_embed, *norm_g, *norm_b, *head_w, *head_b;
  std::vector<BlockView> blocks;
  // Set by calibrate_fp8 before an FP8 forward is made (which refuses weights without it).
  Fp8Calibration fp8_calibration;
  std::size_t bytes() const { return buffer_.bytes(); }
  // The weights packed in order: block i's as one byte range, and the final LayerNorm's with the
  // head's (what an L2 prefetch of the next block asks for).
  study::ByteRange block_span(int i) const;
  study::ByteRange head_span() const;

 private:
  study::DeviceBuffer<__half> buffer_;
};

// Per-component device time of one eager forward, microseconds, summed over layers.
struct Breakdown {
  std::vector<std::pair<std::string, double>> us;  // in forward order
};

// One composition set up for one problem: every component's version resolved and asked
// whether it computes its exact problem (a refusal throws StudyError(Usage) naming the
// component), buffers allocated, plans made by a first eager run, the graph captured.
class Forward {
 public:
  Forward(const Problem& p, const Composition& c, const DeviceWeights& w);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  // images [batch, 3, S, S] -> logits [batch, classes]; enqueued on `stream` (a graph replay
  // when the composition captures one: the graph is made on the first call for these pointers).
  void run(const __half* images, __half* logits, cudaStream_t stream);
  // The same forward without the graph (kernel by kernel), for the graph's bit-identity test.
  void run_eager(const __half* images, __half* logits, cudaStream_t stream);
  // Events around every component of one eager forward (stream 0's share of the batch).
  Breakdown breakdown(const __half* images, __half* logits, cudaStream_t stream);
  // Device bytes of activations (the arena, or every layer's buffers) and scratch.
  std::size_t activation_bytes() const;
  // Whether a whole forward can be captured in a CUDA graph (no component syncs the host).
  bool capturable() const;
  // One eager forward that records the amax of every block's four GEMM inputs (an fp16
  // composition whose MLP writes GELU's output to h, one stream, nothing folded).
  Fp8Calibration observe_gemm_inputs(const __half* images, __half* logits, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Fills w.fp8_calibration from `images` (device, [p.batch, 3, S, S]; p.batch is the calibration
// batch) through an fp16 forward of best_composition() without its graph and with the cuBLASLt
// MLP (fused_epilogue).
void calibrate_fp8(const Problem& p, DeviceWeights& w, const __half* images);

}  // namespace encoder
