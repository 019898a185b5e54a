// GPU test of one encoder ladder step (study::kStageVersion): whole-model logits against the CPU
// reference on small configurations (a single block, then several), fresh random weights and
// images every run, logits poisoned first; graph replay bit-identical to the eager forward.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include "encoder/harness.hpp"
#include "harness/gpu.hpp"
#include "harness/gpu_test_main.hpp"
#include "harness/random.hpp"
#include "harness/stage_version.hpp"
#include "layernorm/layernorm.hpp"

using namespace encoder;

namespace {

Composition step() { return find_step(study::kStageVersion); }

Problem problem(const char* model, int layers, int batch, int image_size) {
  Problem p;
  p.model = study::find_model(model);
  p.model.layers = layers;
  p.batch = batch;
  p.image_size = image_size;
  p.num_classes = 10;
  return p;
}

struct Run {
  std::vector<float> images, logits;
  ref::VitWeights weights;
};

// Every logit of the batch against the reference (the batches here are small).
Run run_and_check(const Problem& p, const Composition& c) {
  const auto seed = study::fresh_seed();
  CAPTURE(seed);
  CAPTURE(p.model.name);
  CAPTURE(p.model.layers);
  CAPTURE(p.batch);
  CAPTURE(p.image_size);
  Run r{make_images(p.batch, p.image_size, seed), {}, make_weights(p, seed, "")};
  DeviceWeights dw(r.weights);
  calibrate_if_fp8(c, p, dw, {}, seed);
  auto images = study::to_device(study::to_half(r.images));
  study::DeviceBuffer<__half> logits(static_cast<std::size_t>(p.batch) * p.num_classes);
  Composition fit = c;
  fit.streams = std::min(c.streams, p.batch);  // e4's lanes need an image each
  Forward f(p, fit, dw);
  study::poison(logits);
  f.run(images.get(), logits.get(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  r.logits = study::to_float(study::to_host(logits));
  const auto want = ref::vit_forward(r.images, p.batch, r.weights);
  const auto cmp = study::compare(r.logits, want, c.fp8() ? fp8_logits_tolerance(want) : logits_tolerance(want));
  INFO(cmp.summary());
  CHECK(cmp.ok);
  return r;
}

}  // namespace

TEST_CASE("one block: logits match the CPU reference at odd token counts and batches") {
  for (int batch : {1, 3})
    for (int image : {16, 32, 224}) run_and_check(problem("vit_ti", 1, batch, image), step());
}

TEST_CASE("several blocks and a wider model") {
  run_and_check(problem("vit_ti", 12, 2, 32), step());
  run_and_check(problem("vit_b", 2, 1, 224), step());
}

TEST_CASE("graph replay is bit-identical to the eager forward") {
  const Problem p = problem("vit_ti", 2, 3, 224);
  Composition c = step();
  c.graph = true;
  c.streams = std::min(c.streams, p.batch);
  const auto seed = study::fresh_seed();
  const auto w = make_weights(p, seed, "");
  DeviceWeights dw(w);
  calibrate_if_fp8(c, p, dw, {}, seed);
  auto images = study::to_device(study::to_half(make_images(p.batch, p.image_size, seed)));
  study::DeviceBuffer<__half> a(static_cast<std::size_t>(p.batch) * p.num_classes), b(a.size());
  Forward f(p, c, dw);
  study::poison(a);
  study::poison(b);
  f.run_eager(images.get(), a.get(), nullptr);
  f.run(images.get(), b.get(), nullptr);
  f.run(images.get(), b.get(), nullptr);  // a replay, not the capture's own first forward
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto ha = study::to_host(a), hb = study::to_host(b);
  CHECK(std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(__half)) == 0);
  std::size_t nonfinite = 0;
  for (float v : study::to_float(ha)) nonfinite += !std::isfinite(v);
  CHECK(nonfinite == 0);
}

TEST_CASE("the L2 prefetch's spans are the blocks' weights and the head's, each once") {
  const Problem p = problem("vit_ti", 3, 1, 32);
  const auto w = make_weights(p, study::fresh_seed(), "");
  const DeviceWeights dw(w);
  const auto at = [](const void* q) { return static_cast<const char*>(q); };
  const auto head = dw.head_span();
  CHECK(at(head.data) == at(dw.norm_g));
  CHECK(at(head.data) + head.bytes == at(dw.blocks[0].ln1_g));
  CHECK(head.bytes >= sizeof(__half) * (w.norm_g.size() + w.norm_b.size() + w.head_w.size() + w.head_b.size()));
  for (int i = 0; i < p.model.layers; ++i) {
    const auto span = dw.block_span(i);
    const BlockView& v = dw.blocks[i];
    CAPTURE(i);
    CHECK(at(span.data) == at(v.ln1_g));
    // The last tensor of the block lies inside its span; the next block (or the buffer's end) follows.
    CHECK(at(v.fc2_b) + sizeof(__half) * w.blocks[i].fc2_b.size() <= at(span.data) + span.bytes);
    if (i + 1 < p.model.layers) CHECK(at(span.data) + span.bytes == at(dw.blocks[i + 1].ln1_g));
    else CHECK(at(span.data) + span.bytes == at(dw.patch_w) + dw.bytes());
  }
  CHECK_THROWS(dw.block_span(p.model.layers));
}

TEST_CASE("the L2 prefetch leaves the logits as they are, or is refused where no LayerNorm kernel carries it") {
  const Problem p = problem("vit_ti", 3, 3, 32);
  Composition c = step();
  c.l2_prefetch = !c.l2_prefetch;  // the other way round from the step
  // Only the fp16 blocks with a LayerNorm that carries the request (v5_unrolled) take it.
  if (c.l2_prefetch && (c.blocks != Blocks::Fp16 || !layernorm::carries_prefetch(layernorm::find_version(c.layernorm)))) {
    const auto w = make_weights(p, 1, "");
    const DeviceWeights dw(w);
    CHECK_THROWS_AS(Forward(p, c, dw), study::StudyError);
    return;
  }
  run_and_check(p, c);
  if (!c.l2_prefetch) return;
  c.layernorm = "cudnn";  // a library LayerNorm carries no prefetch
  if (!why_unavailable(c).empty()) return;
  const auto w = make_weights(p, 1, "");
  const DeviceWeights dw(w);
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("prefetch"), study::StudyError);
}

