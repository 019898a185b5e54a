// The encoder's forward: device weights, activation buffers, the per-layer sequence of family
// versions, stream lanes, graph capture and the per-component breakdown.
#include <map>
#include "attention/attention.hpp"
#include "buffer.hpp"
#include "check.hpp"
#include "encoder/encoder.hpp"
#include "cutlass_gemm.hpp"
#include "fp8.hpp"
#include "gemm.hpp"
#include "layernorm/layernorm.hpp"
#include "mlp/mlp.hpp"
#include "nvtx.hpp"
#include "encoder/persistent.hpp"
#include "patch_embed/patch_embed.hpp"
#include "random.hpp"
#include "reference.hpp"

namespace encoder {

namespace {

// x_mid = x_in + proj, two halves per thread (hidden is even in every ViT; a tail is handled).
__global__ void residual_add_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                    __half* __restrict__ out, long long n) {
  const long long i = 2 * (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 1 < n) {
    const __half2 s = __hadd2(*reinterpret_cast<const __half2*>(a + i), *reinterpret_cast<const __half2*>(b + i));
    *reinterpret_cast<__half2*>(out + i) = s;
  } else if (i < n) {
    out[i] = __hadd(a[i], b[i]);
  }
}

// cls[b, :] = x[b * tokens, :]: the head only needs each image's cls row.
__global__ void gather_cls_kernel(const __half* __restrict__ x, __half* __restrict__ cls, int tokens, int hidden) {
  const int b = blockIdx.x;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    cls[static_cast<long long>(b) * hidden + i] = x[static_cast<long long>(b) * tokens * hidden + i];
}

void residual_add(const __half* a, const __half* b, __half* out, long long n, cudaStream_t s) {
  const int threads = 256;
  const long long pairs = (n + 1) / 2;
  residual_add_kernel<<<static_cast<unsigned>((pairs + threads - 1) / threads), threads, 0, s>>>(a, b, out, n);
  LAUNCH_CHECK();
}

// Weights are packed at 256-byte boundaries: cuBLASLt and the vector loads of every family
// get the alignment cudaMalloc would give each tensor on its own.
constexpr std::size_t kAlignElems = 128;

}  // namespace

// ---- weights ---------------------------------------------------------------------------------

DeviceWeights::DeviceWeights(const ref::VitWeights& w) {
  std::vector<const std::vector<float>*> tensors = {&w.patch_w, &w.patch_b, &w.cls_token, &w.pos_embed,
                                                    &w.norm_g,  &w.norm_b,  &w.head_w,    &w.head_b};
  for (const auto& b : w.blocks)
    for (auto* t : {&b.ln1_g, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.ln2_g, &b.ln2_b,
                    &b.fc1_w, &b.fc1_b, &b.fc2_w, &b.fc2_b})
      tensors.push_back(t);
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  for (auto* t : tensors) {
    offset.push_back(total);
    total += (t->size() + kAlignElems - 1) / kAlignElems * kAlignElems;
  }
  std::vector<__half> host(total, __float2half(0.f));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto h = study::to_half(*tensors[i]);
    std::copy(h.begin(), h.end(), host.begin() + static_cast<std::ptrdiff_t>(offset[i]));
  }
  buffer_ = study::DeviceBuffer<__half>(total);
  CUDA_CHECK(cudaMemcpy(buffer_.get(), host.data(), buffer_.bytes(), cudaMemcpyHostToDevice));
  const __half* base = buffer_.get();
  std::size_t k = 0;
  for (const __half** p : {&patch_w, &patch_b, &cls_token, &pos_embed, &norm_g, &norm_b, &head_w, &head_b})
    *p = base + offset[k++];
  for (std::size_t b = 0; b < w.blocks.size(); ++b) {
    BlockView v{};
    for (const __half** p : {&v.ln1_g, &v.ln1_b, &v.qkv_w, &v.qkv_b, &v.proj_w, &v.proj_b, &v.ln2_g, &v.ln2_b,
                             &v.fc1_w, &v.fc1_b, &v.fc2_w, &v.fc2_b})
      *p = base + offset[k++];
    blocks.push_back(v);
  }
}

