// CPU tests of the families' memory estimates (memory_need()), which every bench checks
// against free memory before it builds any input: they cover what the harness really builds,
// grow with the problem, and make the sizes that used to be killed by the host's OOM killer
// (batch 2000000) a refusal instead.
#include <doctest/doctest.h>
#include "attention/harness.hpp"
#include "encoder/encoder.hpp"
#include "harness/memory.hpp"
#include "harness/vit_config.hpp"
#include "layernorm/harness.hpp"
#include "mlp/harness.hpp"
#include "patch_embed/harness.hpp"

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

double host_bytes(const std::vector<const std::vector<float>*>& vectors) {
  double n = 0;
  for (const auto* v : vectors) n += static_cast<double>(v->size()) * sizeof(float);
  return n;
}

// A machine of the study's kind: an 80 GiB GPU, 64 GiB of host memory free.
study::FreeMemory machine() {
  study::FreeMemory f;
  f.device = 80 * kGiB;
  f.host = 64 * kGiB;
  return f;
}

}  // namespace

TEST_CASE("batch 2000000 at 224 is refused by the host estimate, before any input is built") {
  const long long rows = 2000000LL * study::tokens_for_image(224);  // 394 M rows, as the bench computes
  const layernorm::Problem ln{static_cast<int>(rows), 768};
  const mlp::Problem mp{static_cast<int>(rows), 768, 3072};
  for (bool check : {false, true}) {
    CAPTURE(check);
    const auto lneed = layernorm::memory_need(ln, check), mneed = mlp::memory_need(mp, check, 4 << 20);
    // x alone is 394 M x 768 fp32 values: 1.2 TB.
    CHECK(lneed.host >= rows * 768.0 * sizeof(float));
    CHECK(mneed.host >= rows * 768.0 * sizeof(float));
    const std::string why = study::memory_refusal(lneed, machine(), "layernorm_v5_unrolled");
    CHECK(why.find("out of host memory: layernorm_v5_unrolled needs") == 0);
    CHECK(why.find(" free") != std::string::npos);
    CHECK(study::memory_refusal(mneed, machine(), "mlp_fused_epilogue").find("out of host memory") == 0);
    // And on this machine, whatever it has free.
    study::FreeMemory here;
    here.host = study::host_available_bytes();
    CHECK_FALSE(study::memory_refusal(lneed, here, "layernorm").empty());
  }
  // The ViT sizes the sweeps run fit.
  CHECK(study::memory_refusal(layernorm::memory_need({50432, 768}, true), machine(), "x").empty());
  CHECK(study::memory_refusal(mlp::memory_need({50432, 1024, 4096}, true, 4 << 20), machine(), "x").empty());
  CHECK(study::memory_refusal(attention::memory_need({256, 1025, 16, 64}, true), machine(), "x").empty());
}

TEST_CASE("layernorm: the estimate covers the host inputs and the device buffers") {
  for (bool check : {false, true}) {
    const layernorm::Problem p{197, 768};
    const auto in = layernorm::make_inputs(p, 1);
    const auto need = layernorm::memory_need(p, check);
    const double n = static_cast<double>(p.rows) * p.hidden;
    CHECK(need.host >= host_bytes({&in.x, &in.gamma, &in.beta}) + n * sizeof(__half));
    CHECK(need.host >= (check ? 3 : 1) * n * sizeof(float));
    CHECK(need.device >= 2 * n * sizeof(__half));
  }
  CHECK(layernorm::memory_need({197, 768}, true).host > layernorm::memory_need({197, 768}, false).host);
}

TEST_CASE("mlp: the estimate covers inputs, h, the workspace and the GPU reference") {
  const mlp::Problem p{300, 192, 768};
  const auto in = mlp::make_inputs(p, 1);
  const double n = 300.0 * 192, nh = 300.0 * 768;
  const double weights = host_bytes({&in.fc1_w, &in.fc1_b, &in.fc2_w, &in.fc2_b});
  const auto need = mlp::memory_need(p, true, 4 << 20);
  CHECK(need.host >= host_bytes({&in.x}) + weights + 2 * n * sizeof(float));  // y and the GPU reference's
  CHECK(need.device >= (2 * n + nh) * sizeof(__half) + weights / 2 + (4 << 20));
  // Above kFullCheckRows rows the GPU reference's chunk is on the device too.
  CHECK(need.device > mlp::memory_need(p, false, 4 << 20).device);
  CHECK(mlp::memory_need({200, 192, 768}, true, 0).device == mlp::memory_need({200, 192, 768}, false, 0).device);
}

TEST_CASE("attention: the estimate covers QKV, the output and the GPU reference") {
  const attention::Problem small{1, 197, 3, 64}, large{32, 1025, 12, 64};
  const auto in = attention::make_inputs(small, 1);
  const double out = 197.0 * 3 * 64;
  CHECK(attention::memory_need(small, true).host >= host_bytes({&in.qkv}) + out * sizeof(float));
  CHECK(attention::memory_need(small, true).device >= (in.qkv.size() + out) * sizeof(__half));
  // A sampled shape also holds the GPU reference's output and scores.
  const double large_out = 32.0 * 1025 * 12 * 64;
  CHECK(attention::memory_need(large, true).device >=
        large_out * (3 + 1) * sizeof(__half) + large_out * sizeof(float));
  CHECK(attention::memory_need(large, true).host >= large_out * 3 * sizeof(float) + 2 * large_out * sizeof(float));
}

TEST_CASE("patch_embed: the estimate covers images, weights, output, scratch and the routine's buffers") {
  for (const auto& v : patch_embed::versions()) {
    CAPTURE(v.name);
    const patch_embed::Problem p{8, 224, 768, 1};
    const auto in = patch_embed::make_inputs(p, 1);
    const double out = 8.0 * 197 * 768;
    const auto need = patch_embed::memory_need(p, v, true);
    CHECK(need.host >= host_bytes({&in.images, &in.conv_w, &in.conv_b, &in.cls_token, &in.pos_embed}) +
                           2 * out * sizeof(float));
    CHECK(need.device >= (in.images.size() + out) * sizeof(__half) + (v.scratch ? v.scratch(p) : 0));
  }
}

TEST_CASE("encoder: the estimate covers weights and activations, one set per layer without the arena") {
  encoder::Problem p;
  p.model = study::find_model("vit_b");
  p.batch = 32;
  p.image_size = 224;
  const auto per_layer = encoder::find_step("e1_library"), arena = encoder::find_step("e2_buffer_reuse");
  REQUIRE(per_layer.per_layer_buffers());
  REQUIRE_FALSE(arena.per_layer_buffers());
  const double act = static_cast<double>(p.rows()) * 768 * sizeof(__half);  // one [rows, hidden] buffer
  const auto need = encoder::memory_need(p, arena);
  CHECK(need.device >= encoder::weight_count(p) * sizeof(__half) + 12 * act);  // LN, QKV, attention, ..., h
  CHECK(need.host >= encoder::weight_count(p) * sizeof(float));
  CHECK(encoder::memory_need(p, per_layer).device >= need.device + 11 * 12 * act);
  CHECK(study::memory_refusal(need, machine(), "encoder").empty());
  p.batch = 2000000;
  CHECK(study::memory_refusal(encoder::memory_need(p, arena), machine(), "encoder").find("out of host memory") == 0);
}
