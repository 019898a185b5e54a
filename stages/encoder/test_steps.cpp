// The step table on the CPU: the composition text form reads back what it writes and refuses
// what it does not know; every step names only what its block runner reads; every step's parent
// exists and comes first; the tiled forms are each one kernel or refused with their reason;
// steps.tsv and composition.tsv are what the code generates. (analysis/test_steps.py checks every
// step against the composition it was measured with, steps_before_redesign.txt.)
#include <doctest/doctest.h>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>
#include "encoder/runner.hpp"
#include "encoder/steps.hpp"
#include "encoder/tiled.hpp"
#include "harness/check.hpp"

using namespace encoder;

TEST_CASE("the text form reads back every step's composition and a composition with every field set") {
  for (const auto& s : steps()) {
    CAPTURE(s.name);
    const Composition c = find_step(s.name);
    CHECK(parse(c.to_string()).to_string() == c.to_string());
  }
  // Every field of composition.def away from its default: a version named, a choice's last value,
  // a set's every member, a count of 3, a switch on.
  Composition all;
#define STUDY_VERSION_SET(member, ...) all.member = #member;
#define STUDY_CHOICE_SET(member, key, Enum, ...) all.member = Enum(std::size({STUDY_VALUES_##Enum(STUDY_INDEX)}) - 1);
#define STUDY_SET_SET(member, key, Enum, ...) \
  all.member.bits = (1u << std::size({STUDY_VALUES_##Enum(STUDY_INDEX)})) - 1;
#define STUDY_COUNT_SET(member, ...) all.member = 3;
#define STUDY_SWITCH_SET(member, ...) all.member = true;
#define STUDY_INDEX(E, ...) 0,
  STUDY_COMPOSITION_FIELDS(STUDY_VERSION_SET, STUDY_CHOICE_SET, STUDY_SET_SET, STUDY_COUNT_SET, STUDY_SWITCH_SET)
  const Composition back = parse(all.to_string());
  CHECK(back == all);
  CHECK(fields_set(all) == fields_set(back));
#define STUDY_SAME(member, ...) CHECK(back.member == all.member);
  STUDY_COMPOSITION_FIELDS(STUDY_SAME, STUDY_SAME, STUDY_SAME, STUDY_SAME, STUDY_SAME)
  CHECK(back.per_layer_buffers());
  CHECK(back.residual_epilogue());
  CHECK(back.tiled());
  CHECK(all.to_string().find("gemms=small_m+cutlass+cublaslt") != std::string::npos);
  CHECK(all.to_string().find("tile_ln=row_stats") != std::string::npos);
  // Every field that differs from the default shows in the text, so no two compositions share one.
#define STUDY_SHOWN(member, key, ...) CHECK(all.to_string().find(key) != std::string::npos);
  STUDY_COMPOSITION_FIELDS(STUDY_SHOWN, STUDY_SHOWN, STUDY_SHOWN, STUDY_SHOWN, STUDY_SHOWN)
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
  c.gemms = {GemmCandidate::Cublaslt};
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
  c.qkv_e4m3 = false;
  c.tile_ln = TileLn::Tasks;  // the tiled blocks' alone
  CHECK(check_fields(c).find("does not read tile_ln= (where the tiled kernel applies each LayerNorm)") !=
        std::string::npos);
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
  CHECK(off.buffers == e3.buffers);
}

TEST_CASE("gemms is a set: any members in any order, written in the list's order") {
  using G = GemmCandidate;
  CHECK(parse("gemms=cublaslt+cutlass").gemms == Set<G>{G::Cutlass, G::Cublaslt});
  CHECK(parse("gemms=cublaslt+small_m+cutlass").to_string() == "pe= ln= gemms=small_m+cutlass+cublaslt");
  CHECK(parse("gemms=cutlass+cutlass").gemms == Set<G>{G::Cutlass});
  CHECK(parse("gemms=cublaslt") == Composition{});  // the default, so not written
  CHECK_THROWS_WITH_AS(parse("gemms="), doctest::Contains("joined by '+'"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("gemms=cutlass+"), doctest::Contains("joined by '+'"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("gemms=cutlass+magic"), doctest::Contains("small_m, cutlass, cublaslt"),
                       study::StudyError);
}

TEST_CASE("the tiled steps: each adds one tile_ field to its parent, and every form is one kernel or refused") {
  // The form's code is what names its kernel (tiled.hpp): one a form, and back.
  for (unsigned code = 0; code < tiled::kForms; ++code) CHECK(tiled::code(tiled::decode(code)) == code);
  int valid = 0;
  for (unsigned code = 0; code < tiled::kForms; ++code) valid += tiled::invalid(tiled::decode(code)) == nullptr;
  CHECK(valid >= 7);
  for (const auto& s : steps()) {
    const Composition c = find_step(s.name);
    if (!c.tiled()) continue;
    CAPTURE(s.name);
    CHECK(tiled::invalid(tiled::form_of(c)) == nullptr);
    if (find_step(s.parent).tiled()) CHECK(std::string(s.delta).rfind("tile_", 0) == 0);
  }
  // Each constraint between the fields refuses with its reason.
  const std::pair<const char*, const char*> refused[] = {
      {"tile_ctas=2", "tile_a=streamed"},
      {"tile_mma=wgmma", "tile_a=streamed"},
      {"tile_a=streamed", "tile_a=resident"},  // tile_ln=panel by default
      {"tile_ln=folded", "tile_a=streamed"},
      {"tile_a=streamed tile_ln=row_stats", "tile_loads=first"},
      {"tile_a=streamed tile_ln=folded tile_shape=read_once", "tile_ln=row_stats"},
  };
  for (const auto& [fields, why] : refused) {
    CAPTURE(fields);
    const char* got = tiled::invalid(tiled::form_of(parse(std::string("blocks=tiled ") + fields)));
    REQUIRE(got != nullptr);
    CHECK(std::string(got).find(why) != std::string::npos);
  }
  CHECK(tiled::invalid(tiled::form_of(parse("blocks=tiled tile_a=streamed tile_ln=tasks"))) == nullptr);
}

TEST_CASE("unknown fields, values and names are refused with what is known") {
  CHECK_THROWS_WITH_AS(parse("pe=x sparkle"), doctest::Contains("unknown field 'sparkle'"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("blocks=fp4"), doctest::Contains("persistent"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("gemms=magic"), doctest::Contains("cublaslt"), study::StudyError);
  CHECK_THROWS_WITH_AS(parse("tile_ln=everywhere"), doctest::Contains("panel, tasks, folded, row_stats"),
                       study::StudyError);
  CHECK_THROWS_WITH_AS(parse("blocks=tiled_row_stats"), doctest::Contains("tiled"), study::StudyError);
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

std::string committed(const std::string& name) {
  const std::string path = std::string(STUDY_SOURCE_ROOT) + "/stages/encoder/" + name;
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

TEST_CASE("steps.tsv and composition.tsv are the tables the code generates") {
  INFO("regenerate them: build/stages/encoder/encoder_e1_library --list-steps > stages/encoder/steps.tsv, "
       "--list-fields > stages/encoder/composition.tsv");
  CHECK(committed("steps.tsv") == steps_tsv());
  CHECK(committed("composition.tsv") == fields_tsv());
}
