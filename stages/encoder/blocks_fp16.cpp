// blocks=fp16: a kernel (or library call) per op, every op through its family's version:
//   LN1 (layernorm) -> QKV GEMM + bias -> attention -> projection GEMM + bias (+ residual in its
//   epilogue, or an add kernel after it) -> LN2 (layernorm) -> MLP (mlp: fc1, GELU, fc2, residual)
// The QKV and projection GEMMs run on cuBLASLt or on the CUTLASS layer (gemms=; small_m+ adds the
// layer's few-rows kernels to its search); with l2_prefetch, the LayerNorm kernels carry the L2
// requests for the weights ahead.
#include "encoder/runner.hpp"
#include "gemm/cutlass_gemm.hpp"
#include "harness/test_hooks.hpp"

namespace encoder {

namespace {

class Fp16Blocks final : public BlockRunner {
 public:
  explicit Fp16Blocks(const RunnerSetup& s) : p_(s.p), c_(s.c), w_(s.w), ln_(s.ln), attn_(*s.attn), mlp_(*s.mlp) {}

  void add_lane(Lane&) override {}

#ifdef STUDY_TEST_HOOKS
  unsigned long long l2_requested_bytes() const override {
    unsigned long long n = 0;
    CUDA_CHECK(cudaMemcpy(&n, requested_.get(), sizeof n, cudaMemcpyDeviceToHost));
    return n;
  }
#endif

  const __half* run(Lane& l, Marks& m, cudaStream_t s) override {
    for (int i = 0; i < p_.model.layers; ++i) block(l, i, m, s);
    return l.layers.back().x_out;
  }

 private:
  // The first part of block i's weights: LN1, QKV, projection, LN2 and half of fc1 as they are
  // packed. The carrying kernel is done only once its SMs have streamed their share of the
  // request, so the request is a trade: the whole next block slowed each LayerNorm by more than
  // the GEMMs gained; the first half is where the forward was fastest (e14's NOTES).
  study::ByteRange first_part(int block) const {
    study::ByteRange r = w_.block_span(block);
    r.bytes = static_cast<std::size_t>(r.bytes * kL2PrefetchShare);
    return counted(r);
  }
  // LN1 of the first block asks for its own block's first part; LN2 of block i for block i+1's
  // (the final LayerNorm's and the head's after the last block), ~20 us of fc1 and fc2 ahead of
  // the first of them at batch 1.
  study::ByteRange ln1_prefetch(int i) const { return c_.l2_prefetch && i == 0 ? first_part(0) : study::ByteRange{}; }
  study::ByteRange ln2_prefetch(int i) const {
    if (!c_.l2_prefetch) return {};
    return i + 1 < p_.model.layers ? first_part(i + 1) : counted(w_.head_span());
  }
  // In test-hook builds every chunk the LayerNorm kernel requests is added up on the device.
  study::ByteRange counted(study::ByteRange r) const {
#ifdef STUDY_TEST_HOOKS
    r.requested = requested_.get();
#endif
    return r;
  }

  // What the CUTLASS layer is told: PDL, and the lane's cuBLASLt Gemm as one more candidate.
  study::cutlass_gemm::RunOptions cutlass_options(study::Gemm& gemm) const {
    study::cutlass_gemm::RunOptions opt;
    opt.pdl = c_.pdl;
    if (c_.gemms.has(GemmCandidate::Cublaslt)) opt.cublaslt = &gemm;
    opt.small_m = c_.gemms.has(GemmCandidate::SmallM);
    return opt;
  }

  // The QKV or projection GEMM (bias, and the residual when op has one) on the composition's layer.
  void gemm(const study::GemmShape& shape, const study::GemmOperands& op, study::Gemm& g, cudaStream_t s) const {
    if (!c_.gemms.has(GemmCandidate::Cutlass))
      g.run(shape, study::Epilogue::Bias, op, s);
    else
      study::cutlass_gemm::run(shape, study::cutlass_gemm::Activation::None, op, s, cutlass_options(g));
  }

