// The whole forward around the block runner: lanes (the batch split over streams), activation
// buffers, patch embedding, the head, graph capture, the per-component breakdown and the FP8
// calibration's observing forward. What the blocks do is the runner's (runner.hpp).
#include "encoder/runner.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"
#include "harness/test_hooks.hpp"

namespace encoder {

namespace {

[[noreturn]] void refuse(const std::string& why) { throw study::StudyError(study::ErrorKind::Usage, why); }

}  // namespace

struct Forward::Impl {
  Problem p;
  Composition c;
  const DeviceWeights& w;
  const patch_embed::Version& pe;
  const layernorm::Version& ln;
  const attention::Version* attn;  // null where the blocks compute the attention themselves
  const mlp::Version* mlp;         // and the MLP
  std::vector<Lane> lanes;
  std::unique_ptr<BlockRunner> blocks;
  Marks marks;
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins;
  cudaGraphExec_t graph = nullptr;
  cudaStream_t capture_stream = nullptr;  // the legacy default stream cannot be captured
  const __half* graph_images = nullptr;
  __half* graph_logits = nullptr;

  Impl(const Problem& prob, const Composition& comp, const DeviceWeights& weights)
      : p(prob), c(comp), w(weights),
        pe(patch_embed::find_version(comp.patch_embed)),
        ln(layernorm::find_version(comp.layernorm)),
        attn(comp.attention.empty() ? nullptr : &attention::find_version(comp.attention)),
        mlp(comp.mlp.empty() ? nullptr : &mlp::find_version(comp.mlp)) {
    if (auto why = check_fields(c); !why.empty()) refuse(why);
    if (auto why = check_problem(p); !why.empty()) refuse(why);
    if (static_cast<int>(w.blocks.size()) != p.model.layers)
      refuse("weights have " + std::to_string(w.blocks.size()) + " blocks, the model " +
             std::to_string(p.model.layers));
    if (c.streams < 1 || c.streams > p.batch)
      refuse("streams = " + std::to_string(c.streams) + " must be between 1 and the batch (" +
             std::to_string(p.batch) + ")");
    if (c.graph && !pe.capturable)
      refuse(std::string("patch_embed ") + pe.name +
             " synchronizes the host, so the forward cannot be captured in a CUDA graph");
    const Runner& runner = runner_for(c.blocks);
    const RunnerSetup setup{p, c, w, ln, attn, mlp};
    const int base = p.batch / c.streams, extra = p.batch % c.streams;
    for (int s = 0, b0 = 0; s < c.streams; ++s) {
      Lane lane;
      lane.index = s;
      lane.b0 = b0;
      lane.batch = base + (s < extra ? 1 : 0);
      b0 += lane.batch;
      ask_components(lane);
      if (auto why = runner.supports(setup, lane.batch); !why.empty())
        refuse(std::string("blocks=") + name(c.blocks) + " refuses batch " + std::to_string(lane.batch) + ": " + why);
      allocate(lane);
      if (c.streams > 1) CUDA_CHECK(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
      lanes.push_back(std::move(lane));
    }
    blocks = runner.make(setup);
    for (auto& l : lanes) blocks->add_lane(l);
    if (c.streams > 1) {
      CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
      joins.resize(c.streams);
      for (auto& e : joins) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
  }

  ~Impl() {
    if (graph) cudaGraphExecDestroy(graph);
    if (capture_stream) cudaStreamDestroy(capture_stream);
    for (auto& l : lanes)
      if (l.stream) cudaStreamDestroy(l.stream);
    if (fork) cudaEventDestroy(fork);
    for (auto e : joins) cudaEventDestroy(e);
  }

  // Every component asked about its exact problem before anything is allocated for it.
  void ask_components(Lane& l) const {
    const int T = p.tokens(), D = p.model.hidden;
    const int rows = l.batch * T;
    l.pe = patch_embed::Problem{};
    l.pe.batch = l.batch;
    l.pe.image_size = p.image_size;
    l.pe.hidden = D;
    l.ln = layernorm::Problem{rows, D};
    l.ln_final = layernorm::Problem{l.batch, D};
    l.attn = attention::Problem{l.batch, T, p.model.heads, p.model.head_dim()};
    l.mlp = mlp::Problem{rows, D, p.model.mlp()};
    const std::pair<std::string, std::string> answers[] = {
        {std::string("patch_embed ") + pe.name, pe.supports(l.pe)},
        {std::string("layernorm ") + ln.name, ln.supports(l.ln)},
        {std::string("layernorm ") + ln.name + " (final, cls rows)", ln.supports(l.ln_final)},
        {std::string("attention ") + (attn ? attn->name : ""), attn ? attn->supports(l.attn) : ""},
        {std::string("mlp ") + (mlp ? mlp->name : ""), mlp ? mlp->supports(l.mlp) : ""},
    };
    for (const auto& [who, why] : answers)
      if (!why.empty()) refuse(who + " refuses batch " + std::to_string(l.batch) + ": " + why);
  }

  void allocate(Lane& l) const {
    l.gemm = std::make_unique<study::Gemm>();
    const std::size_t act = static_cast<std::size_t>(l.rows()) * p.model.hidden;
    l.pe_scratch = study::DeviceBuffer<char>(patch_embed::scratch_bytes(l.pe));
    auto fresh_set = [&](__half* x_in) {
      LayerBuffers b{};
      b.x_in = x_in;
      b.ln1 = l.alloc(act);
      b.qkv = l.alloc(3 * act);
      b.attn = l.alloc(act);
      b.proj = c.residual_epilogue() ? nullptr : l.alloc(act);
      b.x_mid = l.alloc(act);
      b.ln2 = l.alloc(act);
      b.h = l.alloc(4 * act);
      return b;
    };
    __half* x = l.alloc(act);
    if (!c.per_layer_buffers()) {
      LayerBuffers b = fresh_set(x);
      b.x_out = x;
      l.layers.assign(p.model.layers, b);
    } else {
      for (int i = 0; i < p.model.layers; ++i) {
        LayerBuffers b = fresh_set(x);
        x = b.x_out = l.alloc(act);
        l.layers.push_back(b);
      }
    }
    l.cls = l.alloc(static_cast<std::size_t>(l.batch) * p.model.hidden);
    l.cls_norm = l.alloc(static_cast<std::size_t>(l.batch) * p.model.hidden);
  }

  void lane_forward(Lane& l, const __half* images, __half* logits, cudaStream_t s) {
    const int D = p.model.hidden, T = p.tokens();
    const std::size_t image_elems = static_cast<std::size_t>(study::kChannels) * p.image_size * p.image_size;
    marks.component("patch_embed", s, [&] {
      patch_embed::Args a{};
      a.images = images + l.b0 * image_elems;
      a.conv_w = w.patch_w;
      a.conv_b = w.patch_b;
      a.cls_token = w.cls_token;
      a.pos_embed = w.pos_embed;
      a.out = l.layers[0].x_in;
      a.scratch = l.pe_scratch.get();
      a.gemm = l.gemm.get();
      pe.launch(l.pe, a, s);
    });
    const __half* x = l.residual = blocks->run(l, marks, s);
    if (study::planted("wrong_non_cls_row") && l.b0 == 0)  // image 0's last row: a copy of the row before
      CUDA_CHECK(cudaMemcpyAsync(const_cast<__half*>(x) + static_cast<std::size_t>(T - 1) * D,
                                 x + static_cast<std::size_t>(T - 2) * D, sizeof(__half) * D,
                                 cudaMemcpyDeviceToDevice, s));
    marks.component("head", s, [&] {
      gather_cls(x, l.cls, l.batch, T, D, s);
      ln.launch(l.ln_final, {l.cls, w.norm_g, w.norm_b, l.cls_norm}, s);
      study::GemmOperands op{l.cls_norm, w.head_w, logits + static_cast<std::size_t>(l.b0) * p.num_classes, w.head_b};
      l.gemm->run({l.batch, p.num_classes, D}, study::Epilogue::Bias, op, s);
    });
  }

  // All lanes: forked from `stream` and joined back, so events on `stream` enclose all of it.
  void eager(const __half* images, __half* logits, cudaStream_t stream) {
    study::NvtxRange range("encoder_forward");
    if (lanes.size() == 1) {
      lane_forward(lanes[0], images, logits, stream);
      return;
    }
    CUDA_CHECK(cudaEventRecord(fork, stream));
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      CUDA_CHECK(cudaStreamWaitEvent(lanes[i].stream, fork, 0));
      lane_forward(lanes[i], images, logits, lanes[i].stream);
      CUDA_CHECK(cudaEventRecord(joins[i], lanes[i].stream));
    }
    for (auto e : joins) CUDA_CHECK(cudaStreamWaitEvent(stream, e, 0));
  }

  void capture(const __half* images, __half* logits, cudaStream_t stream) {
    if (graph) CUDA_CHECK(cudaGraphExecDestroy(graph));
    graph = nullptr;
    // One eager forward first: plans, algorithm choices and kernel attributes are made
    // outside the capture, which must only record device work.
    eager(images, logits, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!capture_stream) CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
    cudaGraph_t g = study::capture_graph(capture_stream, [&](cudaStream_t s) { eager(images, logits, s); });
    const cudaError_t e = cudaGraphInstantiate(&graph, g, 0);
    cudaGraphDestroy(g);
    CUDA_CHECK(e);
    graph_images = images;
    graph_logits = logits;
  }
};

Forward::Forward(const Problem& p, const Composition& c, const DeviceWeights& w)
    : impl_(std::make_unique<Impl>(p, c, w)) {}
Forward::~Forward() = default;

void Forward::run(const __half* images, __half* logits, cudaStream_t stream) {
  if (!impl_->c.graph) {
    impl_->eager(images, logits, stream);
    return;
  }
  if (!impl_->graph || impl_->graph_images != images || impl_->graph_logits != logits)
    impl_->capture(images, logits, stream);
  CUDA_CHECK(cudaGraphLaunch(impl_->graph, stream));
}

void Forward::run_eager(const __half* images, __half* logits, cudaStream_t stream) {
  impl_->eager(images, logits, stream);
}

void Forward::copy_features(__half* out, cudaStream_t stream) const {
  const std::size_t D = impl_->p.model.hidden;
  for (const Lane& l : impl_->lanes)  // joined back to `stream` at the end of the forward
    CUDA_CHECK(cudaMemcpyAsync(out + l.b0 * D, l.cls_norm, sizeof(__half) * l.batch * D, cudaMemcpyDeviceToDevice,
                               stream));
}

Breakdown Forward::breakdown(const __half* images, __half* logits, cudaStream_t stream) {
  // Warm first, so that plans and first-call costs are not in the breakdown.
  impl_->eager(images, logits, stream);
  impl_->marks.start_recording();
  try {
    for (auto& l : impl_->lanes) impl_->lane_forward(l, images, logits, stream);
  } catch (...) {
    impl_->marks.stop();
    throw;
  }
  return impl_->marks.stop_recording(stream);
}

std::size_t Forward::activation_bytes() const {
  std::size_t n = 0;
  for (const auto& l : impl_->lanes) {
    for (const auto& b : l.owned) n += b.bytes();
    n += l.pe_scratch.bytes();
  }
  return n;
}

bool Forward::capturable() const { return impl_->pe.capturable; }

Fp8Calibration Forward::observe_gemm_inputs(const __half* images, __half* logits, cudaStream_t stream) {
  Impl& m = *impl_;
  if (m.c.blocks != Blocks::Fp16 || m.lanes.size() != 1 || !m.mlp || !m.mlp->computes_mlp)
    refuse("observing GEMM inputs needs blocks=fp16 on one stream with an MLP version that computes the MLP");
  const int layers = m.p.model.layers;
  study::DeviceBuffer<float> amax(static_cast<std::size_t>(layers) * Fp8Calibration::kInputs);
  CUDA_CHECK(cudaMemsetAsync(amax.get(), 0, amax.bytes(), stream));
  m.marks.observe = amax.get();
  try {
    m.eager(images, logits, stream);
  } catch (...) {
    m.marks.observe = nullptr;
    throw;
  }
  m.marks.observe = nullptr;
  std::vector<float> host(amax.size());
  CUDA_CHECK(cudaMemcpyAsync(host.data(), amax.get(), amax.bytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  Fp8Calibration cal;
  cal.images = m.p.batch;
  for (int i = 0; i < layers; ++i) {
    std::array<float, Fp8Calibration::kInputs> a{};
    for (int k = 0; k < Fp8Calibration::kInputs; ++k)
      a[k] = host[static_cast<std::size_t>(i) * Fp8Calibration::kInputs + k];
    cal.amax.push_back(a);
  }
  return cal;
}

void Forward::poison_activations() {
  for (auto& l : impl_->lanes) {
    for (auto& b : l.owned) study::poison(b);
    study::poison(l.pe_scratch);
  }
  impl_->blocks->poison_scratch();
}

namespace {

// Rows [lanes' batches * tokens, width] of one buffer per lane, in batch order.
template <class Pick>
std::vector<float> gather(const std::vector<Lane>& lanes, int tokens, int width, Pick pick) {
  std::vector<float> out;
  for (const Lane& l : lanes) {
    const __half* d = pick(l);
    if (!d) throw study::StudyError(study::ErrorKind::Usage, "no forward has run yet");
    std::vector<__half> h(static_cast<std::size_t>(l.batch) * tokens * width);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h.data(), d, h.size() * sizeof(__half), cudaMemcpyDeviceToHost));
    for (__half v : h) out.push_back(__half2float(v));
  }
  return out;
}

}  // namespace

std::vector<float> Forward::residual_stream() const {
  return gather(impl_->lanes, impl_->p.tokens(), impl_->p.model.hidden, [](const Lane& l) { return l.residual; });
}

Forward::Intermediates Forward::last_block_intermediates() const {
  const Impl& m = *impl_;
  const int T = m.p.tokens(), D = m.p.model.hidden;
  auto last = [](const Lane& l) -> const LayerBuffers& { return l.layers.back(); };
  return {gather(m.lanes, T, 3 * D, [&](const Lane& l) { return last(l).qkv; }),
          gather(m.lanes, T, D, [&](const Lane& l) { return last(l).attn; }),
          gather(m.lanes, T, m.p.model.mlp(), [&](const Lane& l) { return last(l).h; })};
}

void Forward::capture_fp8_stages() {
  if (impl_->lanes.size() != 1) refuse("FP8 stages are captured on one stream");
  impl_->blocks->capture_fp8_stages();
}

Forward::Fp8Stages Forward::fp8_stages() const { return impl_->blocks->fp8_stages(impl_->lanes[0]); }

unsigned long long Forward::l2_requested_bytes() const { return impl_->blocks->l2_requested_bytes(); }

std::vector<TaskTime> Forward::task_times(const __half* images, __half* logits, cudaStream_t stream) {
  Impl& m = *impl_;
  if (m.lanes.size() != 1) refuse("task times are taken on one stream");
  m.blocks->set_task_clock(true);
  try {
    m.lane_forward(m.lanes[0], images, logits, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    m.blocks->set_task_clock(false);
    throw;
  }
  m.blocks->set_task_clock(false);
  return m.blocks->task_times(m.lanes[0]);
}

std::string Forward::dependency_state() const {
  CUDA_CHECK(cudaDeviceSynchronize());
  return impl_->blocks->dependency_state();
}

void calibrate_fp8(const Problem& p, DeviceWeights& w, const __half* images, cudaStream_t stream) {
  Composition c = find_step("e6_best");
  c.graph = false;  // its MLP, fused_epilogue, writes h (the fc2 input the FP8 MLP quantizes)
  study::DeviceBuffer<__half> logits(static_cast<std::size_t>(p.batch) * p.num_classes);
  Forward f(p, c, w);
  w.fp8_calibration = f.observe_gemm_inputs(images, logits.get(), stream);
}

}  // namespace encoder
