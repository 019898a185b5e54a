// CPU reference of every ViT component, the yardstick every GPU version is checked against.
// Plain loops over fp32 storage; sums, variances and softmax run in double so that the
// reference's own rounding stays far below any tolerance a GPU version is held to.
// Row-major everywhere; weights in PyTorch layout (Linear.weight is [out, in]).
// Size mismatches between arguments throw study::StudyError(Usage) naming the argument,
// because a silent out-of-bounds read would make a wrong reference look plausible.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/vit_config.hpp"

namespace ref {

// timm's ViT builds its LayerNorms with eps 1e-6 (not PyTorch's default 1e-5).
constexpr float kLayerNormEps = 1e-6f;

// y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta, biased variance, two passes.
void layernorm(const std::vector<float>& x, const std::vector<float>& gamma, const std::vector<float>& beta,
               int rows, int hidden, float eps, std::vector<float>& y);

// y = x W^T + b; x [rows, in], w [out, in], b [out] or empty for no bias, y [rows, out].
void linear(const std::vector<float>& x, int rows, int in, const std::vector<float>& w,
            const std::vector<float>& b, int out, std::vector<float>& y);

// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as nn.GELU() with approximate='none'.
float gelu(float x);

// Multi-head self-attention on timm's packed QKV: qkv [batch*tokens, 3*heads*head_dim] holds the
// q block, then the k block, then the v block, head h at columns h*head_dim of each block.
// out [batch*tokens, heads*head_dim]; scores scaled by 1/sqrt(head_dim), softmax in double.
void attention(const std::vector<float>& qkv, int batch, int tokens, int heads, int head_dim,
               std::vector<float>& out);

// y = x + fc2(gelu(fc1(x))): the residual is of the MLP's own input, as the MLP stage computes it
// by default.
void mlp(const std::vector<float>& x, int rows, int hidden, int mlp_hidden, const std::vector<float>& fc1_w,
         const std::vector<float>& fc1_b, const std::vector<float>& fc2_w, const std::vector<float>& fc2_b,
         std::vector<float>& y);
// y = residual + fc2(gelu(fc1(x))), residual [rows, hidden]: the MLP stage given another residual
// stream (in an encoder block x is ln2's output and the residual the stream before it).
void mlp(const std::vector<float>& x, const std::vector<float>& residual, int rows, int hidden,
         int mlp_hidden, const std::vector<float>& fc1_w, const std::vector<float>& fc1_b,
         const std::vector<float>& fc2_w, const std::vector<float>& fc2_b, std::vector<float>& y);

// 16x16 stride-16 convolution, flattened row-major over patches, cls token prepended, learned
// position embedding added. images [B,3,S,S] NCHW; conv_w [hidden,3,16,16]; conv_b, cls_token
// [hidden]; pos_embed [tokens, hidden]; out [B*tokens, hidden] with token 0 the cls token.
void patch_embed(const std::vector<float>& images, int batch, int image_size, int hidden,
                 const std::vector<float>& conv_w, const std::vector<float>& conv_b,
                 const std::vector<float>& cls_token, const std::vector<float>& pos_embed,
                 std::vector<float>& out);

struct BlockWeights {
  std::vector<float> ln1_g, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

// timm Block (pre-norm): x += proj(attn(ln1(x))); x += fc2(gelu(fc1(ln2(x)))).
// x [batch*tokens, cfg.hidden], updated in place.
void encoder_block(std::vector<float>& x, int batch, int tokens, const study::ModelConfig& cfg,
                   const BlockWeights& w);

struct VitWeights {
  study::ModelConfig cfg;
  int image_size;
  int num_classes;
  std::vector<float> patch_w, patch_b, cls_token, pos_embed;
  std::vector<BlockWeights> blocks;
  std::vector<float> norm_g, norm_b, head_w, head_b;
};

// Deterministic weights for a seed, from the reference's own generator rather than std::
// distributions, whose output differs between standard libraries.
// Scale follows timm's init (truncated normal, std 0.02, for linear, conv, pos and cls), but
// where timm starts at exact constants (LN gamma 1 / beta 0, biases 0) these are slightly random
// (gamma 1 + N(0, 0.1), beta and biases N(0, 0.02)) so that a test catches a swapped gamma/beta,
// a dropped bias or a bias added to the wrong output.
VitWeights random_vit_weights(const study::ModelConfig& cfg, int image_size, int num_classes, std::uint64_t seed);

// Named tensors, as a timm VisionTransformer's state dict names them: a safetensors file, or the
// arrays a caller holds (the Python module's). A source only reads; vit_weights_from checks
// what it reads (every tensor present, with its exact shape), once for every source.
struct TensorSource {
  virtual ~TensorSource() = default;
  virtual std::vector<std::string> names() const = 0;
  // The tensor's shape, or nullopt when the source has no tensor of that name.
  virtual std::optional<std::vector<std::int64_t>> shape(const std::string& name) const = 0;
  // The tensor in fp32; called only for a name whose shape() was given.
  virtual std::vector<float> floats(const std::string& name) const = 0;
  virtual std::string where() const = 0;  // what an error names: a path, "the state dict"
};

// The tensors of a safetensors file (F32, F16 or BF16); throws StudyError(Data) when it cannot
// be read.
std::unique_ptr<TensorSource> safetensors_source(const std::string& path);

// A timm VisionTransformer's weights from `source`: every expected tensor with its exact shape,
// and no other (see load_vit_safetensors). Throws StudyError(Data).
VitWeights vit_weights_from(const TensorSource& source, const study::ModelConfig& cfg, int image_size,
                            int num_classes);

// Reads a timm VisionTransformer state dict (F32, F16 or BF16) saved as safetensors. Every
// expected tensor must be present with its exact shape, and no other tensor may be there: an
// extra one (layer scale, qk-norm, fc_norm, register tokens) means a variant the reference does
// not compute, so loading it would give wrong logits silently. Throws StudyError(Data).
VitWeights load_vit_safetensors(const std::string& path, const study::ModelConfig& cfg, int image_size,
                                int num_classes);

// Logits [batch, num_classes]: patch embed, the blocks, final LayerNorm, head on the cls token.
std::vector<float> vit_forward(const std::vector<float>& images, int batch, const VitWeights& w);

}  // namespace ref
