#include <cmath>
#include <memory>
#include <set>

#include "detail.hpp"
#include "reference.hpp"
#include "safetensors.hpp"

namespace ref {

namespace {

// splitmix64 + Box-Muller written out, so the weights for a seed do not depend on which
// standard library implements std::normal_distribution.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1], so log() stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Cut at 2 standard deviations, as timm's trunc_normal_ is meant to bound the init.
  double trunc_normal() {
    for (;;) {
      const double z = normal();
      if (std::fabs(z) <= 2.0) return z;
    }
  }

 private:
  std::uint64_t state_;
};

std::vector<float> trunc_normal(Rng& rng, std::size_t n, double stddev, double mean = 0.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(mean + stddev * rng.trunc_normal());
  return v;
}

}  // namespace

VitWeights random_vit_weights(const study::ModelConfig& cfg, int image_size, int num_classes, std::uint64_t seed) {
  detail::expect_positive("random_vit_weights", "hidden", cfg.hidden);
  detail::expect_positive("random_vit_weights", "heads", cfg.heads);
  detail::expect_positive("random_vit_weights", "layers", cfg.layers);
  detail::expect_positive("random_vit_weights", "num_classes", num_classes);
  const std::size_t h = cfg.hidden, m = cfg.mlp(), tokens = study::tokens_for_image(image_size);
  const std::size_t patch = static_cast<std::size_t>(study::kChannels) * study::kPatch * study::kPatch;
  constexpr double kStd = 0.02;       // timm's trunc_normal_(std=.02)
  constexpr double kGammaStd = 0.1;   // around 1: timm starts LN gamma at exactly 1
  constexpr double kBiasStd = 0.02;   // timm starts biases and LN beta at exactly 0

  Rng rng(seed);
  VitWeights w{cfg, image_size, num_classes, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  w.patch_w = trunc_normal(rng, h * patch, kStd);
  w.patch_b = trunc_normal(rng, h, kBiasStd);
  w.cls_token = trunc_normal(rng, h, kStd);
  w.pos_embed = trunc_normal(rng, tokens * h, kStd);
  for (int l = 0; l < cfg.layers; ++l) {
    BlockWeights b;
    b.ln1_g = trunc_normal(rng, h, kGammaStd, 1.0);
    b.ln1_b = trunc_normal(rng, h, kBiasStd);
    b.qkv_w = trunc_normal(rng, 3 * h * h, kStd);
    b.qkv_b = trunc_normal(rng, 3 * h, kBiasStd);
    b.proj_w = trunc_normal(rng, h * h, kStd);
    b.proj_b = trunc_normal(rng, h, kBiasStd);
    b.ln2_g = trunc_normal(rng, h, kGammaStd, 1.0);
    b.ln2_b = trunc_normal(rng, h, kBiasStd);
    b.fc1_w = trunc_normal(rng, m * h, kStd);
    b.fc1_b = trunc_normal(rng, m, kBiasStd);
    b.fc2_w = trunc_normal(rng, h * m, kStd);
    b.fc2_b = trunc_normal(rng, h, kBiasStd);
    w.blocks.push_back(std::move(b));
  }
  w.norm_g = trunc_normal(rng, h, kGammaStd, 1.0);
  w.norm_b = trunc_normal(rng, h, kBiasStd);
  w.head_w = trunc_normal(rng, static_cast<std::size_t>(num_classes) * h, kStd);
  w.head_b = trunc_normal(rng, num_classes, kBiasStd);
  return w;
}

VitWeights vit_weights_from(const TensorSource& source, const study::ModelConfig& cfg, int image_size,
                            int num_classes) {
  detail::expect_positive("vit_weights_from", "num_classes", num_classes);
  const std::int64_t h = cfg.hidden, m = cfg.mlp(), tokens = study::tokens_for_image(image_size);
  std::set<std::string> used;
  auto get = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
    used.insert(name);
    const auto got = source.shape(name);
    if (!got) throw study::StudyError(study::ErrorKind::Data, source.where() + ": missing tensor '" + name + "'");
    if (*got != shape)
      throw study::StudyError(study::ErrorKind::Data, source.where() + ": tensor '" + name + "' has shape " +
                                                          shape_string(*got) + ", expected " + shape_string(shape));
    return source.floats(name);
  };

  VitWeights w{cfg, image_size, num_classes, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  w.patch_w = get("patch_embed.proj.weight", {h, study::kChannels, study::kPatch, study::kPatch});
  w.patch_b = get("patch_embed.proj.bias", {h});
  w.cls_token = get("cls_token", {1, 1, h});
  w.pos_embed = get("pos_embed", {1, tokens, h});
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    BlockWeights b;
    b.ln1_g = get(p + "norm1.weight", {h});
    b.ln1_b = get(p + "norm1.bias", {h});
    b.qkv_w = get(p + "attn.qkv.weight", {3 * h, h});
    b.qkv_b = get(p + "attn.qkv.bias", {3 * h});
    b.proj_w = get(p + "attn.proj.weight", {h, h});
    b.proj_b = get(p + "attn.proj.bias", {h});
    b.ln2_g = get(p + "norm2.weight", {h});
    b.ln2_b = get(p + "norm2.bias", {h});
    b.fc1_w = get(p + "mlp.fc1.weight", {m, h});
    b.fc1_b = get(p + "mlp.fc1.bias", {m});
    b.fc2_w = get(p + "mlp.fc2.weight", {h, m});
    b.fc2_b = get(p + "mlp.fc2.bias", {h});
    w.blocks.push_back(std::move(b));
  }
  w.norm_g = get("norm.weight", {h});
  w.norm_b = get("norm.bias", {h});
  w.head_w = get("head.weight", {num_classes, h});
  w.head_b = get("head.bias", {num_classes});

  for (const auto& name : source.names())
    if (!used.count(name))
      throw study::StudyError(study::ErrorKind::Data,
                              source.where() + ": unexpected tensor '" + name + "' (a ViT variant the reference does not "
                              "compute, or more than " + std::to_string(cfg.layers) + " blocks)");
  return w;
}

namespace {
struct FileSource : TensorSource {
  explicit FileSource(const std::string& path) : file(path), path(path) {}
  std::vector<std::string> names() const override { return file.names(); }
  std::optional<std::vector<std::int64_t>> shape(const std::string& name) const override {
    if (!file.contains(name)) return std::nullopt;
    return file.info(name).shape;
  }
  std::vector<float> floats(const std::string& name) const override { return file.floats(name); }
  std::string where() const override { return path; }
  SafetensorsFile file;
  std::string path;
};
}  // namespace

std::unique_ptr<TensorSource> safetensors_source(const std::string& path) {
  return std::make_unique<FileSource>(path);
}

VitWeights load_vit_safetensors(const std::string& path, const study::ModelConfig& cfg, int image_size,
                                int num_classes) {
  return vit_weights_from(*safetensors_source(path), cfg, image_size, num_classes);
}

}  // namespace ref
