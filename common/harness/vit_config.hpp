// ViT model shapes (timm vit_*_patch16_*): patch 16, head_dim 64, MLP 4x hidden.
#pragma once
#include <string>
#include <vector>

namespace study {

struct ModelConfig {
  std::string name;
  int hidden;
  int heads;
  int layers;
  int head_dim() const { return hidden / heads; }
  int mlp() const { return 4 * hidden; }
};

constexpr int kPatch = 16;
constexpr int kChannels = 3;

const std::vector<ModelConfig>& models();
// Throws StudyError(Usage) naming the known models.
const ModelConfig& find_model(const std::string& name);
// (image/16)^2 patches + the cls token. Throws StudyError(Usage) unless image is a positive
// multiple of 16.
int tokens_for_image(int image_size);

}  // namespace study
