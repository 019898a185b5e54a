// blocks=fp8: the four block GEMMs in FP8 E4M3 on cuBLASLt (common/gemm/fp8.hpp), the residual
// stream in fp16:
//   LN1 written in E4M3 -> QKV GEMM + bias (in fp16, or with qkv_e4m3 in E4M3, which the attention
//   reads) -> attention -> (one quantizing pass, or with attn_e4m3 the attention writes E4M3
//   itself) -> projection GEMM + bias (+ residual) -> LN2 written in E4M3 -> MLP (its FP8 version:
//   fc1 + bias + GELU to E4M3, fc2 + bias + residual)
// Weights are quantized per tensor once per forward object; activations take the static scales
// of the weights' calibration (encoder::calibrate_fp8), which the forward refuses to run without.
// With gemms=cutlass+cublaslt the QKV and projection GEMMs run on the CUTLASS layer's FP8 kernels,
// searched per shape with cuBLASLt's FP8 GEMM one more candidate (cutlass_gemm::run_fp8).
#include "encoder/runner.hpp"
#include "gemm/cutlass_gemm.hpp"
#include "gemm/fp8.hpp"
#include "gemm/fp8_reference.hpp"
#include "harness/gpu.hpp"

namespace encoder {

namespace {

namespace f8 = study::fp8;
using Cal = Fp8Calibration;

class Fp8Blocks final : public BlockRunner {
 public:
  explicit Fp8Blocks(const RunnerSetup& s) : p_(s.p), c_(s.c), w_(s.w), attn_(*s.attn), mlp_(*s.mlp) {
    const Cal& cal = w_.fp8_calibration;
    if (static_cast<int>(cal.amax.size()) != p_.model.layers)
      throw study::StudyError(study::ErrorKind::Usage,
                              "an FP8 forward needs the weights' calibration (encoder::calibrate_fp8) for its " +
                                  std::to_string(p_.model.layers) + " blocks; it has " +
                                  std::to_string(cal.amax.size()));
    const int D = p_.model.hidden, H = p_.model.mlp();
    const auto scaling = f8::Scaling::Tensor;
    for (std::size_t i = 0; i < w_.blocks.size(); ++i) {
      const BlockView& v = w_.blocks[i];
      Block b;
      b.qkv = f8::quantize_weight(v.qkv_w, 3 * D, D, scaling, nullptr);
      b.proj = f8::quantize_weight(v.proj_w, D, D, scaling, nullptr);
      b.fc1 = f8::quantize_weight(v.fc1_w, H, D, scaling, nullptr);
      b.fc2 = f8::quantize_weight(v.fc2_w, D, H, scaling, nullptr);
      for (int k = 0; k < Cal::kInputs; ++k) b.in[k] = f8::ActivationScale(cal.amax[i][k], f8::kCalibrationMargin);
      blocks_.push_back(std::move(b));
    }
  }

  // The lane's FP8 GEMM layer, one E4M3 buffer [rows, hidden] for the GEMM input of the moment
  // (LN1's output, attention's output, LN2's output in turn) and with qkv_e4m3 one [rows, 3 hidden]
  // for the QKV GEMM's output.
  void add_lane(Lane& l) override {
    const std::size_t act = static_cast<std::size_t>(l.rows()) * p_.model.hidden;
    lanes_.push_back({std::make_unique<study::Fp8Gemm>(), study::DeviceBuffer<f8::e4m3>(act),
                      study::DeviceBuffer<f8::e4m3>(c_.qkv_e4m3 ? 3 * act : 0)});
  }

  const __half* run(Lane& l, Marks& m, cudaStream_t s) override {
    for (int i = 0; i < p_.model.layers; ++i) block(l, i, m, s);
    return l.layers.back().x_out;
  }

  void poison_scratch() override {
    for (auto& st : lanes_) {
      study::poison(st.act8);
      if (c_.qkv_e4m3) study::poison(st.qkv8);
    }
  }

  void capture_fp8_stages() override {
    const std::size_t act = static_cast<std::size_t>(p_.rows()) * p_.model.hidden;
    capture_ = std::make_unique<Capture>(Capture{study::DeviceBuffer<__half>(act), study::DeviceBuffer<f8::e4m3>(act),
                                                 study::DeviceBuffer<f8::e4m3>(act),
                                                 study::DeviceBuffer<f8::e4m3>(act)});
  }