  void block(Lane& l, int i, Marks& m, cudaStream_t s) {
    const int D = p_.model.hidden, rows = static_cast<int>(l.rows());
    const LayerBuffers& b = l.layers[i];
    const BlockView& v = w_.blocks[i];
    using Cal = Fp8Calibration;
    const bool swap = study::planted("layernorm_gamma_beta_swapped");
    m.component("layernorm", s, [&] {
      ln_.launch(l.ln, {b.x_in, swap ? v.ln1_b : v.ln1_g, swap ? v.ln1_g : v.ln1_b, b.ln1, ln1_prefetch(i)}, s);
    });
    m.observe_input(i, Cal::Ln1, b.ln1, l.rows() * D, s);
    m.component("qkv", s, [&] { gemm({rows, 3 * D, D}, {b.ln1, v.qkv_w, b.qkv, v.qkv_b}, *l.gemm, s); });
    m.observe_input(i, Cal::Qkv, b.qkv, l.rows() * 3 * D, s);
    m.component("attention", s, [&] { attn_.launch(l.attn, {b.qkv, b.attn}, s); });
    if (study::kTestHooks) plant_attention_bugs(l, b, s);
    m.observe_input(i, Cal::Attention, b.attn, l.rows() * D, s);
    m.component("projection", s, [&] {
      study::GemmOperands op{b.attn, v.proj_w, c_.residual_epilogue() ? b.x_mid : b.proj, v.proj_b};
      if (c_.residual_epilogue()) op.residual = b.x_in;
      gemm({rows, D, D}, op, *l.gemm, s);
    });
    if (!c_.residual_epilogue())
      m.component("residual_add", s, [&] { residual_add(b.x_in, b.proj, b.x_mid, l.rows() * D, s); });
    m.component("layernorm", s, [&] { ln_.launch(l.ln, {b.x_mid, v.ln2_g, v.ln2_b, b.ln2, ln2_prefetch(i)}, s); });
    m.observe_input(i, Cal::Ln2, b.ln2, l.rows() * D, s);
    m.component("mlp", s, [&] { mlp_.launch(l.mlp, mlp_args(l, b, v, c_.pdl), s); });
    if (study::planted("mlp_skips_last_row_tile")) {  // those rows keep the residual alone
      const long long tail = l.rows() % 64, row0 = l.rows() - tail;
      CUDA_CHECK(cudaMemcpyAsync(b.x_out + row0 * D, b.x_mid + row0 * D, sizeof(__half) * tail * D,
                                 cudaMemcpyDeviceToDevice, s));
    }
    m.observe_input(i, Cal::Gelu, b.h, l.rows() * p_.model.mlp(), s);
  }

  // The attention's planted bugs (test-hook builds), each image's rows in turn: its last
  // 64-query tile zeroed; or its queries before the last key tile's start recomputed over the
  // keys before it alone (the one-image problem of that many tokens, on the same rows).
  void plant_attention_bugs(const Lane& l, const LayerBuffers& b, cudaStream_t s) const {
    const int T = p_.tokens(), D = p_.model.hidden, last = (T - 1) / 64 * 64;
    for (int img = 0; img < l.batch; ++img) {
      __half* out = b.attn + static_cast<std::size_t>(img) * T * D;
      if (study::planted("attention_zeroes_last_query_tile"))
        CUDA_CHECK(cudaMemsetAsync(out + static_cast<std::size_t>(last) * D, 0, sizeof(__half) * (T - last) * D, s));
      if (study::planted("attention_drops_last_key_tile") && last > 0)
        attn_.launch({1, last, p_.model.heads, p_.model.head_dim()},
                     {b.qkv + static_cast<std::size_t>(img) * T * 3 * D, out}, s);
    }
  }

  const Problem& p_;
  const Composition& c_;
  const DeviceWeights& w_;
  const layernorm::Version& ln_;
  const attention::Version& attn_;
  const mlp::Version& mlp_;
#ifdef STUDY_TEST_HOOKS
  study::DeviceBuffer<unsigned long long> requested_ = [] {
    study::DeviceBuffer<unsigned long long> n(1);
    CUDA_CHECK(cudaMemset(n.get(), 0, n.bytes()));
    return n;
  }();
#endif
};

std::string supports(const RunnerSetup& s, int) {
  if (s.c.l2_prefetch && !layernorm::carries_prefetch(s.ln))
    return std::string("the L2 prefetch rides on the LayerNorm kernel (Args::prefetch), which layernorm ") +
           s.ln.name + " does not carry";
  if (s.mlp->fp8) return std::string("mlp ") + s.mlp->name + " takes E4M3 inputs: blocks=fp8 only";
  if (s.c.gemms.has(GemmCandidate::SmallM) && !s.c.gemms.has(GemmCandidate::Cutlass))
    return "the few-rows kernels are candidates of the CUTLASS layer's search: gemms=small_m+cutlass(+cublaslt)";
  return {};
}

}  // namespace

extern const Runner fp16_runner = {
    Blocks::Fp16,
    field_bits({FieldId::attention, FieldId::mlp, FieldId::gemms, FieldId::residual, FieldId::pdl,
                FieldId::l2_prefetch}),
    [](const Composition&) { return std::string(); },
    supports,
    [](const Problem&, const Composition&, int) { return 0.0; },
    [](const RunnerSetup& s) -> std::unique_ptr<BlockRunner> { return std::make_unique<Fp16Blocks>(s); },
};

}  // namespace encoder
