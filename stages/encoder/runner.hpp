// Block runners: the encoder blocks of a forward, one implementation per technique (kernel per
// op in fp16, LayerNorms folded into GEMMs, FP8, one persistent kernel). The forward
// (forward.cpp) owns the lanes, the patch embedding, the head, streams and graph capture, and
// hands each lane's residual stream to the composition's runner. A runner asks nothing of the
// step table: it reads only the Composition it was made for.
//
// Internal to the encoder: included by forward.cpp and the runner files, never by encoder.hpp,
// composition.hpp or steps.hpp.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "attention/attention.hpp"
#include "encoder/encoder.hpp"
#include "gemm/gemm.hpp"
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/nvtx.hpp"
#include "layernorm/layernorm.hpp"
#include "mlp/mlp.hpp"
#include "patch_embed/patch_embed.hpp"

namespace encoder {

// The buffers one layer reads and writes. With the arena every layer gets the same ones (x_in
// and x_out are one buffer: the MLP reads LN2's output and the residual x_mid, never x_in, so
// it may overwrite it); without it, every intermediate of every layer is its own. proj is null
// when the projection adds the residual in its epilogue.
struct LayerBuffers {
  __half *x_in, *ln1, *qkv, *attn, *proj, *x_mid, *ln2, *h, *x_out;
};

// One stream's share of the batch, with everything it needs to run a whole forward.
struct Lane {
  int index = 0, b0 = 0, batch = 0;
  cudaStream_t stream = nullptr;  // owned; null for a single lane (runs on the caller's stream)
  std::unique_ptr<study::Gemm> gemm;
  std::vector<study::DeviceBuffer<__half>> owned;
  std::vector<LayerBuffers> layers;
  __half *cls = nullptr, *cls_norm = nullptr;
  const __half* residual = nullptr;  // where the last block left the residual stream (after a forward)
  study::DeviceBuffer<char> pe_scratch;
  patch_embed::Problem pe;
  layernorm::Problem ln, ln_final;
  attention::Problem attn;
  mlp::Problem mlp;

  long long rows() const { return static_cast<long long>(ln.rows); }
  __half* alloc(std::size_t n) {
    owned.emplace_back(n);
    return owned.back().get();
  }
};

// What every launch of a forward reports to: an NVTX range per component (Nsight Systems shows
// the forward by component), CUDA events around it while a breakdown is taken, and the amax of
// the GEMM inputs while an FP8 calibration observes an fp16 forward.
class Marks {
 public:
  ~Marks() { clear(); }
  template <class F>
  void component(const char* name, cudaStream_t s, F&& f) {
    study::NvtxRange range(name);
    if (!recording_) {
      f();
      return;
    }
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    events_.push_back({name, {a, b}});
    CUDA_CHECK(cudaEventRecord(a, s));
    f();
    CUDA_CHECK(cudaEventRecord(b, s));
  }
  void start_recording() {
    clear();
    recording_ = true;
  }
  // Stops recording; the recorded components' device times (after a sync), summed by name.
  Breakdown stop_recording(cudaStream_t s);
  void stop() { recording_ = false; }

  // While set: max |x| of block `layer`'s GEMM input `which` into observe[layer][which].
  float* observe = nullptr;
  void observe_input(int layer, Fp8Calibration::Input which, const __half* x, long long n, cudaStream_t s) const;

