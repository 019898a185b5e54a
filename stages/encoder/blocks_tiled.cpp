// blocks=tiled: every block of the forward in one persistent kernel driven by the tile schedule
// (tiled.hpp): GEMM and attention tiles that wait on per-tile counters instead of e13's grid
// barriers, in the form the composition's tile_ fields choose (the A panel resident or streamed,
// CTAs an SM, the MMA instruction, where each LayerNorm runs, the epilogues' load order, the GEMM
// tasks' shape). The family versions of layernorm, attention and mlp are not asked (the layernorm
// version still serves the final LayerNorm, in the forward's head). The residual stream is
// updated in place, in the first layer's buffer.
#include "encoder/runner.hpp"
#include "encoder/tiled.hpp"

namespace encoder {

namespace {

class TiledBlocks final : public OneKernelBlocks<tiled::Blocks> {
 public:
  explicit TiledBlocks(const RunnerSetup& s) : p_(s.p), w_(s.w), form_(tiled::form_of(s.c)) {}

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
  if (!s.c.residual_epilogue()) return "the tiled kernel adds the residual in its GEMM epilogues (residual=epilogue)";
  if (const char* why = tiled::invalid(tiled::form_of(s.c))) return why;
  return tiled::refuses(s.p, lane_batch, tiled::form_of(s.c));
}

double extra_device_bytes(const Problem& p, const Composition& c, int lanes) {
  return static_cast<double>(lanes) *
         tiled::Blocks::scratch_bytes(p, (p.batch + c.streams - 1) / c.streams, tiled::form_of(c));
}

}  // namespace

// The residual is added in the kernel's epilogues; the kernel computes every part of the blocks.
extern const Runner tiled_runner = {
    Blocks::Tiled,
    field_bits({FieldId::residual, FieldId::tile_a, FieldId::tile_ctas, FieldId::tile_mma, FieldId::tile_ln,
                FieldId::tile_loads, FieldId::tile_shape}),
    [](const Composition& c) { return tiled::unavailable(tiled::form_of(c)); },
    supports,
    extra_device_bytes,
    [](const RunnerSetup& s) -> std::unique_ptr<BlockRunner> { return std::make_unique<TiledBlocks>(s); },
};

}  // namespace encoder
