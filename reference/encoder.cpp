#include "detail.hpp"
#include "reference.hpp"

namespace ref {

namespace {

void check_block(const BlockWeights& w, int hidden, int mlp_hidden) {
  const std::size_t h = hidden, m = mlp_hidden;
  const struct { const char* name; std::size_t got, want; } sizes[] = {
      {"ln1_g", w.ln1_g.size(), h},         {"ln1_b", w.ln1_b.size(), h},
      {"qkv_w", w.qkv_w.size(), 3 * h * h}, {"qkv_b", w.qkv_b.size(), 3 * h},
      {"proj_w", w.proj_w.size(), h * h},   {"proj_b", w.proj_b.size(), h},
      {"ln2_g", w.ln2_g.size(), h},         {"ln2_b", w.ln2_b.size(), h},
      {"fc1_w", w.fc1_w.size(), m * h},     {"fc1_b", w.fc1_b.size(), m},
      {"fc2_w", w.fc2_w.size(), h * m},     {"fc2_b", w.fc2_b.size(), h},
  };
  for (const auto& s : sizes) detail::expect_size("encoder_block", s.name, s.got, s.want);
}

}  // namespace

void encoder_block(std::vector<float>& x, int batch, int tokens, const study::ModelConfig& cfg,
                   const BlockWeights& w) {
  detail::expect_positive("encoder_block", "batch", batch);
  detail::expect_positive("encoder_block", "tokens", tokens);
  detail::expect_positive("encoder_block", "cfg.hidden", cfg.hidden);
  detail::expect_positive("encoder_block", "cfg.heads", cfg.heads);
  if (cfg.hidden % cfg.heads != 0)
    throw study::StudyError(study::ErrorKind::Usage, "ref::encoder_block: hidden " + std::to_string(cfg.hidden) +
                                                         " is not a multiple of heads " + std::to_string(cfg.heads));
  const int hidden = cfg.hidden;
  const int rows = batch * tokens;
  detail::expect_size("encoder_block", "x", x.size(), static_cast<std::size_t>(rows) * hidden);
  check_block(w, hidden, cfg.mlp());

  std::vector<float> h, qkv, a, p;
  layernorm(x, w.ln1_g, w.ln1_b, rows, hidden, kLayerNormEps, h);
  linear(h, rows, hidden, w.qkv_w, w.qkv_b, 3 * hidden, qkv);
  attention(qkv, batch, tokens, cfg.heads, cfg.head_dim(), a);
  linear(a, rows, hidden, w.proj_w, w.proj_b, hidden, p);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += p[i];

  // Written out rather than calling ref::mlp, whose residual is of its own input (here ln2(x)).
  layernorm(x, w.ln2_g, w.ln2_b, rows, hidden, kLayerNormEps, h);
  linear(h, rows, hidden, w.fc1_w, w.fc1_b, cfg.mlp(), a);
  for (auto& v : a) v = gelu(v);
  linear(a, rows, cfg.mlp(), w.fc2_w, w.fc2_b, hidden, p);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += p[i];
}

std::vector<float> vit_forward(const std::vector<float>& images, int batch, const VitWeights& w) {
  const int hidden = w.cfg.hidden;
  const int tokens = study::tokens_for_image(w.image_size);
  detail::expect_positive("vit_forward", "num_classes", w.num_classes);
  // linear() reads an empty bias as "no bias"; a ViT head always has one.
  detail::expect_size("vit_forward", "head_b", w.head_b.size(), static_cast<std::size_t>(w.num_classes));
  detail::expect_size("vit_forward", "blocks", w.blocks.size(), static_cast<std::size_t>(w.cfg.layers));

  std::vector<float> x;
  patch_embed(images, batch, w.image_size, hidden, w.patch_w, w.patch_b, w.cls_token, w.pos_embed, x);
  for (const auto& block : w.blocks) encoder_block(x, batch, tokens, w.cfg, block);

  // LayerNorm is per row, so normalizing only the cls rows gives what timm's head sees.
  std::vector<float> cls(static_cast<std::size_t>(batch) * hidden), cls_norm, logits;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < hidden; ++i)
      cls[static_cast<std::size_t>(b) * hidden + i] = x[static_cast<std::size_t>(b) * tokens * hidden + i];
  layernorm(cls, w.norm_g, w.norm_b, batch, hidden, kLayerNormEps, cls_norm);
  linear(cls_norm, batch, hidden, w.head_w, w.head_b, w.num_classes, logits);
  return logits;
}

}  // namespace ref