 private:
  void clear();
  bool recording_ = false;
  std::vector<std::pair<std::string, std::pair<cudaEvent_t, cudaEvent_t>>> events_;
};

// What a runner is made from.
struct RunnerSetup {
  const Problem& p;
  const Composition& c;
  const DeviceWeights& w;
  const layernorm::Version& ln;
  // Set exactly where the runner reads attn= / mlp= (check_fields).
  const attention::Version* attn;
  const mlp::Version* mlp;
};

class BlockRunner {
 public:
  virtual ~BlockRunner() = default;
  // Once per lane, in lane order, after the lane's layer buffers exist: the runner's own scratch.
  virtual void add_lane(Lane& l) = 0;
  // Every block on lane l, from l.layers[0].x_in; returns where the residual stream ends.
  virtual const __half* run(Lane& l, Marks& m, cudaStream_t s) = 0;
  // NaN into the runner's own scratch that a forward writes before it reads (a test hook:
  // Forward::poison_activations).
  virtual void poison_scratch() {}
  // Device bytes the L2 prefetches of the forwards so far requested (test-hook builds; 0 in others
  // and for runners that request none).
  virtual unsigned long long l2_requested_bytes() const { return 0; }
  // After a forward (synchronized): empty when the runner's dependency state (counters, tickets)
  // is exactly what a complete forward leaves, or the runner keeps none; otherwise what differs.
  virtual std::string dependency_state() const { return {}; }
  // The task clock of a tile-scheduled runner: on for the forwards after it, read after a
  // synchronized forward. The others refuse.
  virtual void set_task_clock(bool) {
    throw study::StudyError(study::ErrorKind::Usage,
                            "task times exist only for the tile-scheduled blocks (blocks=tiled)");
  }
  virtual std::vector<TaskTime> task_times(const Lane&) const { return {}; }
  // Test hooks of the FP8 runner (Forward::capture_fp8_stages); the others refuse.
  virtual void capture_fp8_stages() {
    throw study::StudyError(study::ErrorKind::Usage, "only blocks=fp8 has FP8 stages");
  }
  virtual Forward::Fp8Stages fp8_stages(const Lane&) const { return {}; }
};

// The runners whose blocks are one kernel per lane (blocks=persistent, tiled): Kernel
// has run(x, qkv, attn, h, stream), updating the residual stream in place in the first layer's
// buffer, and poison_scratch(); the derived runner makes one per lane.
template <class Kernel>
class OneKernelBlocks : public BlockRunner {
 public:
  const __half* run(Lane& l, Marks& m, cudaStream_t s) override {
    const LayerBuffers& b = l.layers[0];
    m.component("blocks", s, [&] { lanes_[l.index]->run(b.x_in, b.qkv, b.attn, b.h, s); });
    return b.x_in;
  }
  void poison_scratch() override {
    for (auto& l : lanes_) l->poison_scratch();
  }

 protected:
  std::vector<std::unique_ptr<Kernel>> lanes_;
};

// A runner kind: its record, as the families' versions have theirs.
struct Runner {
  Blocks blocks;
  // The composition's runner fields it reads (composition.hpp's Field); check_fields refuses the
  // others, so a runner refuses in supports() only values of fields it reads.
  unsigned reads;
  // Why this build or GPU cannot run it, whatever the shape (empty: it can).
  std::string (*unavailable)(const Composition& c);
  // Why it cannot run composition s.c on s.p with lanes of `lane_batch` images (empty: it can).
  std::string (*supports)(const RunnerSetup& s, int lane_batch);
  // Device bytes it allocates beyond the forward's own buffers, for `lanes` lanes.
  double (*extra_device_bytes)(const Problem& p, const Composition& c, int lanes);
  std::unique_ptr<BlockRunner> (*make)(const RunnerSetup& s);
};

// The runner of c.blocks (runners.cpp holds the list).
const Runner& runner_for(Blocks b);

// Why composition c does not fit its runner (empty: it does): a field set that the runner does
// not read (it would name what does not run), or a version it reads not named.
std::string check_fields(const Composition& c);

// The MLP's arguments in a block: LN2's output in, the residual stream x_mid added, x_out out,
// h the intermediate, the lane's cuBLASLt Gemm.
inline mlp::Args mlp_args(const Lane& l, const LayerBuffers& b, const BlockView& v, bool pdl) {
  mlp::Args a{};
  a.x = b.ln2;
  a.residual = b.x_mid;
  a.fc1_w = v.fc1_w;
  a.fc1_b = v.fc1_b;
  a.fc2_w = v.fc2_w;
  a.fc2_b = v.fc2_b;
  a.y = b.x_out;
  a.h = b.h;
  a.gemm = l.gemm.get();
  a.pdl = pdl;
  return a;
}

// Small kernels of the block sequence (ops.cu). x_mid = a + b, n elements.
void residual_add(const __half* a, const __half* b, __half* out, long long n, cudaStream_t s);
// cls[b, :] = x[b * tokens, :] for every image of the batch.
void gather_cls(const __half* x, __half* cls, int batch, int tokens, int hidden, cudaStream_t s);

}  // namespace encoder
