// The whole ViT: determinism, timm state-dict loading, and the check against timm itself.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/check.hpp"
#include "harness/compare.hpp"
#include "harness/random.hpp"
#include "reference.hpp"
#include "safetensors.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<ref::NamedTensor> timm_state_dict(const ref::VitWeights& w) {
  const std::int64_t h = w.cfg.hidden, m = w.cfg.mlp(), t = study::tokens_for_image(w.image_size);
  std::vector<ref::NamedTensor> sd = {
      {"patch_embed.proj.weight", {h, 3, 16, 16}, w.patch_w},
      {"patch_embed.proj.bias", {h}, w.patch_b},
      {"cls_token", {1, 1, h}, w.cls_token},
      {"pos_embed", {1, t, h}, w.pos_embed},
  };
  for (std::size_t l = 0; l < w.blocks.size(); ++l) {
    const auto& b = w.blocks[l];
    const std::string p = "blocks." + std::to_string(l) + ".";
    sd.push_back({p + "norm1.weight", {h}, b.ln1_g});
    sd.push_back({p + "norm1.bias", {h}, b.ln1_b});
    sd.push_back({p + "attn.qkv.weight", {3 * h, h}, b.qkv_w});
    sd.push_back({p + "attn.qkv.bias", {3 * h}, b.qkv_b});
    sd.push_back({p + "attn.proj.weight", {h, h}, b.proj_w});
    sd.push_back({p + "attn.proj.bias", {h}, b.proj_b});
    sd.push_back({p + "norm2.weight", {h}, b.ln2_g});
    sd.push_back({p + "norm2.bias", {h}, b.ln2_b});
    sd.push_back({p + "mlp.fc1.weight", {m, h}, b.fc1_w});
    sd.push_back({p + "mlp.fc1.bias", {m}, b.fc1_b});
    sd.push_back({p + "mlp.fc2.weight", {h, m}, b.fc2_w});
    sd.push_back({p + "mlp.fc2.bias", {h}, b.fc2_b});
  }
  sd.push_back({"norm.weight", {h}, w.norm_g});
  sd.push_back({"norm.bias", {h}, w.norm_b});
  sd.push_back({"head.weight", {w.num_classes, h}, w.head_w});
  sd.push_back({"head.bias", {w.num_classes}, w.head_b});
  return sd;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("study_ref_" + std::to_string(::getpid()) + "_" + name)).string();
}

bool missing_fixture_allowed() {
  const char* v = std::getenv("STUDY_ALLOW_MISSING_FIXTURE");
  return v != nullptr && std::string(v) == "1";
}

const study::ModelConfig kTiny{"tiny", 48, 3, 2};

}  // namespace

TEST_CASE("random vit_ti at image 32: finite, deterministic logits") {
  const auto& cfg = study::find_model("vit_ti");
  const int batch = 2, image = 32, classes = 10;
  const auto images = study::random_uniform(static_cast<std::size_t>(batch) * 3 * image * image, 41);
  const auto w = ref::random_vit_weights(cfg, image, classes, 1234);
  const auto logits = ref::vit_forward(images, batch, w);
  REQUIRE(logits.size() == static_cast<std::size_t>(batch) * classes);
  for (float v : logits) CHECK(std::isfinite(v));

  CHECK(ref::vit_forward(images, batch, ref::random_vit_weights(cfg, image, classes, 1234)) == logits);
  CHECK(ref::vit_forward(images, batch, ref::random_vit_weights(cfg, image, classes, 1235)) != logits);
  // The two images give different logits (the batch index is not ignored).
  CHECK(std::vector<float>(logits.begin(), logits.begin() + classes) !=
        std::vector<float>(logits.begin() + classes, logits.end()));
  // Each image alone gives its own row.
  const std::vector<float> second(images.begin() + 3 * image * image, images.end());
  const auto alone = ref::vit_forward(second, 1, w);
  for (int c = 0; c < classes; ++c) CHECK(alone[c] == doctest::Approx(logits[classes + c]).epsilon(1e-6));
}

TEST_CASE("random weights have the documented scale") {
  const auto w = ref::random_vit_weights(kTiny, 32, 10, 7);
  double s2 = 0;
  for (float v : w.blocks[0].qkv_w) s2 += double(v) * v;
  const double stddev = std::sqrt(s2 / w.blocks[0].qkv_w.size());
  CHECK(stddev > 0.015);  // trunc normal(0.02) cut at 2 sigma has std 0.0176
  CHECK(stddev < 0.02);
  for (float g : w.blocks[1].ln2_g) CHECK(std::fabs(g - 1.f) <= 0.2f + 1e-6f);
  CHECK(w.blocks[0].ln1_g != w.blocks[0].ln2_g);
}

