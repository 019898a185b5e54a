#include "harness/check.hpp"
#include "harness/vit_config.hpp"

namespace study {

const std::vector<ModelConfig>& models() {
  static const std::vector<ModelConfig> m = {
      {"vit_ti", 192, 3, 12}, {"vit_s", 384, 6, 12}, {"vit_b", 768, 12, 12}, {"vit_l", 1024, 16, 24}};
  return m;
}

const ModelConfig& find_model(const std::string& name) {
  std::string known;
  for (const auto& m : models()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw StudyError(ErrorKind::Usage, "unknown model '" + name + "' (known: " + known + ")");
}

int tokens_for_image(int image_size) {
  if (image_size <= 0 || image_size % kPatch != 0)
    throw StudyError(ErrorKind::Usage, "image size " + std::to_string(image_size) +
                                           " must be a positive multiple of the patch size 16");
  const int side = image_size / kPatch;
  return side * side + 1;
}

}  // namespace study
