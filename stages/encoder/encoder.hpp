// The whole ViT forward, composed from the families' versions: patch embedding (+ cls and
// position) -> `layers` encoder blocks -> final LayerNorm -> classifier head on the cls rows.
//   block: LN1 -> QKV GEMM (+bias) -> attention -> projection GEMM (+bias, +residual)
//          -> LN2 -> MLP (fc1 + bias + GELU, fc2 + bias + residual)
// Activations are row-major [batch*tokens, hidden] fp16, as every family's contract has them,
// so one family's output is the next one's input with no transposes.
//
// Every encoder step (steps.hpp) is a Composition (composition.hpp): which version of each
// family, which block runner, and which whole-forward techniques (buffer reuse, CUDA graph,
// streams, fusion).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <array>
#include <memory>
#include <string>
#include <vector>
#include "device/l2_prefetch.hpp"
#include "encoder/composition.hpp"
#include "encoder/steps.hpp"
#include "encoder/tile_schedule.hpp"
#include "harness/buffer.hpp"
#include "harness/memory.hpp"
#include "harness/vit_config.hpp"

namespace ref { struct VitWeights; }

namespace encoder {

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

// Why a composition cannot run in this build or on this GPU at all (empty: it can): the first
// component version, or the block runner, that is unavailable, named.
std::string why_unavailable(const Composition& c);

// The static activation scales of an FP8 forward: per block, the amax of its four GEMM inputs
// (LN1's output, attention's output, LN2's output, GELU's output) and of the QKV GEMM's output
// (the attention's input, where it reads E4M3) over the images of a calibration forward in fp16
// (calibrate_fp8). Each scale is kCalibrationMargin * amax / 448.
struct Fp8Calibration {
  enum Input { Ln1, Qkv, Attention, Ln2, Gelu, kInputs };
  std::vector<std::array<float, kInputs>> amax;  // one entry per block
  int images = 0;                                // the calibration batch
};

// All weights in one device buffer (fp16), with a view per block. Uploaded once; another image
// size's weights (at_image_size) share it and hold only their own position embedding.
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
  // Device bytes these weights hold: the packed buffer (shared among image sizes) and, for
  // another image size's, its position embedding.
  std::size_t bytes() const { return buffer_->bytes() + (pos_buffer_ ? pos_buffer_->bytes() : 0); }
  // The weights packed in order: block i's as one byte range, and the final LayerNorm's with the
  // head's (what an L2 prefetch of the next block asks for).
  study::ByteRange block_span(int i) const;
  study::ByteRange head_span() const;
  // The same weights for images of another size: `pos_embed` is that size's position embedding
  // (the class token's row first, then the patches', [tokens * hidden], resampled by the caller),
  // uploaded on its own; every other tensor is this one's buffer. No FP8 calibration (a
  // calibration belongs to an image size).
  DeviceWeights at_image_size(const std::vector<float>& pos_embed) const;

 private:
  std::shared_ptr<const study::DeviceBuffer<__half>> buffer_, pos_buffer_;
};

// Per-component device time of one eager forward, microseconds, summed over layers.
struct Breakdown {
  std::vector<std::pair<std::string, double>> us;  // in forward order
};

// One task of a tile-scheduled forward (blocks=tiled*) as its CTA saw it, in
// us from the kernel's first task: the CTA turned to it (its weights requested), its inputs there
// (its waits met), its output stored; with the counters it waited on and the one it signalled
// (the schedule's), from which the forward's critical path follows. The per-task table of those
// steps, as kernel_table is the per-kernel one of the others.
struct TaskTime {
  std::string kind;  // tile_schedule.hpp's names: ln1, qkv, attention, projection, ln2, fc1, fc2
  int block = 0, row_tile = 0, col = 0, slice = 0, sm = 0;
  double start_us = 0, ready_us = 0, end_us = 0;
  // A read-once GEMM task (tile_shape=read_once): its partial sums stored and its arrival
  // counted, and every slice of its tile arrived (tiled_read_once.cuh's meet); -1 for other tasks.
  double arrived_us = -1, met_us = -1;
  std::vector<tiles::Wait> waits;
  int signals = 0;
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
  // After a forward on `stream`: the final LayerNorm's class-token rows (timm's pre-logits
  // features), [batch, hidden] fp16, copied to `out` on `stream` (capturable).
  void copy_features(__half* out, cudaStream_t stream) const;
  // Events around every component of one eager forward (stream 0's share of the batch).
  Breakdown breakdown(const __half* images, __half* logits, cudaStream_t stream);
  // One eager forward with the tile-scheduled kernel's task clock on (one lane): every task of
  // it, in ticket order. Refused (StudyError Usage) for the runners without a task schedule.
  std::vector<TaskTime> task_times(const __half* images, __half* logits, cudaStream_t stream);
  // Device bytes of activations (the arena, or every layer's buffers) and scratch.
  std::size_t activation_bytes() const;
  // Whether a whole forward can be captured in a CUDA graph (no component syncs the host).
  bool capturable() const;
  // One eager forward that records the amax of every block's four GEMM inputs (an fp16
  // composition whose MLP writes GELU's output to h, one stream, nothing folded).
  Fp8Calibration observe_gemm_inputs(const __half* images, __half* logits, cudaStream_t stream);

  // Test hooks (the encoder's tests; nothing timed calls them). NaN (0xFF bytes) into every
  // activation buffer and runner scratch a forward writes before it reads, so that a row a
  // kernel forgets stays NaN.
  void poison_activations();
  // After a forward: the residual stream the last block left, [batch * tokens, hidden], and the
  // last block's intermediates where the runner writes them to the lanes' buffers (QKV
  // [rows, 3 hidden], the attention output [rows, hidden], fc1 + GELU [rows, mlp]); what a runner
  // does not write stays as poison_activations left it. Images in batch order.
  struct Intermediates {
    std::vector<float> qkv, attn, h;
  };
  std::vector<float> residual_stream() const;
  Intermediates last_block_intermediates() const;
  // blocks=fp8 on one stream: the last block's tensors of the next forward, its four GEMM inputs
  // as the E4M3 values the GEMMs read (unscaled), copied aside as the forward runs once this is
  // called; read with fp8_stages() after it.
  struct Fp8Stages {
    std::vector<float> x_in, ln1, qkv, attn, x_mid, ln2, h, x_out;
  };
  void capture_fp8_stages();
  Fp8Stages fp8_stages() const;
  // Bytes the L2 prefetches have requested since this forward was made (test-hook builds: every
  // request counted on the device; 0 otherwise).
  unsigned long long l2_requested_bytes() const;
  // After a forward: empty when every lane's dependency counters and tickets (blocks=tiled) hold
  // exactly what a complete forward leaves, or the runner keeps none; otherwise what differs.
  std::string dependency_state() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The share of the next block's packed weights an L2 prefetch requests (blocks=fp16 with
// l2_prefetch; e14's NOTES say why half), each block's range cut to whole 16-byte chunks.
constexpr double kL2PrefetchShare = 0.5;

// Fills w.fp8_calibration from `images` (device, [p.batch, 3, S, S]; p.batch is the calibration
// batch) through an fp16 forward of e6_best's composition without its graph (its MLP,
// fused_epilogue, writes GELU's output, the fc2 input, to memory), enqueued on `stream` (after the
// work that wrote the images) and waited for.
void calibrate_fp8(const Problem& p, DeviceWeights& w, const __half* images, cudaStream_t stream = nullptr);

}  // namespace encoder