TEST_CASE("timm state dict round trip through load_vit_safetensors") {
  const std::string path = temp_path("vit.safetensors");
  const auto w = ref::random_vit_weights(kTiny, 32, 10, 99);
  auto sd = timm_state_dict(w);
  const auto images = study::random_uniform(2 * 3 * 32 * 32, 42);

  SUBCASE("complete file loads to the same weights") {
    ref::write_safetensors(path, sd);
    const auto back = ref::load_vit_safetensors(path, kTiny, 32, 10);
    CHECK(back.blocks.size() == 2);
    CHECK(back.blocks[1].fc2_w == w.blocks[1].fc2_w);
    CHECK(back.pos_embed == w.pos_embed);
    CHECK(ref::vit_forward(images, 2, back) == ref::vit_forward(images, 2, w));
  }
  SUBCASE("an extra tensor (a variant the reference does not compute) is rejected") {
    sd.push_back({"blocks.0.ls1.gamma", {kTiny.hidden}, std::vector<float>(kTiny.hidden, 1.f)});
    ref::write_safetensors(path, sd);
    CHECK_THROWS_WITH_AS(ref::load_vit_safetensors(path, kTiny, 32, 10),
                         doctest::Contains("unexpected tensor 'blocks.0.ls1.gamma'"), study::StudyError);
  }
  SUBCASE("a missing tensor is rejected") {
    sd.erase(sd.begin() + 10);
    ref::write_safetensors(path, sd);
    CHECK_THROWS_WITH_AS(ref::load_vit_safetensors(path, kTiny, 32, 10), doctest::Contains("missing tensor"),
                         study::StudyError);
  }
  SUBCASE("the wrong config is a shape mismatch") {
    ref::write_safetensors(path, sd);
    CHECK_THROWS_WITH_AS(ref::load_vit_safetensors(path, kTiny, 48, 10),
                         doctest::Contains("'pos_embed' has shape [1, 5, 48], expected [1, 10, 48]"),
                         study::StudyError);
    CHECK_THROWS_WITH_AS(ref::load_vit_safetensors(path, kTiny, 32, 1000), doctest::Contains("head.weight"),
                         study::StudyError);
  }
  std::remove(path.c_str());
}

// Checks the reference against timm itself: the fixture holds a tiny timm ViT's weights, an
// input batch and the logits timm computed for it (export_timm_fixture.py).
TEST_CASE("vit_forward matches timm's logits on the committed fixture" *
          doctest::skip(missing_fixture_allowed() &&
                        !fs::exists(fs::path(REFERENCE_FIXTURE_DIR) / "tiny_vit.safetensors"))) {
  const fs::path dir = REFERENCE_FIXTURE_DIR;
  for (const char* name : {"tiny_vit.safetensors", "tiny_vit_io.safetensors", "tiny_vit.json"})
    if (!fs::exists(dir / name))
      FAIL("fixture " << (dir / name).string()
                      << " is missing. Make it on a machine with torch + timm: python3 "
                         "reference/export_timm_fixture.py (from the repository root), then commit "
                         "reference/fixtures/. STUDY_ALLOW_MISSING_FIXTURE=1 skips this case meanwhile.");

  nlohmann::json meta;
  std::ifstream(dir / "tiny_vit.json") >> meta;
  const auto& m = meta.at("model");
  REQUIRE(m.at("patch_size").get<int>() == study::kPatch);
  REQUIRE(m.at("layernorm_eps").get<double>() == doctest::Approx(1e-6));
  REQUIRE(m.at("gelu").get<std::string>() == "erf");
  const study::ModelConfig cfg{"timm_tiny", m.at("embed_dim").get<int>(), m.at("num_heads").get<int>(),
                               m.at("depth").get<int>()};
  REQUIRE(m.at("mlp_ratio").get<double>() * cfg.hidden == cfg.mlp());
  const int image = m.at("img_size").get<int>(), classes = m.at("num_classes").get<int>();

  const auto w = ref::load_vit_safetensors((dir / "tiny_vit.safetensors").string(), cfg, image, classes);
  const ref::SafetensorsFile io((dir / "tiny_vit_io.safetensors").string());
  const auto input_shape = io.info("input").shape;
  REQUIRE(input_shape.size() == 4);
  const int batch = static_cast<int>(input_shape[0]);
  const auto input = io.floats("input", {batch, 3, image, image});
  const auto want = io.floats("logits", {batch, classes});

  const auto got = ref::vit_forward(input, batch, w);
  // fp32 (timm) against double sums: rel L2 1e-4 and every logit within 1e-4 + 1e-4 |ref|.
  const auto c = study::compare(got, want, {1e-4, 1e-4, 1e-4});
  INFO("reference vs timm (timm " << meta.at("versions").at("timm").get<std::string>() << "): " << c.summary());
  CHECK(c.ok);
}