  Forward::Fp8Stages fp8_stages(const Lane& l) const override {
    if (!capture_) throw study::StudyError(study::ErrorKind::Usage, "capture_fp8_stages() was not called");
    const LayerBuffers& b = l.layers.back();
    const std::size_t act = static_cast<std::size_t>(l.rows()) * p_.model.hidden;
    auto halves = [](const __half* d, std::size_t n) {
      std::vector<__half> h(n);
      CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(__half), cudaMemcpyDeviceToHost));
      std::vector<float> out(n);
      for (std::size_t i = 0; i < n; ++i) out[i] = __half2float(h[i]);
      return out;
    };
    auto e4m3s = [](const void* d, std::size_t n) { return f8::host_values(static_cast<const f8::e4m3*>(d), n); };
    CUDA_CHECK(cudaDeviceSynchronize());
    // With qkv_e4m3 the QKV GEMM wrote E4M3 only (the last block's is still in the lane's buffer).
    const std::vector<float> qkv = c_.qkv_e4m3 ? e4m3s(lanes_[l.index].qkv8.get(), 3 * act) : halves(b.qkv, 3 * act);
    return {halves(capture_->x_in.get(), act), e4m3s(capture_->ln1.get(), act), qkv,
            e4m3s(capture_->attn.get(), act), halves(b.x_mid, act), e4m3s(capture_->ln2.get(), act),
            e4m3s(b.h, act / p_.model.hidden * p_.model.mlp()), halves(b.x_out, act)};
  }

 private:
  // Each block's four weights in E4M3 and the static scales of their inputs.
  struct Block {
    f8::Weight qkv, proj, fc1, fc2;
    f8::ActivationScale in[Cal::kInputs];
  };
  struct LaneState {
    std::unique_ptr<study::Fp8Gemm> gemm;
    study::DeviceBuffer<f8::e4m3> act8, qkv8;
  };
  // The last block's input and E4M3 GEMM inputs, copied aside (a test hook).
  struct Capture {
    study::DeviceBuffer<__half> x_in;
    study::DeviceBuffer<f8::e4m3> ln1, attn, ln2;
  };
  template <class T>
  void keep(study::DeviceBuffer<T>& to, const void* from, cudaStream_t s) const {
    CUDA_CHECK(cudaMemcpyAsync(to.get(), from, to.bytes(), cudaMemcpyDeviceToDevice, s));
  }

  // y = x W^T + bias (+ residual) in fp16, x the lane's act8 in scale x; or, given y8, the same
  // without a residual in E4M3, in scale y8_scale.
  void gemm(LaneState& st, const study::GemmShape& shape, const f8::ActivationScale& x, const f8::Weight& w,
            const __half* bias, const __half* residual, __half* y, cudaStream_t s, f8::e4m3* y8 = nullptr,
            const f8::ActivationScale* y8_scale = nullptr) const {
    study::Fp8Operands op;
    op.x = st.act8.get();
    op.x_scale = x.scale();
    op.w = &w;
    op.bias = bias;
    op.residual = residual;
    op.y = y;
    op.y8 = y8;
    op.y_inv_scale = y8_scale ? y8_scale->inv_scale() : nullptr;
    if (c_.gemms.has(GemmCandidate::Cutlass))
      study::cutlass_gemm::run_fp8(shape, study::Epilogue::Bias, op, s, {c_.pdl, st.gemm.get()});
    else
      st.gemm->run(shape, study::Epilogue::Bias, op, s);
  }

  void block(Lane& l, int i, Marks& m, cudaStream_t s) {
    const int D = p_.model.hidden, rows = static_cast<int>(l.rows());
    const LayerBuffers& b = l.layers[i];
    const BlockView& v = w_.blocks[i];
    const Block& q = blocks_[i];
    LaneState& st = lanes_[l.index];
    auto layernorm = [&](const __half* x, const __half* gamma, const __half* beta, const f8::ActivationScale& scale) {
      f8::layernorm_quantize(x, gamma, beta, rows, D, l.ln.eps, scale.inv_scale(), st.act8.get(), s);
    };
    Capture* cap = i + 1 == p_.model.layers ? capture_.get() : nullptr;
    if (cap) keep(cap->x_in, b.x_in, s);
    m.component("layernorm", s, [&] { layernorm(b.x_in, v.ln1_g, v.ln1_b, q.in[Cal::Ln1]); });
    if (cap) keep(cap->ln1, st.act8.get(), s);
    m.component("qkv", s, [&] {
      if (c_.qkv_e4m3)  // the attention's input, in E4M3 (its fp16 form never exists)
        gemm(st, {rows, 3 * D, D}, q.in[Cal::Ln1], q.qkv, v.qkv_b, nullptr, nullptr, s, st.qkv8.get(), &q.in[Cal::Qkv]);
      else
        gemm(st, {rows, 3 * D, D}, q.in[Cal::Ln1], q.qkv, v.qkv_b, nullptr, b.qkv, s);
    });
    m.component("attention", s, [&] {
      if (c_.qkv_e4m3)
        attn_.launch_e4m3_qkv(l.attn, st.qkv8.get(), q.in[Cal::Qkv].host_scale, st.act8.get(),
                              q.in[Cal::Attention].inv_scale(), s);
      else if (c_.attention_e4m3)  // the projection's input, in E4M3 (its fp16 form never exists)
        attn_.launch_e4m3(l.attn, b.qkv, st.act8.get(), q.in[Cal::Attention].inv_scale(), s);
      else
        attn_.launch(l.attn, {b.qkv, b.attn}, s);
    });
    m.component("projection", s, [&] {
      if (!c_.attention_e4m3)  // the fp16 attention output is quantized by one pass before the GEMM
        f8::quantize(b.attn, l.rows() * D, q.in[Cal::Attention].inv_scale(), st.act8.get(), s);
      if (cap) keep(cap->attn, st.act8.get(), s);
      gemm(st, {rows, D, D}, q.in[Cal::Attention], q.proj, v.proj_b, c_.residual_epilogue() ? b.x_in : nullptr,
           c_.residual_epilogue() ? b.x_mid : b.proj, s);
    });
    if (!c_.residual_epilogue())
      m.component("residual_add", s, [&] { residual_add(b.x_in, b.proj, b.x_mid, l.rows() * D, s); });
    m.component("layernorm", s, [&] { layernorm(b.x_mid, v.ln2_g, v.ln2_b, q.in[Cal::Ln2]); });
    if (cap) keep(cap->ln2, st.act8.get(), s);
    m.component("mlp", s, [&] {
      mlp::Args a = mlp_args(l, b, v, c_.pdl);
      const mlp::Fp8Args f{&q.fc1, &q.fc2, &q.in[Cal::Ln2], &q.in[Cal::Gelu], st.act8.get(), true, st.gemm.get()};
      a.fp8 = &f;  // LN2 wrote x in E4M3 already
      mlp_.launch(l.mlp, a, s);
    });
  }