namespace {
// [from, to) of the packed weights; `to` is the next tensor group's first tensor, or null for the
// end of the buffer.
study::ByteRange packed_range(const __half* from, const __half* to, const study::DeviceBuffer<__half>& buffer) {
  const char* end = to ? reinterpret_cast<const char*>(to) : reinterpret_cast<const char*>(buffer.get()) + buffer.bytes();
  return {from, static_cast<std::size_t>(end - reinterpret_cast<const char*>(from))};
}
}  // namespace

study::ByteRange DeviceWeights::block_span(int i) const {
  return packed_range(blocks.at(i).ln1_g, i + 1 < static_cast<int>(blocks.size()) ? blocks[i + 1].ln1_g : nullptr,
                      buffer_);
}

study::ByteRange DeviceWeights::head_span() const {
  return packed_range(norm_g, blocks.empty() ? nullptr : blocks[0].ln1_g, buffer_);
}

// ---- forward ---------------------------------------------------------------------------------

namespace {

// Where a component's events go when a breakdown is being taken.
struct Recorder {
  cudaStream_t stream = nullptr;
  std::vector<std::pair<std::string, std::pair<cudaEvent_t, cudaEvent_t>>> marks;
  ~Recorder() {
    for (auto& m : marks) {
      cudaEventDestroy(m.second.first);
      cudaEventDestroy(m.second.second);
    }
  }
};

// The buffers one layer reads and writes. With the arena every layer gets the same ones
// (x_in and x_out are one buffer: the MLP reads LN2's output and the residual x_mid, never
// x_in, so it may overwrite it); without it, every intermediate of every layer is its own.
struct LayerBuffers {
  __half *x_in, *ln1, *qkv, *attn, *proj, *x_mid, *ln2, *h, *x_out;
};

// One stream's share of the batch, with everything it needs to run a whole forward.
struct Lane {
  int b0 = 0, batch = 0;
  cudaStream_t stream = nullptr;  // owned; null for a single lane (runs on the caller's stream)
  std::unique_ptr<study::Gemm> gemm;
  std::vector<study::DeviceBuffer<__half>> owned;
  std::vector<LayerBuffers> layers;
  __half *cls = nullptr, *cls_norm = nullptr;
  study::DeviceBuffer<char> pe_scratch;
  patch_embed::Problem pe;
  layernorm::Problem ln, ln_final;
  attention::Problem attn;
  mlp::Problem mlp;
  study::DeviceBuffer<float> row_mean, row_rstd;  // a folded LayerNorm's row statistics
  // FP8: the lane's FP8 GEMM layer, and one E4M3 buffer [rows, hidden] for the GEMM input of
  // the moment (LN1's output, attention's output, LN2's output in turn).
  std::unique_ptr<study::Fp8Gemm> fp8_gemm;
  study::DeviceBuffer<study::fp8::e4m3> act8;
  std::unique_ptr<persistent::Blocks> blocks;  // every block in one kernel (c.persistent)

  __half* alloc(std::size_t n) {
    owned.emplace_back(n);
    return owned.back().get();
  }
};

}  // namespace

struct Forward::Impl {
  Problem p;
  Composition c;
  const DeviceWeights& w;
  const patch_embed::Version& pe;
  const layernorm::Version& ln;
  const attention::Version& attn;
  const mlp::Version& mlp;
  std::vector<Lane> lanes;
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins;
  cudaGraphExec_t graph = nullptr;
  cudaStream_t capture_stream = nullptr;  // the legacy default stream cannot be captured
  const __half* graph_images = nullptr;
  __half* graph_logits = nullptr;
  Recorder* recorder = nullptr;  // set while a breakdown is taken
  // With the LayerNorms folded in (c.ln_folded): each block's QKV and fc1 weights with LN1's and
  // LN2's gamma folded in, and their per-column vectors (cutlass_gemm.hpp, LnFold).
  struct FoldedLinear {
    study::DeviceBuffer<__half> w;
    study::DeviceBuffer<float> col_sum, col_bias;
  };
  struct FoldedBlock {
    FoldedLinear qkv, fc1;
  };
  std::vector<FoldedBlock> folded;
  // With c.fp8: each block's four weights in E4M3 and the static scales of their inputs.
  struct Fp8Block {
    study::fp8::Weight qkv, proj, fc1, fc2;
    study::fp8::ActivationScale in[Fp8Calibration::kInputs];
  };
  std::vector<Fp8Block> fp8_blocks;
  float* observe = nullptr;  // set while observe_gemm_inputs runs: [layers][kInputs] amax

