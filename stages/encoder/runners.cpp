// The block runners' list, and what a composition needs from its runner before a forward is
// made: whether it can run here at all, and the device memory it will take.
#include "encoder/runner.hpp"

namespace encoder {

// Each runner's file defines its record.
extern const Runner fp16_runner, fp16_ln_folded_runner, fp8_runner, persistent_runner, tiled_runner;

const Runner& runner_for(Blocks b) {
  for (const Runner* r : {&fp16_runner, &fp16_ln_folded_runner, &fp8_runner, &persistent_runner, &tiled_runner})
    if (r->blocks == b) return *r;
  throw study::StudyError(study::ErrorKind::Usage, std::string("no block runner for blocks=") + name(b));
}

std::string check_fields(const Composition& c) {
  const Runner& r = runner_for(c.blocks);
  const std::string who = std::string("blocks=") + name(c.blocks);
  const unsigned set = fields_set(c) & ~forward_fields();
  for (unsigned id = 0; set >> id; ++id)
    if ((set >> id & 1u) && !(r.reads >> id & 1u))
      return who + " does not read " + describe(FieldId(id)) + ": leave it out, a composition names only what runs";
  for (FieldId f : {FieldId::attention, FieldId::mlp})
    if ((r.reads & field_bit(f)) && !(set & field_bit(f))) return who + " needs " + describe(f);
  return {};
}

std::string why_unavailable(const Composition& c) {
  // A version the composition does not name (the runner computes that part itself) is no reason.
  auto why = [](auto find, const std::string& v) { return v.empty() ? std::string() : find(v).why_unavailable(); };
  const std::pair<const char*, std::string> parts[] = {
      {"patch_embed", why(patch_embed::find_version, c.patch_embed)},
      {"layernorm", why(layernorm::find_version, c.layernorm)},
      {"attention", why(attention::find_version, c.attention)},
      {"mlp", why(mlp::find_version, c.mlp)}};
  const std::string versions[] = {c.patch_embed, c.layernorm, c.attention, c.mlp};
  for (int i = 0; i < 4; ++i)
    if (!parts[i].second.empty()) return std::string(parts[i].first) + " " + versions[i] + ": " + parts[i].second;
  if (c.gemms.has(GemmCandidate::Cutlass))
    if (auto why = study::cutlass_gemm::unavailable(); !why.empty()) return "the CUTLASS GEMM layer: " + why;
  if (auto why = runner_for(c.blocks).unavailable(c); !why.empty())
    return std::string("blocks=") + name(c.blocks) + ": " + why;
  return {};
}

study::MemoryNeed memory_need(const Problem& p, const Composition& c) {
  const double d = p.model.hidden, rows = static_cast<double>(p.rows());
  const double images = static_cast<double>(p.batch) * study::kChannels * p.image_size * p.image_size;
  // One layer's activations: LN1, QKV (3), attention, projection, x_mid, LN2, h (4), x_out.
  const double layer = 13 * rows * d;
  const double sets = c.per_layer_buffers() ? p.model.layers : 1;
  patch_embed::Problem pe;
  pe.batch = p.batch;
  pe.image_size = p.image_size;
  pe.hidden = p.model.hidden;
  pe.streams = 1;
  study::MemoryNeed m;
  m.device = sizeof(__half) * (weight_count(p) + images + static_cast<double>(p.batch) * p.num_classes +
                               sets * layer + 2.0 * p.batch * d) +
             static_cast<double>(patch_embed::scratch_bytes(pe)) + c.streams * 4.0 * (1 << 20) +
             runner_for(c.blocks).extra_device_bytes(p, c, c.streams);
  m.host = weight_count(p) * (sizeof(float) + sizeof(__half)) + images * (sizeof(float) + 2 * sizeof(__half));
  return m;
}

}  // namespace encoder
