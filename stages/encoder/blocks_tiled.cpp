// blocks=tiled, tiled_ln, tiled_2cta, tiled_wgmma and tiled_folded: every block of the forward in one
// persistent kernel driven by the tile schedule (tiled.hpp): GEMM and attention tiles that wait on
// per-tile counters instead of e13's grid barriers; tiled_ln with each row tile's LayerNorms as tasks
// of their own; tiled_2cta with those and two CTAs an SM; tiled_wgmma with those and wgmma products;
// tiled_folded as tiled_wgmma with the LayerNorms folded into QKV and fc1 instead of tasks;
// tiled_loads_first as tiled_folded with its epilogues' loads ahead of their stores; tiled_row_stats
// as tiled_loads_first with each row's LayerNorm statistics left by the epilogues that write it. The family
// versions of layernorm, attention and mlp are not asked (the layernorm version still serves the
// final LayerNorm, in the forward's head). The residual stream is updated in place, in the first
// layer's buffer.
#include "encoder/runner.hpp"
#include "encoder/tiled.hpp"

namespace encoder {

namespace {

class TiledBlocks final : public OneKernelBlocks<tiled::Blocks> {
 public:
  TiledBlocks(const RunnerSetup& s, tiled::Form form) : p_(s.p), w_(s.w), form_(form) {}

  void add_lane(Lane& l) override { lanes_.push_back(std::make_unique<tiled::Blocks>(p_, l.batch, w_.blocks, form_)); }

  void set_task_clock(bool on) override {
    for (auto& l : lanes_) l->set_clock(on);
  }
  std::vector<TaskTime> task_times(const Lane& l) const override { return lanes_[l.index]->task_times(); }

  std::string dependency_state() const override {
    std::string why;
    for (std::size_t i = 0; i < lanes_.size(); ++i)
      if (auto w = lanes_[i]->dependency_state(); !w.empty()) why += "lane " + std::to_string(i) + ": " + w;
    return why;
  }

 private:
  const Problem& p_;
  const DeviceWeights& w_;
  tiled::Form form_;
};

std::string supports(const RunnerSetup& s, int lane_batch) {
  if (!s.c.residual_epilogue) return "the tiled kernel adds the residual in its GEMM epilogues (residual=epilogue)";
  return tiled::refuses(s.p, lane_batch);
}

tiled::Form form_of(Blocks b) {
  switch (b) {
    case Blocks::Tiled: return tiled::Form::PanelLayerNorm;
    case Blocks::TiledLn: return tiled::Form::LnTasks;
    case Blocks::TiledTwoCtas: return tiled::Form::TwoCtas;
    case Blocks::TiledWgmma: return tiled::Form::Wgmma;
    case Blocks::TiledFolded: return tiled::Form::FoldedLn;
    case Blocks::TiledLoadsFirst: return tiled::Form::LoadsFirst;
    default: return tiled::Form::RowStats;
  }
}

double extra_device_bytes(const Problem& p, const Composition& c, int lanes) {
  return static_cast<double>(lanes) *
         tiled::Blocks::scratch_bytes(p, (p.batch + c.streams - 1) / c.streams, form_of(c.blocks));
}

template <Blocks kBlocks>
std::unique_ptr<BlockRunner> make(const RunnerSetup& s) {
  return std::make_unique<TiledBlocks>(s, form_of(kBlocks));
}

template <Blocks kBlocks>
std::string unavailable() {
  return tiled::unavailable(form_of(kBlocks));
}

}  // namespace

// The residual is added in the kernel's epilogues; the kernel computes every part of the blocks.
extern const Runner tiled_runner = {Blocks::Tiled, kFieldResidual, unavailable<Blocks::Tiled>, supports,
                                    extra_device_bytes, make<Blocks::Tiled>};
extern const Runner tiled_ln_runner = {Blocks::TiledLn, kFieldResidual, unavailable<Blocks::TiledLn>, supports,
                                       extra_device_bytes, make<Blocks::TiledLn>};
extern const Runner tiled_2cta_runner = {Blocks::TiledTwoCtas, kFieldResidual, unavailable<Blocks::TiledTwoCtas>,
                                         supports, extra_device_bytes, make<Blocks::TiledTwoCtas>};
extern const Runner tiled_wgmma_runner = {Blocks::TiledWgmma, kFieldResidual, unavailable<Blocks::TiledWgmma>,
                                          supports, extra_device_bytes, make<Blocks::TiledWgmma>};
extern const Runner tiled_folded_runner = {Blocks::TiledFolded, kFieldResidual, unavailable<Blocks::TiledFolded>,
                                           supports, extra_device_bytes, make<Blocks::TiledFolded>};
extern const Runner tiled_loads_first_runner = {Blocks::TiledLoadsFirst, kFieldResidual,
                                                unavailable<Blocks::TiledLoadsFirst>, supports, extra_device_bytes,
                                                make<Blocks::TiledLoadsFirst>};
extern const Runner tiled_row_stats_runner = {Blocks::TiledRowStats, kFieldResidual, unavailable<Blocks::TiledRowStats>,
                                              supports, extra_device_bytes, make<Blocks::TiledRowStats>};

}  // namespace encoder