  Impl(const Problem& prob, const Composition& comp, const DeviceWeights& weights)
      : p(prob), c(comp), w(weights),
        pe(patch_embed::find_version(comp.patch_embed)),
        ln(layernorm::find_version(comp.layernorm)),
        attn(attention::find_version(comp.attention)),
        mlp(mlp::find_version(comp.mlp)) {
    if (auto why = check_problem(p); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
    if (static_cast<int>(w.blocks.size()) != p.model.layers)
      throw study::StudyError(study::ErrorKind::Usage, "weights have " + std::to_string(w.blocks.size()) +
                                                           " blocks, the model " + std::to_string(p.model.layers));
    if (c.streams < 1 || c.streams > p.batch)
      throw study::StudyError(study::ErrorKind::Usage, "streams = " + std::to_string(c.streams) +
                                                           " must be between 1 and the batch (" +
                                                           std::to_string(p.batch) + ")");
    if (c.graph && !pe.capturable)
      throw study::StudyError(study::ErrorKind::Usage, std::string("patch_embed ") + pe.name +
                                                           " synchronizes the host, so the forward cannot be "
                                                           "captured in a CUDA graph");
    if (c.persistent && (c.fp8 || c.ln_folded || c.cutlass_gemms || c.l2_prefetch))
      throw study::StudyError(study::ErrorKind::Usage,
                              "the persistent kernel computes the blocks itself: no FP8, folded LayerNorm, CUTLASS "
                              "GEMMs or L2 prefetch with it");
    if (c.attention_e4m3 && (!c.fp8 || !attn.launch_e4m3))
      throw study::StudyError(study::ErrorKind::Usage,
                              std::string("an E4M3 attention output feeds the FP8 projection: it needs the FP8 "
                                          "forward and an attention version that writes E4M3, not ") +
                                  attn.name);
    if (c.l2_prefetch && (c.fp8 || c.ln_folded || !layernorm::carries_prefetch(ln)))
      throw study::StudyError(study::ErrorKind::Usage,
                              std::string("the L2 prefetch rides on the LayerNorm family's kernel (Args::prefetch): "
                                          "not with FP8 or a folded LayerNorm, nor with layernorm ") + ln.name);
    const int base = p.batch / c.streams, extra = p.batch % c.streams;
    int b0 = 0;
    for (int s = 0; s < c.streams; ++s) {
      Lane lane;
      lane.b0 = b0;
      lane.batch = base + (s < extra ? 1 : 0);
      b0 += lane.batch;
      setup(lane);
      if (c.streams > 1) CUDA_CHECK(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
      lanes.push_back(std::move(lane));
    }
    if (c.ln_folded) fold_layernorms();
    if (c.fp8) quantize_weights();
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

  FoldedLinear fold(const __half* w_, const __half* b, const __half* gamma, const __half* beta, int n, int k) {
    FoldedLinear f{study::DeviceBuffer<__half>(static_cast<std::size_t>(n) * k), study::DeviceBuffer<float>(n),
                   study::DeviceBuffer<float>(n)};
    study::cutlass_gemm::fold_layernorm(w_, b, gamma, beta, n, k, f.w.get(), f.col_sum.get(), f.col_bias.get(),
                                        nullptr);
    return f;
  }

  // Once per forward object, before any forward: the folded weights of every block.
  void fold_layernorms() {
    if (!c.cutlass_gemms)
      throw study::StudyError(study::ErrorKind::Usage, "a folded LayerNorm runs on the CUTLASS GEMM layer only");
    const int D = p.model.hidden;
    for (const BlockView& v : w.blocks)
      folded.push_back({fold(v.qkv_w, v.qkv_b, v.ln1_g, v.ln1_b, 3 * D, D),
                        fold(v.fc1_w, v.fc1_b, v.ln2_g, v.ln2_b, p.model.mlp(), D)});
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  // Once per forward object: every block's GEMM weights in E4M3 (per tensor) and the static
  // activation scales from the weights' calibration.
  void quantize_weights() {
    const Fp8Calibration& cal = w.fp8_calibration;
    if (static_cast<int>(cal.amax.size()) != p.model.layers)
      throw study::StudyError(study::ErrorKind::Usage,
                              "an FP8 forward needs the weights' calibration (encoder::calibrate_fp8) for its " +
                                  std::to_string(p.model.layers) + " blocks; it has " +
                                  std::to_string(cal.amax.size()));
    if (!mlp.fp8)
      throw study::StudyError(study::ErrorKind::Usage, std::string("an FP8 forward needs an FP8 MLP version, not ") +
                                                           mlp.name);
    const int D = p.model.hidden, H = p.model.mlp();
    namespace f8 = study::fp8;
    const auto scaling = f8::Scaling::Tensor;
    for (std::size_t i = 0; i < w.blocks.size(); ++i) {
      const BlockView& v = w.blocks[i];
      Fp8Block b;
      b.qkv = f8::quantize_weight(v.qkv_w, 3 * D, D, scaling, nullptr);
      b.proj = f8::quantize_weight(v.proj_w, D, D, scaling, nullptr);
      b.fc1 = f8::quantize_weight(v.fc1_w, H, D, scaling, nullptr);
      b.fc2 = f8::quantize_weight(v.fc2_w, D, H, scaling, nullptr);
      for (int k = 0; k < Fp8Calibration::kInputs; ++k)
        b.in[k] = f8::ActivationScale(cal.amax[i][k], f8::kCalibrationMargin);
      fp8_blocks.push_back(std::move(b));
    }
  }

  // Every component asked about its exact problem before anything is allocated for it.
  void setup(Lane& l) {
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
        {std::string("attention ") + attn.name, attn.supports(l.attn)},
        {std::string("mlp ") + mlp.name, mlp.supports(l.mlp)},
    };
    for (const auto& [who, why] : answers)
      if (!why.empty()) throw study::StudyError(study::ErrorKind::Usage, who + " refuses batch " +
                                                                              std::to_string(l.batch) + ": " + why);
    if (c.persistent)
      if (auto why = persistent::refuses(p, l.batch); !why.empty())
        throw study::StudyError(study::ErrorKind::Usage, "the persistent kernel refuses batch " +
                                                             std::to_string(l.batch) + ": " + why);
    if (c.fp8 && (D % 16 || D > study::fp8::kLayerNormMaxHidden))
      throw study::StudyError(study::ErrorKind::Usage, "the FP8 forward needs hidden a multiple of 16 and at most " +
                                                           std::to_string(study::fp8::kLayerNormMaxHidden) + ", not " +
                                                           std::to_string(D));

    l.gemm = std::make_unique<study::Gemm>();
    const std::size_t act = static_cast<std::size_t>(rows) * D;
    l.pe_scratch = study::DeviceBuffer<char>(patch_embed::scratch_bytes(l.pe));
    auto fresh_set = [&](__half* x_in) {
      LayerBuffers b{};
      b.x_in = x_in;
      b.ln1 = l.alloc(act);
      b.qkv = l.alloc(3 * act);
      b.attn = l.alloc(act);
      b.proj = c.fused_residual ? nullptr : l.alloc(act);
      b.x_mid = l.alloc(act);
      b.ln2 = l.alloc(act);
      b.h = l.alloc(4 * act);
      return b;
    };
    __half* x = l.alloc(act);
    if (c.arena) {
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
    l.cls = l.alloc(static_cast<std::size_t>(l.batch) * D);
    l.cls_norm = l.alloc(static_cast<std::size_t>(l.batch) * D);
    if (c.ln_folded) {
      l.row_mean = study::DeviceBuffer<float>(rows);
      l.row_rstd = study::DeviceBuffer<float>(rows);
    }
    if (c.persistent) l.blocks = std::make_unique<persistent::Blocks>(p, l.batch, w.blocks);
    if (c.fp8) {
      l.fp8_gemm = std::make_unique<study::Fp8Gemm>();
      l.act8 = study::DeviceBuffer<study::fp8::e4m3>(act);
    }
  }

  // While observe_gemm_inputs runs: max |x| of block `layer`'s GEMM input `which`.
  void observe_input(int layer, Fp8Calibration::Input which, const __half* x, long long n, cudaStream_t s) {
    if (observe) study::fp8::amax(x, n, observe + layer * Fp8Calibration::kInputs + which, s);
  }

  // A block's LayerNorm: into `out` (the family's version), or, folded, only the row statistics
  // of x, which the next GEMM's epilogue applies.
  // FP8: LN(x) written in E4M3 (into the lane's act8) with the static scale `scale`.
  // `prefetch`: bytes the family's kernel requests into L2 as it runs (c.l2_prefetch only).
  void block_layernorm(Lane& l, const __half* x, const __half* gamma, const __half* beta, __half* out,
                       cudaStream_t s, const study::fp8::ActivationScale* scale = nullptr,
                       study::ByteRange prefetch = {}) {
    if (c.fp8)
      study::fp8::layernorm_quantize(x, gamma, beta, l.ln.rows, l.ln.hidden, l.ln.eps, scale->inv_scale(),
                                     l.act8.get(), s);
    else if (c.ln_folded)
      study::cutlass_gemm::row_stats(x, l.ln.rows, l.ln.hidden, l.ln.eps, l.row_mean.get(), l.row_rstd.get(), s);
    else
      ln.launch(l.ln, {x, gamma, beta, out, prefetch}, s);
  }

  // c.l2_prefetch: what block i's LayerNorms request. LN2 asks for the first part of the next
  // block's weights (the final LayerNorm's and the head's after the last block), ~20 us of fc1
  // and fc2 ahead of the first of them at batch 1; LN1 of the first block asks for its own.
  // The carrying kernel is done only once its SMs have streamed their share of the request, so
  // the request is a trade: the whole next block slowed each LayerNorm by more than the GEMMs
  // gained, the first half (LN1, QKV, projection, LN2 and half of fc1, as they are packed) is
  // where the forward was fastest (e14's NOTES).
  static constexpr double kPrefetchShare = 0.5;
  study::ByteRange first_part(int block) const {
    study::ByteRange r = w.block_span(block);
    r.bytes = static_cast<std::size_t>(r.bytes * kPrefetchShare);
    return r;
  }
  study::ByteRange ln1_prefetch(int i) const {
    return c.l2_prefetch && i == 0 ? first_part(0) : study::ByteRange{};
  }
  study::ByteRange ln2_prefetch(int i) const {
    if (!c.l2_prefetch) return {};
    return i + 1 < p.model.layers ? first_part(i + 1) : w.head_span();
  }

  // The GEMM after a folded LayerNorm: y = act(LN(x) W^T + b) from the un-normalized x.
  void folded_gemm(Lane& l, const FoldedLinear& f, const study::GemmShape& shape, const __half* x, __half* y,
                   study::cutlass_gemm::Activation act, cudaStream_t s) {
    study::GemmOperands op;
    op.x = x;
    op.w = f.w.get();
    op.y = y;
    study::cutlass_gemm::RunOptions opt;
    opt.pdl = c.pdl;  // no cuBLASLt candidate: it has no folded LayerNorm
    study::cutlass_gemm::run_ln_folded(shape, act, op,
                                       {l.row_mean.get(), l.row_rstd.get(), f.col_sum.get(), f.col_bias.get()}, s,
                                       opt);
  }

  // An FP8 GEMM of a block: y = x W^T + bias (+ residual) in fp16, x the lane's act8 in scale x.
  void fp8_gemm(Lane& l, const study::GemmShape& shape, const study::fp8::ActivationScale& x,
                const study::fp8::Weight& w_, const __half* bias, const __half* residual, __half* y, cudaStream_t s) {
    study::Fp8Operands op;
    op.x = l.act8.get();
    op.x_scale = x.scale();
    op.w = &w_;
    op.bias = bias;
    op.residual = residual;
    op.y = y;
    l.fp8_gemm->run(shape, study::Epilogue::Bias, op, s);
  }

  // One component's launches: an NVTX range named after it (Nsight Systems shows the forward by
  // component), and CUDA events around it when a breakdown is being taken.
  template <class F>
  void component(const char* name, cudaStream_t s, F&& f) {
    study::NvtxRange range(name);
    if (!recorder) {
      f();
      return;
    }
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    recorder->marks.push_back({name, {a, b}});
    CUDA_CHECK(cudaEventRecord(a, s));
    f();
    CUDA_CHECK(cudaEventRecord(b, s));
  }

  // What the CUTLASS layer is told: PDL, the lane's cuBLASLt Gemm as one more candidate, and its
  // workspace lent to the split kernels (the lane's stream orders every use of it).
  study::cutlass_gemm::RunOptions cutlass_options(study::Gemm& gemm) const {
    study::cutlass_gemm::RunOptions opt;
    opt.pdl = c.pdl;
    if (c.cublaslt_candidates) opt.cublaslt = &gemm;
    if (c.split_gemms) {
      opt.workspace = gemm.lend_workspace();
      opt.workspace_bytes = gemm.workspace_bytes();
    }
    return opt;
  }

  // A block's QKV or projection GEMM (bias, and the residual when op has one) on the layer the
  // composition names.
  void block_gemm(const study::GemmShape& shape, const study::GemmOperands& op, study::Gemm& gemm, cudaStream_t s) {
    if (c.cutlass_gemms)
      study::cutlass_gemm::run(shape, study::cutlass_gemm::Activation::None, op, s, cutlass_options(gemm));
    else
      gemm.run(shape, study::Epilogue::Bias, op, s);
  }

  // Block i of the model on lane l: LN1, QKV, attention, projection (+ residual), LN2, MLP,
  // each through its family version (or the composition's technique).
  void block_forward(Lane& l, int i, cudaStream_t s) {
    const int D = p.model.hidden;
    const long long rows = static_cast<long long>(l.batch) * p.tokens();
    study::Gemm& gemm = *l.gemm;
    const LayerBuffers& b = l.layers[i];
    const BlockView& v = w.blocks[i];
    using Cal = Fp8Calibration;
    const Fp8Block* q = c.fp8 ? &fp8_blocks[i] : nullptr;
    component("layernorm", s, [&] {
      block_layernorm(l, b.x_in, v.ln1_g, v.ln1_b, b.ln1, s, q ? &q->in[Cal::Ln1] : nullptr, ln1_prefetch(i));
    });
    observe_input(i, Cal::Ln1, b.ln1, rows * D, s);
    component("qkv", s, [&] {
      if (q) {
        fp8_gemm(l, {static_cast<int>(rows), 3 * D, D}, q->in[Cal::Ln1], q->qkv, v.qkv_b, nullptr, b.qkv, s);
        return;
      }
      if (c.ln_folded) {
        folded_gemm(l, folded[i].qkv, {static_cast<int>(rows), 3 * D, D}, b.x_in, b.qkv,
                    study::cutlass_gemm::Activation::None, s);
        return;
      }
      study::GemmOperands op;
      op.x = b.ln1;
      op.w = v.qkv_w;
      op.y = b.qkv;
      op.bias = v.qkv_b;
      block_gemm({static_cast<int>(rows), 3 * D, D}, op, gemm, s);
    });
    component("attention", s, [&] {
      if (q && c.attention_e4m3)  // the projection's input, in E4M3 (its fp16 form never exists)
        attn.launch_e4m3(l.attn, b.qkv, l.act8.get(), q->in[Cal::Attention].inv_scale(), s);
      else
        attn.launch(l.attn, {b.qkv, b.attn}, s);
    });
    observe_input(i, Cal::Attention, b.attn, rows * D, s);
    component("projection", s, [&] {
      if (q) {  // an fp16 attention output is quantized by one pass before the GEMM
        if (!c.attention_e4m3)
          study::fp8::quantize(b.attn, rows * D, q->in[Cal::Attention].inv_scale(), l.act8.get(), s);
        fp8_gemm(l, {static_cast<int>(rows), D, D}, q->in[Cal::Attention], q->proj, v.proj_b,
                 c.fused_residual ? b.x_in : nullptr, c.fused_residual ? b.x_mid : b.proj, s);
        return;
      }
      study::GemmOperands op;
      op.x = b.attn;
      op.w = v.proj_w;
      op.bias = v.proj_b;
      op.y = c.fused_residual ? b.x_mid : b.proj;
      if (c.fused_residual) op.residual = b.x_in;
      block_gemm({static_cast<int>(rows), D, D}, op, gemm, s);
    });
    if (!c.fused_residual)
      component("residual_add", s, [&] { residual_add(b.x_in, b.proj, b.x_mid, rows * D, s); });
    component("layernorm", s, [&] {
      block_layernorm(l, b.x_mid, v.ln2_g, v.ln2_b, b.ln2, s, q ? &q->in[Cal::Ln2] : nullptr, ln2_prefetch(i));
    });
    observe_input(i, Cal::Ln2, b.ln2, rows * D, s);
    component("mlp", s, [&] {
      if (c.ln_folded) {  // fc1 with LN2 folded in, fc2 with bias and residual, both on CUTLASS
        folded_gemm(l, folded[i].fc1, {static_cast<int>(rows), p.model.mlp(), D}, b.x_mid, b.h,
                    study::cutlass_gemm::Activation::GeluTanh, s);
        study::cutlass_gemm::run({static_cast<int>(rows), D, p.model.mlp()}, study::cutlass_gemm::Activation::None,
                                 {b.h, v.fc2_w, b.x_out, v.fc2_b, b.x_mid}, s, cutlass_options(gemm));
        return;
      }
      mlp::Args a{};
      a.x = b.ln2;
      a.residual = b.x_mid;
      a.fc1_w = v.fc1_w;
      a.fc1_b = v.fc1_b;
      a.fc2_w = v.fc2_w;
      a.fc2_b = v.fc2_b;
      a.y = b.x_out;
      a.h = b.h;
      a.gemm = &gemm;
      a.pdl = c.pdl;
      mlp::Fp8Args f;  // LN2 wrote x in E4M3 already
      if (q) {
        f = {&q->fc1, &q->fc2, &q->in[Cal::Ln2], &q->in[Cal::Gelu], l.act8.get(), true, l.fp8_gemm.get()};
        a.fp8 = &f;
      }
      mlp.launch(l.mlp, a, s);
    });
    observe_input(i, Cal::Gelu, b.h, rows * p.model.mlp(), s);
  }

  void lane_forward(Lane& l, const __half* images, __half* logits, cudaStream_t s) {
    const int D = p.model.hidden, T = p.tokens();
    const std::size_t image_elems = static_cast<std::size_t>(study::kChannels) * p.image_size * p.image_size;
    study::Gemm& gemm = *l.gemm;
    component("patch_embed", s, [&] {
      patch_embed::Args a{};
      a.images = images + l.b0 * image_elems;
      a.conv_w = w.patch_w;
      a.conv_b = w.patch_b;
      a.cls_token = w.cls_token;
      a.pos_embed = w.pos_embed;
      a.out = l.layers[0].x_in;
      a.scratch = l.pe_scratch.get();
      a.gemm = &gemm;
      pe.launch(l.pe, a, s);
    });
    if (c.persistent) {
      const LayerBuffers& b = l.layers[0];
      component("blocks", s, [&] { l.blocks->run(b.x_in, b.qkv, b.attn, b.h, s); });
    } else {
      for (int i = 0; i < p.model.layers; ++i) block_forward(l, i, s);
    }
    component("head", s, [&] {
      // The persistent kernel updates the residual stream in place, in the first layer's buffer.
      const __half* x = c.persistent ? l.layers[0].x_in : l.layers.back().x_out;
      gather_cls_kernel<<<l.batch, 256, 0, s>>>(x, l.cls, T, D);
      LAUNCH_CHECK();
      ln.launch(l.ln_final, {l.cls, w.norm_g, w.norm_b, l.cls_norm}, s);
      study::GemmOperands op;
      op.x = l.cls_norm;
      op.w = w.head_w;
      op.bias = w.head_b;
      op.y = logits + static_cast<std::size_t>(l.b0) * p.num_classes;
      gemm.run({l.batch, p.num_classes, D}, study::Epilogue::Bias, op, s);
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
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
    try {
      eager(images, logits, capture_stream);
    } catch (...) {
      cudaStreamEndCapture(capture_stream, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(capture_stream, &g));
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

Breakdown Forward::breakdown(const __half* images, __half* logits, cudaStream_t stream) {
  // Warm first, so that plans and first-call costs are not in the breakdown.
  impl_->eager(images, logits, stream);
  Recorder rec;
  impl_->recorder = &rec;
  try {
    for (auto& l : impl_->lanes) impl_->lane_forward(l, images, logits, stream);
  } catch (...) {
    impl_->recorder = nullptr;
    throw;
  }
  impl_->recorder = nullptr;
  CUDA_CHECK(cudaStreamSynchronize(stream));
  Breakdown out;
  std::map<std::string, std::size_t> slot;
  for (auto& [name, ev] : rec.marks) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev.first, ev.second));
    auto it = slot.find(name);
    if (it == slot.end()) {
      slot[name] = out.us.size();
      out.us.push_back({name, 0.0});
      it = slot.find(name);
    }
    out.us[it->second].second += 1000.0 * ms;
  }
  return out;
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
  if (m.c.fp8 || m.c.ln_folded || m.lanes.size() != 1 || !m.mlp.computes_mlp)
    throw study::StudyError(study::ErrorKind::Usage,
                            "observing GEMM inputs needs an fp16 composition on one stream with nothing folded");
  const int layers = m.p.model.layers;
  study::DeviceBuffer<float> amax(static_cast<std::size_t>(layers) * Fp8Calibration::kInputs);
  CUDA_CHECK(cudaMemsetAsync(amax.get(), 0, amax.bytes(), stream));
  m.observe = amax.get();
  try {
    m.eager(images, logits, stream);
  } catch (...) {
    m.observe = nullptr;
    throw;
  }
  m.observe = nullptr;
  std::vector<float> host(amax.size());
  CUDA_CHECK(cudaMemcpyAsync(host.data(), amax.get(), amax.bytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  Fp8Calibration cal;
  cal.images = m.p.batch;
  for (int i = 0; i < layers; ++i) {
    std::array<float, Fp8Calibration::kInputs> a{};
    for (int k = 0; k < Fp8Calibration::kInputs; ++k) a[k] = host[static_cast<std::size_t>(i) * Fp8Calibration::kInputs + k];
    cal.amax.push_back(a);
  }
  return cal;
}

void calibrate_fp8(const Problem& p, DeviceWeights& w, const __half* images) {
  Composition c = best_composition();
  c.graph = false;
  c.mlp = "fused_epilogue";  // cuBLASLt's GELU epilogue writes h, the fc2 input the FP8 MLP quantizes
  study::DeviceBuffer<__half> logits(static_cast<std::size_t>(p.batch) * p.num_classes);
  Forward f(p, c, w);
  w.fp8_calibration = f.observe_gemm_inputs(images, logits.get(), nullptr);
}

}  // namespace encoder
