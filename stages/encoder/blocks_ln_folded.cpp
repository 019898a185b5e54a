// blocks=fp16_ln_folded: LN1 and LN2 folded into the GEMMs after them (common/gemm/cutlass_gemm.hpp,
// LnFold), all four GEMMs on the CUTLASS layer:
//   row statistics of x -> QKV GEMM (LN1 in its epilogue) + bias -> attention -> projection GEMM
//   + bias (+ residual) -> row statistics of x_mid -> fc1 GEMM (LN2 in its epilogue) + bias +
//   GELU (tanh) -> fc2 GEMM + bias + residual
// No normalized copy is written; the MLP's family version is not asked (its two GEMMs are
// these). The folded weights are made once per forward object.
#include "encoder/runner.hpp"
#include "gemm/cutlass_gemm.hpp"

namespace encoder {

namespace {

namespace cg = study::cutlass_gemm;

class LnFoldedBlocks final : public BlockRunner {
 public:
  explicit LnFoldedBlocks(const RunnerSetup& s) : p_(s.p), c_(s.c), w_(s.w), attn_(*s.attn) {
    const int D = p_.model.hidden;
    for (const BlockView& v : w_.blocks)
      folded_.push_back({fold(v.qkv_w, v.qkv_b, v.ln1_g, v.ln1_b, 3 * D, D),
                         fold(v.fc1_w, v.fc1_b, v.ln2_g, v.ln2_b, p_.model.mlp(), D)});
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  void add_lane(Lane& l) override {
    stats_.push_back({study::DeviceBuffer<float>(l.rows()), study::DeviceBuffer<float>(l.rows())});
  }

  const __half* run(Lane& l, Marks& m, cudaStream_t s) override {
    for (int i = 0; i < p_.model.layers; ++i) block(l, i, m, s);
    return l.layers.back().x_out;
  }

 private:
  // A Linear with the LayerNorm before it folded in (cutlass_gemm.hpp, fold_layernorm).
  struct FoldedLinear {
    study::DeviceBuffer<__half> w;
    study::DeviceBuffer<float> col_sum, col_bias;
  };
  struct FoldedBlock {
    FoldedLinear qkv, fc1;
  };
  struct RowStats {
    study::DeviceBuffer<float> mean, rstd;
  };

  static FoldedLinear fold(const __half* w, const __half* b, const __half* gamma, const __half* beta, int n, int k) {
    FoldedLinear f{study::DeviceBuffer<__half>(static_cast<std::size_t>(n) * k), study::DeviceBuffer<float>(n),
                   study::DeviceBuffer<float>(n)};
    cg::fold_layernorm(w, b, gamma, beta, n, k, f.w.get(), f.col_sum.get(), f.col_bias.get(), nullptr);
    return f;
  }

  cg::RunOptions options(study::Gemm& gemm) const {
    cg::RunOptions opt;
    opt.pdl = c_.pdl;
    if (c_.gemms.has(GemmCandidate::Cublaslt)) opt.cublaslt = &gemm;
    return opt;
  }

  // y = act(LN(x) W^T + b) from the un-normalized x and the lane's row statistics of x. No
  // cuBLASLt candidate: it has no folded LayerNorm.
  void folded_gemm(const RowStats& st, const FoldedLinear& f, const study::GemmShape& shape, const __half* x,
                   __half* y, cg::Activation act, cudaStream_t s) const {
    cg::RunOptions opt;
    opt.pdl = c_.pdl;
    cg::run_ln_folded(shape, act, {x, f.w.get(), y}, {st.mean.get(), st.rstd.get(), f.col_sum.get(), f.col_bias.get()},
                      s, opt);
  }

  void block(Lane& l, int i, Marks& m, cudaStream_t s) {
    const int D = p_.model.hidden, rows = static_cast<int>(l.rows());
    const LayerBuffers& b = l.layers[i];
    const BlockView& v = w_.blocks[i];
    const RowStats& st = stats_[l.index];
    const FoldedBlock& f = folded_[i];
    auto stats = [&](const __half* x) {
      cg::row_stats(x, rows, D, l.ln.eps, st.mean.get(), st.rstd.get(), s);
    };
    m.component("layernorm", s, [&] { stats(b.x_in); });
    m.component("qkv", s, [&] { folded_gemm(st, f.qkv, {rows, 3 * D, D}, b.x_in, b.qkv, cg::Activation::None, s); });
    m.component("attention", s, [&] { attn_.launch(l.attn, {b.qkv, b.attn}, s); });
    m.component("projection", s, [&] {
      study::GemmOperands op{b.attn, v.proj_w, c_.residual_epilogue() ? b.x_mid : b.proj, v.proj_b};
      if (c_.residual_epilogue()) op.residual = b.x_in;
      cg::run({rows, D, D}, cg::Activation::None, op, s, options(*l.gemm));
    });
    if (!c_.residual_epilogue())
      m.component("residual_add", s, [&] { residual_add(b.x_in, b.proj, b.x_mid, l.rows() * D, s); });
    m.component("layernorm", s, [&] { stats(b.x_mid); });
    m.component("mlp", s, [&] {
      folded_gemm(st, f.fc1, {rows, p_.model.mlp(), D}, b.x_mid, b.h, cg::Activation::GeluTanh, s);
      cg::run({rows, D, p_.model.mlp()}, cg::Activation::None, {b.h, v.fc2_w, b.x_out, v.fc2_b, b.x_mid}, s,
              options(*l.gemm));
    });
  }

  const Problem& p_;
  const Composition& c_;
  const DeviceWeights& w_;
  const attention::Version& attn_;
  std::vector<FoldedBlock> folded_;
  std::vector<RowStats> stats_;  // one per lane
};

std::string supports(const RunnerSetup& s, int) {
  if (!s.c.gemms.has(GemmCandidate::Cutlass))
    return "a folded LayerNorm runs on the CUTLASS GEMM layer only (gemms=cutlass)";
  if (s.c.gemms.has(GemmCandidate::SmallM))
    return "the few-rows kernels have no folded LayerNorm: gemms=cutlass or cutlass+cublaslt";
  if (s.p.model.hidden % 8 || s.p.model.hidden > 1024)
    return "the row statistics need hidden a multiple of 8 and at most 1024, not " + std::to_string(s.p.model.hidden);
  return {};
}

// The folded QKV and fc1 weights (fp16) with their fp32 vectors, and each lane's row statistics.
double extra_device_bytes(const Problem& p, const Composition&, int) {
  const double d = p.model.hidden, n = 3 * d + p.model.mlp();
  return p.model.layers * (sizeof(__half) * n * d + sizeof(float) * 2 * n) + sizeof(float) * 2.0 * p.rows();
}

}  // namespace

extern const Runner fp16_ln_folded_runner = {
    Blocks::Fp16LnFolded,
    field_bits({FieldId::attention, FieldId::gemms, FieldId::residual, FieldId::pdl}),
    [](const Composition&) { return study::cutlass_gemm::unavailable(); },
    supports,
    extra_device_bytes,
    [](const RunnerSetup& s) -> std::unique_ptr<BlockRunner> { return std::make_unique<LnFoldedBlocks>(s); },
};

}  // namespace encoder