  const Problem& p_;
  const Composition& c_;
  const DeviceWeights& w_;
  const attention::Version& attn_;
  const mlp::Version& mlp_;
  std::vector<Block> blocks_;
  std::vector<LaneState> lanes_;
  std::unique_ptr<Capture> capture_;
};

std::string supports(const RunnerSetup& s, int) {
  const int D = s.p.model.hidden;
  if (!s.mlp->fp8) return std::string("an FP8 forward needs an FP8 MLP version, not ") + s.mlp->name;
  if (s.c.qkv_e4m3 && !s.c.attention_e4m3)
    return "an attention reading E4M3 (qkv_e4m3) writes E4M3 too: it needs attn_e4m3";
  if (s.c.qkv_e4m3 && !s.attn->launch_e4m3_qkv)
    return std::string("an E4M3 QKV needs an attention version that reads it, not ") + s.attn->name;
  if (s.c.attention_e4m3 && !s.c.qkv_e4m3 && !s.attn->launch_e4m3)
    return std::string("an E4M3 attention output needs an attention version that writes E4M3, not ") + s.attn->name;
  if (s.c.gemms.has(GemmCandidate::SmallM))
    return "the few-rows kernels are fp16 only: gemms=cublaslt or cutlass+cublaslt";
  using G = GemmCandidate;
  if (s.c.gemms != Set<G>{G::Cublaslt} && s.c.gemms != Set<G>{G::Cutlass, G::Cublaslt})
    return "its GEMMs are cuBLASLt's FP8 GEMMs (gemms=cublaslt) or the CUTLASS layer's with cuBLASLt a candidate "
           "(gemms=cutlass+cublaslt)";
  if (s.c.gemms.has(GemmCandidate::Cutlass))
    if (auto why = study::cutlass_gemm::unavailable(); !why.empty()) return why;
  if (D % 16 || D > f8::kLayerNormMaxHidden)
    return "the FP8 forward needs hidden a multiple of 16 and at most " + std::to_string(f8::kLayerNormMaxHidden) +
           ", not " + std::to_string(D);
  return {};
}

// E4M3 weights of the four GEMMs; per lane an E4M3 activation buffer (and QKV buffer) and a GEMM
// workspace.
double extra_device_bytes(const Problem& p, const Composition& c, int lanes) {
  const double d = p.model.hidden;
  return p.model.layers * 12.0 * d * d + static_cast<double>(p.rows()) * d * (c.qkv_e4m3 ? 4 : 1) +
         lanes * 32.0 * (1 << 20);
}

}  // namespace

extern const Runner fp8_runner = {
    Blocks::Fp8,
    field_bits({FieldId::attention, FieldId::mlp, FieldId::gemms, FieldId::residual, FieldId::pdl,
                FieldId::attention_e4m3, FieldId::qkv_e4m3}),
    [](const Composition&) { return f8::unavailable(); },
    supports,
    extra_device_bytes,
    [](const RunnerSetup& s) -> std::unique_ptr<BlockRunner> { return std::make_unique<Fp8Blocks>(s); },
};

}  // namespace encoder
