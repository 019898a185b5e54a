// One model's forwards on one GPU: what the bench and the Python module (vitstudy) both run.
//
// A session holds
// - the weights, uploaded once, and a position embedding per image size it was given;
// - per image size, the FP8 activation scales of an FP8 step (calibrate);
// - the forwards made from them, keyed by batch and image size, each with its activations, its
//   input and output buffers and one call graph (the caller's images copied in, the forward, the
//   logits or the pre-logits features copied out; the copies re-pointed at each call's tensors).
// The forwards are kept most recently used first while their device bytes fit the session's
// budget (a quarter of the GPU's memory unless set); the forward a call uses is always kept,
// even alone over the budget. release_forwards() frees them all; the weights stay.
//
// Every call selects the session's device and selects the caller's again before it returns; its
// work is enqueued on the caller's stream. A forward's buffers serve one call at a time: its call
// graph is one executable, which CUDA orders behind its earlier launches on any stream.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "encoder/encoder.hpp"
#include "harness/buffer.hpp"
#include "reference.hpp"

namespace encoder {

class Session {
 public:
  // `weights` at `image_size` (their position embedding that size's) with `num_classes` classes,
  // run by composition `c` on `device`. Refuses (StudyError) a composition this build or GPU
  // cannot run, and no GPU.
  Session(const ref::VitWeights& weights, const study::ModelConfig& model, int image_size, const Composition& c,
          int device);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Images of `image_size` from now on, with this position embedding ([tokens * hidden] floats,
  // the class token's row first; vitstudy resamples timm's); a size added before gets the new one
  // (its forwards and FP8 scales dropped). Refuses a wrong length and the weights' own size.
  void add_image_size(int image_size, const std::vector<float>& pos_embed);
  bool has_image_size(int image_size) const;

  // FP8 compositions: the activation scales at `image_size`, from `batch` images there (fp16
  // [batch, 3, S, S] on the device) through an fp16 forward enqueued on `stream`; required once
  // per image size before its first forward. Drops that size's forwards (they read the scales
  // they were made with).
  void calibrate(int image_size, const __half* images, int batch, cudaStream_t stream);

  // The forward for `batch` images of `image_size`, made (and the cache trimmed) if not kept.
  // The reference stays valid until the next call that may make or drop a forward.
  Forward& forward(int batch, int image_size);

  // What a call returns: the logits [batch, classes], or the pre-logits features [batch, hidden]
  // (the final LayerNorm's class-token rows, timm's forward_head(pre_logits=True)).
  enum class Output { Logits, Features };
  // out (fp16, [batch, classes] or [batch, hidden]) from images (fp16 [batch, 3, S, S]), both on
  // the device, enqueued on `stream` without a host synchronization, except the first call of a
  // forward, which runs it eagerly (plans, GEMM searches) and captures its call graph.
  void call(const __half* images, __half* out, int batch, int image_size, Output what, cudaStream_t stream);
  // The executable graph of the calls at (batch, image_size), null before its second call or
  // where none is kept: what the tests compare to see one graph serve both outputs.
  const void* call_graph(int batch, int image_size) const;
  // The forward on its own input and output buffers (its own graph, no copies), as the bench
  // times it: what a call's cost is measured against. The input holds the last call's images.
  void run_unbound(int batch, int image_size, cudaStream_t stream);

  // The cache: device bytes the forwards may hold (activations, buffers), read and set; set
  // trims at once.
  std::size_t budget_bytes() const { return budget_; }
  void set_budget_bytes(std::size_t bytes);
  std::size_t held_bytes() const;  // the forwards' (the weights' apart: weight_bytes)
  int forwards_kept() const { return static_cast<int>(slots_.size()); }
  void release_forwards();
  std::size_t weight_bytes() const;

  const Composition& composition() const { return composition_; }
  const study::ModelConfig& model() const { return model_; }
  int num_classes() const { return num_classes_; }
  int device() const { return device_; }

 private:
  struct Slot;
  struct Size {
    std::unique_ptr<DeviceWeights> weights;  // stable: forwards keep a reference
  };
  Slot& slot_for(int batch, int image_size);
  Size& size_for(int image_size);
  void trim(const Slot* keep);
  Problem problem(int batch, int image_size) const;

  Composition composition_;
  study::ModelConfig model_;
  int num_classes_;
  int device_;
  int base_image_size_;  // the weights' own: other sizes share their buffer
  std::size_t budget_ = 0;
  std::map<int, Size> sizes_;                 // by image size
  std::list<std::unique_ptr<Slot>> slots_;   // most recently used first
};

}  // namespace encoder
