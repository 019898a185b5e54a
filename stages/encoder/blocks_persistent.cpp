// blocks=persistent: every block of the forward in one persistent kernel (persistent.hpp): its
// own GEMM and attention tiles, the LayerNorms in the GEMMs' prologues, grid barriers between
// phases. The family versions of layernorm, attention and mlp are not asked (the layernorm
// version still serves the final LayerNorm, in the forward's head). The residual stream is
// updated in place, in the first layer's buffer.
#include "encoder/persistent.hpp"
#include "encoder/runner.hpp"

namespace encoder {

namespace {

class PersistentBlocks final : public OneKernelBlocks<persistent::Blocks> {
 public:
  explicit PersistentBlocks(const RunnerSetup& s) : p_(s.p), w_(s.w) {}

  void add_lane(Lane& l) override { lanes_.push_back(std::make_unique<persistent::Blocks>(p_, l.batch, w_.blocks)); }

 private:
  const Problem& p_;
  const DeviceWeights& w_;
};

std::string supports(const RunnerSetup& s, int lane_batch) {
  if (!s.c.residual_epilogue())
    return "the persistent kernel adds the residual in its GEMM epilogues (residual=epilogue)";
  return persistent::refuses(s.p, lane_batch);
}

double extra_device_bytes(const Problem& p, const Composition& c, int lanes) {
  return static_cast<double>(lanes) * persistent::Blocks::scratch_bytes(p, (p.batch + c.streams - 1) / c.streams);
}

}  // namespace

extern const Runner persistent_runner = {
    Blocks::Persistent,
    field_bit(FieldId::residual),  // the persistent kernel computes every part of the blocks itself
    [](const Composition&) { return persistent::unavailable(); },
    supports,
    extra_device_bytes,
    [](const RunnerSetup& s) -> std::unique_ptr<BlockRunner> { return std::make_unique<PersistentBlocks>(s); },
};

}  // namespace encoder