TEST_CASE("the batch split over streams computes the same logits") {
  Composition c = step();
  c.streams = 3;
  run_and_check(problem("vit_ti", 2, 5, 32), c);
}

TEST_CASE("an FP8 forward refuses weights without a calibration, and calibration observes every block") {
  const Problem p = problem("vit_ti", 3, 2, 32);
  const auto w = make_weights(p, study::fresh_seed(), "");
  DeviceWeights dw(w);
  Composition c = step();
  c.blocks = Blocks::Fp8;
  c.gemms = Gemms::Cublaslt;  // its GEMMs are cuBLASLt's FP8 ones
  c.l2_prefetch = false;      // its LayerNorm writes E4M3 and carries no prefetch (e14 refuses it with FP8)
  c.mlp = "fp8_tensor";
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("calibrat"), study::StudyError);
  calibrate_if_fp8(c, p, dw, {}, 1);
  REQUIRE(dw.fp8_calibration.amax.size() == 3);
  CHECK(dw.fp8_calibration.images == kCalibrationImages);
  for (const auto& block : dw.fp8_calibration.amax)
    for (float a : block) CHECK((std::isfinite(a) && a > 0.f));
  c.mlp = "fused_epilogue";  // an fp16 MLP cannot take E4M3 inputs
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("FP8 MLP"), study::StudyError);
}

TEST_CASE("bad compositions and problems are refused with the component named") {
  const Problem p = problem("vit_ti", 1, 1, 32);
  const auto w = make_weights(p, 1, "");
  const DeviceWeights dw(w);
  Composition c = step();
  c.attention = "no_such_version";
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("no_such_version"), study::StudyError);
  c = step();
  c.streams = 2;  // more streams than images
  CHECK_THROWS_AS(Forward(p, c, dw), study::StudyError);
  c = step();
  c.streams = 1;
  c.blocks = Blocks::Persistent;
  c.l2_prefetch = true;
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("persistent"), study::StudyError);
  c = step();
  c.streams = 1;
  c.attention_e4m3 = true;  // an E4M3 attention output without the FP8 blocks
  c.blocks = Blocks::Fp16;
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("E4M3"), study::StudyError);
  c = step();
  c.streams = 1;
  c.blocks = Blocks::Fp16LnFolded;  // a folded LayerNorm on cuBLASLt
  c.gemms = Gemms::Cublaslt;
  c.l2_prefetch = false;
  CHECK_THROWS_WITH_AS(Forward(p, c, dw), doctest::Contains("CUTLASS"), study::StudyError);
  Problem bad = p;
  bad.image_size = 100;
  CHECK_FALSE(check_problem(bad).empty());
  bad = p;
  bad.batch = 0;
  CHECK_FALSE(check_problem(bad).empty());
}

int main(int argc, char** argv) {
  // A step whose family versions this build or GPU cannot run (cuDNN not built, no sm_90a)
  // skips with the reason instead of failing.
  return gpu_test_main(argc, argv, study::stage_program("encoder").c_str(), [] { return why_unavailable(step()); });
}
