// The step table on the CPU: the composition text form reads back what it writes and refuses
// what it does not know; every step names only what its block runner reads; every step's parent
// exists and comes first; steps.tsv is what the table generates. (analysis/test_steps.py checks every step against the composition it was
// measured with, steps_before_redesign.txt.)
#include <doctest/doctest.h>
#include <fstream>
#include <set>
#include <sstream>
#include "encoder/runner.hpp"
#include "encoder/steps.hpp"
#include "harness/check.hpp"

using namespace encoder;

TEST_CASE("the text form reads back every step's composition and a composition with every field set") {
  for (const auto& s : steps()) {
    CAPTURE(s.name);
    const Composition c = find_step(s.name);
    CHECK(parse(c.to_string()).to_string() == c.to_string());
  }
  Composition all;
  all.patch_embed = "a";
  all.layernorm = "b";
  all.attention = "c";
  all.mlp = "d";
  all.blocks = Blocks::Fp8;
  all.gemms = Gemms::CutlassCublaslt;
  all.per_layer_buffers = all.residual_epilogue = all.graph = all.pdl = all.l2_prefetch = all.attention_e4m3 =
      all.qkv_e4m3 = true;
  all.streams = 3;
  const Composition back = parse(all.to_string());
  CHECK(back == all);
  CHECK(back.blocks == Blocks::Fp8);
  CHECK(back.gemms == Gemms::CutlassCublaslt);
  CHECK(back.per_layer_buffers);
  CHECK(back.streams == 3);
  CHECK(back.attention_e4m3);
  CHECK(back.qkv_e4m3);
  // Every field that differs from the default shows in the text, so no two compositions share one.
  CHECK(all.to_string().find("blocks=fp8") != std::string::npos);
  CHECK(Composition{}.to_string() == "pe= ln=");
  // attn=none and mlp=none take a version back out (a step whose blocks compute that part).
  const Composition none = apply(all, "attn=none mlp=none");
  CHECK(none.attention.empty());
  CHECK(none.mlp.empty());
  CHECK(none.to_string().find("attn=") == std::string::npos);
  CHECK(parse(none.to_string()) == none);
}

TEST_CASE("every step names only what its block runner reads, and the check refuses the rest") {
  for (const auto& s : steps()) {
    CAPTURE(s.name);
    CHECK(check_fields(find_step(s.name)) == "");
  }
  Composition c = find_step("e19_exact_gelu");
  c.blocks = Blocks::Persistent;  // runs no attention or MLP version, no CUTLASS GEMMs, no L2 prefetch
  CHECK(check_fields(c).find("does not read attn=") != std::string::npos);
  c.attention.clear();
  c.mlp.clear();
  CHECK(check_fields(c).find("does not read gemms=") != std::string::npos);
  c.gemms = Gemms::Cublaslt;
  c.pdl = false;
  CHECK(check_fields(c).find("does not read l2_prefetch") != std::string::npos);
  c.l2_prefetch = false;
  CHECK(check_fields(c) == "");
  c.blocks = Blocks::Fp16;  // reads both versions: each must be named
  CHECK(check_fields(c).find("needs attn=") != std::string::npos);
  c.attention = "v9_softmax_overlap";
  CHECK(check_fields(c).find("needs mlp=") != std::string::npos);
  c.mlp = "fused_epilogue";
  CHECK(check_fields(c) == "");
  c.qkv_e4m3 = true;  // the fp8 blocks' alone
  CHECK(check_fields(c).find("does not read qkv_e4m3 (an E4M3 QKV)") != std::string::npos);
  c = find_step("e9_ln_folded");
  c.mlp = "erf_fit_epilogue";  // would label the folded blocks' tanh GELU as exact
  CHECK(check_fields(c).find("blocks=fp16_ln_folded does not read mlp=") != std::string::npos);
}

TEST_CASE("a delta changes only the fields it names; a switch turns off with =off") {
  const Composition e3 = find_step("e3_graph");
  const Composition off = apply(e3, "graph=off streams=4");
  CHECK_FALSE(off.graph);
  CHECK(off.streams == 4);
  CHECK(off.patch_embed == e3.patch_embed);
  CHECK(off.per_layer_buffers == e3.per_layer_buffers);
}

TEST_CASE("unknown fields, values and names are refused with what is known") {
  CHECK_THROWS_WITH_AS(parse("pe=x sparkle"), doctest::Contains("unknown field 'sparkle'"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("blocks=fp4"), doctest::Contains("persistent"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("gemms=magic"), doctest::Contains("cutlass+cublaslt"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("graph=maybe"), doctest::Contains("on or off"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("streams=0"), doctest::Contains("positive"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("streams=2x"), doctest::Contains("positive"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("buffers=pool"), doctest::Contains("per_layer"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("mlp="), doctest::Contains("version name or none"), study::StudyError);
  CHECK_THROWS_WITH_AS(find_step("e99_magic"), doctest::Contains("e15_fp8_attention_e4m3"), study::StudyError);
  CHECK_THROWS_WITH_AS(find_step("best"), doctest::Contains("fastest_fp16"), study::StudyError);
}

TEST_CASE("every step's parent is an earlier step, names are unique, every delta parses") {
  std::set<std::string> seen;
  for (const auto& s : steps()) {
    CAPTURE(s.name);
    CHECK(seen.insert(s.name).second);
    if (*s.parent) CHECK(seen.count(s.parent) == 1);
    CHECK(std::string(s.delta).size() > 0);
    CHECK_NOTHROW(parse(s.delta));
    CHECK(std::string(s.what).find('\t') == std::string::npos);
  }
  for (const auto& a : aliases()) {
    CAPTURE(a.name);
    CHECK(seen.count(a.step) == 1);
    CHECK(seen.count(a.name) == 0);
    CHECK(find_step(a.name) == find_step(a.step));
  }
}

TEST_CASE("steps.tsv is the table the code generates") {
  const std::string path = std::string(STUDY_SOURCE_ROOT) + "/stages/encoder/steps.tsv";
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  std::stringstream text;
  text << f.rdbuf();
  INFO("regenerate it: build/stages/encoder/encoder_e1_library --list-steps > stages/encoder/steps.tsv");
  CHECK(text.str() == steps_tsv());
}
