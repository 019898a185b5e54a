// CPU test of the CUTLASS GEMM layer's on-disk record of its search (common/gemm/cutlass_gemm.hpp):
// lines round-trip, malformed lines are ignored, a later line wins, a key another process stored
// since is read before a search, an unwritable file costs only the reuse, the path follows the
// environment; and the layer says why it cannot run here.
#include <doctest/doctest.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include "gemm/cutlass_gemm.hpp"

namespace cg = study::cutlass_gemm;

namespace {

std::filesystem::path temp_file(const char* stem) {
  std::random_device rd;
  return std::filesystem::temp_directory_path() / (std::string(stem) + std::to_string(rd()) + ".tsv");
}

cg::Key make_key() {
  cg::Key k;
  k.gpu = "NVIDIA H200/132";
  k.m = 50432;
  k.n = 3072;
  k.k = 768;
  k.act = cg::Activation::GeluTanh;
  k.candidates = "0123abcd";
  return k;
}
const cg::Key kKey = make_key();
const cg::Choice kChoice{"128x256x64_c2x1_coop", 1, 4, 312.5f};

// key written as one line, with `field` in its activation column, then read back: the key read,
// which must equal the one written.
cg::Key round_trip(const cg::Key& key, const std::string& field) {
  cg::Key k;
  cg::Choice c;
  const auto line = cg::CutlassCache::format_line(key, kChoice);
  CHECK(line.find("\t" + field + "\t") != std::string::npos);
  REQUIRE(cg::CutlassCache::parse_line(line, k, c));
  CHECK(!(k < key));
  CHECK(!(key < k));
  return k;
}

}  // namespace

TEST_CASE("a choice survives format_line and parse_line") {
  cg::Key k;
  cg::Choice c;
  REQUIRE(cg::CutlassCache::parse_line(cg::CutlassCache::format_line(kKey, kChoice), k, c));
  CHECK(!(k < kKey));
  CHECK(!(kKey < k));
  CHECK(c.kernel == kChoice.kernel);
  CHECK(c.raster == 1);
  CHECK(c.swizzle == 4);
  CHECK(c.us == doctest::Approx(312.5));
}

TEST_CASE("malformed lines are refused") {
  cg::Key k;
  cg::Choice c;
  const std::string good = cg::CutlassCache::format_line(kKey, kChoice);
  CHECK(cg::CutlassCache::parse_line(good, k, c));
  // Each bad line below differs from this good one in one field.
  CHECK(cg::CutlassCache::parse_line("gpu\t8\t768\t768\tnone\t0\tk\t0\t1\t1.0\tf", k, c));
  for (const std::string& bad :
       {std::string(""), std::string("garbage"), good + "\textra", good.substr(0, good.rfind('\t')),
        std::string("gpu\t0\t768\t768\tnone\t0\tk\t0\t1\t1.0\tf"),        // m = 0
        std::string("gpu\t8\t768\t768\tswish\t0\tk\t0\t1\t1.0\tf"),       // unknown activation
        std::string("gpu\t8\t768\t768\tnone\t2\tk\t0\t1\t1.0\tf"),        // residual not 0/1
        std::string("gpu\t8\t768\t768\tnone\t0\tk\t3\t1\t1.0\tf"),        // raster not 0/1
        std::string("gpu\t8\t768\t768\tnone\t0\tk\t0\t0\t1.0\tf"),        // swizzle 0
        std::string("gpu\t8\t768\t768\tnone\t0\tk\t0\t1\t1\t1.0\tf"),  // a splits field (an older file)
        std::string("gpu\t8\t768\t768\tnone\t0\tk\t0\t1\tx\tf"),        // time not a number
        std::string("gpu\t8\t768\t768\tnone\t0\tk\t0\t1\t1.0"),           // no candidates field (an older file)
        std::string("gpu\t8\t768\t768\tnone\t0\tk\t0\t1\t1.0\t"),         // empty candidates
        std::string("gpu\t8x\t768\t768\tnone\t0\tk\t0\t1\t1.0\tf")}) {  // not an integer
    CAPTURE(bad);
    CHECK_FALSE(cg::CutlassCache::parse_line(bad, k, c));
  }
}

TEST_CASE("stored choices are read back by a new cache; the later line of a key wins") {
  const auto path = temp_file("cutlass_cache_");
  {
    cg::CutlassCache cache(path.string());
    CHECK_FALSE(cache.find(kKey).has_value());
    cache.store(kKey, kChoice);
    cache.store(kKey, {"128x128x64_c1x1_coop", 0, 2, 300.f});
    REQUIRE(cache.find(kKey).has_value());
  }
  std::ofstream(path, std::ios::app) << "not a choice\n";
  cg::CutlassCache reread(path.string());
  const auto found = reread.find(kKey);
  REQUIRE(found.has_value());
  CHECK(found->kernel == "128x128x64_c1x1_coop");
  cg::Key other = kKey;
  other.residual = true;
  CHECK_FALSE(reread.find(other).has_value());
  std::filesystem::remove(path);
}

TEST_CASE("a key another process stored after this one read the file is found, not searched again") {
  const auto path = temp_file("cutlass_cache_shared_");
  cg::CutlassCache kept(path.string());   // a kept process: read the file before the other stored
  cg::Key held = kKey;
  held.residual = true;
  kept.store(held, kChoice);
  CHECK_FALSE(kept.find(kKey).has_value());
  {
    cg::CutlassCache other(path.string());  // the next bench: searches kKey, and also holds another
    other.store(kKey, {"128x128x64_c1x1_coop", 0, 2, 300.f});  // choice for `held`, appended later
    other.store(held, {"64x128x64_c1x1_pingpong", 1, 1, 9.f});
  }
  const auto found = kept.find(kKey);
  REQUIRE(found.has_value());
  CHECK(found->kernel == "128x128x64_c1x1_coop");
  // A key this process already held keeps its choice: the file adds keys, it never swaps one.
  REQUIRE(kept.find(held).has_value());
  CHECK(kept.find(held)->kernel == kChoice.kernel);
  std::filesystem::remove(path);
}

TEST_CASE("an unwritable cache file keeps the choice in memory and does not throw") {
  cg::CutlassCache cache("/proc/no/such/dir/cutlass_gemm.tsv");
  CHECK_NOTHROW(cache.store(kKey, kChoice));
  CHECK(cache.find(kKey).has_value());
}

TEST_CASE("the cache path follows STUDY_CUTLASS_CACHE, then XDG_CACHE_HOME, then HOME") {
  setenv("STUDY_CUTLASS_CACHE", "/tmp/explicit.tsv", 1);
  CHECK(cg::CutlassCache::default_path() == "/tmp/explicit.tsv");
  unsetenv("STUDY_CUTLASS_CACHE");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  CHECK(cg::CutlassCache::default_path() == "/tmp/xdg/vit-cuda-study/cutlass_gemm.tsv");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  CHECK(cg::CutlassCache::default_path() == "/home/someone/.cache/vit-cuda-study/cutlass_gemm.tsv");
}

TEST_CASE("the layer says why it cannot run here, and lists its kernels when built with them") {
  // On a machine without a Hopper GPU (or a build without CUTLASS) the layer is unavailable, with
  // a reason; its kernel list is empty exactly when the build has no CUTLASS.
  const auto why = cg::unavailable();
  const auto names = cg::kernel_names(cg::Activation::None);
  if (names.empty()) CHECK(why.find("CUTLASS") != std::string::npos);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) CHECK(!why.empty());
}

TEST_CASE("a LayerNorm-folded choice is its own key and round-trips") {
  cg::Key ln = kKey;
  ln.ln = true;
  CHECK(round_trip(ln, "ln_gelu_tanh").ln);
  CHECK((kKey < ln || ln < kKey));
}

TEST_CASE("an FP8 choice is its own key and round-trips") {
  cg::Key f8 = kKey;
  f8.fp8 = true;
  f8.cublaslt = true;
  const cg::Key k = round_trip(f8, "fp8_gelu_tanh+cublaslt");
  CHECK(k.fp8);
  CHECK(k.cublaslt);
  CHECK(!k.ln);
  CHECK(!k.e4m3_out);
  CHECK(k.act == cg::Activation::GeluTanh);
  cg::Key fp16 = f8;
  fp16.fp8 = false;
  CHECK((fp16 < f8 || f8 < fp16));
  // An E4M3 output is a key of its own (the QKV GEMM of the same shape writes fp16 or E4M3).
  cg::Key e4m3 = f8;
  e4m3.act = cg::Activation::None;
  e4m3.e4m3_out = true;
  const cg::Key back = round_trip(e4m3, "fp8_none_e4m3+cublaslt");
  CHECK(back.e4m3_out);
  CHECK(back.act == cg::Activation::None);
  cg::Key fp16_out = e4m3;
  fp16_out.e4m3_out = false;
  CHECK((fp16_out < e4m3 || e4m3 < fp16_out));
}

TEST_CASE("a choice searched with cuBLASLt among the candidates is its own key and round-trips") {
  cg::Key lt = kKey;
  lt.cublaslt = true;
  cg::Choice won = kChoice;
  won.kernel = "cublaslt";
  cg::Key k;
  cg::Choice c;
  const auto line = cg::CutlassCache::format_line(lt, won);
  CHECK(line.find("\tgelu_tanh+cublaslt\t") != std::string::npos);
  REQUIRE(cg::CutlassCache::parse_line(line, k, c));
  CHECK(k.cublaslt);
  CHECK(!k.ln);
  CHECK(k.act == kKey.act);
  CHECK(c.kernel == "cublaslt");
  CHECK((kKey < lt || lt < kKey));
  // Both prefixes at once, and a suffix alone is no activation.
  lt.ln = true;
  REQUIRE(cg::CutlassCache::parse_line(cg::CutlassCache::format_line(lt, won), k, c));
  CHECK((k.ln && k.cublaslt));
  CHECK(!cg::CutlassCache::parse_line("gpu\t8\t768\t768\t+cublaslt\t0\tk\t0\t1\t1.0\tf", k, c));
}

TEST_CASE("the fp16-epilogue GELU is an activation of its own") {
  cg::Key f16 = kKey;
  f16.act = cg::Activation::GeluTanhF16;
  f16.cublaslt = true;
  cg::Key k;
  cg::Choice c;
  const auto line = cg::CutlassCache::format_line(f16, kChoice);
  CHECK(line.find("\tgelu_tanh_f16+cublaslt\t") != std::string::npos);
  REQUIRE(cg::CutlassCache::parse_line(line, k, c));
  CHECK(k.act == cg::Activation::GeluTanhF16);
  CHECK(k.cublaslt);
  CHECK((f16 < kKey || kKey < f16));
}

TEST_CASE("every activation round-trips through the cache's text") {
  std::set<std::string> names;
  for (const auto& [a, name] : cg::kActivations) {
    CHECK(names.insert(name).second);  // each spelled once
    CHECK(std::string(cg::activation_name(a)) == name);
    cg::Key key = kKey, k;
    key.act = a;
    cg::Choice c;
    const auto line = cg::CutlassCache::format_line(key, kChoice);
    INFO(line);
    CHECK(line.find(std::string("\t") + cg::activation_name(a) + "\t") != std::string::npos);
    REQUIRE(cg::CutlassCache::parse_line(line, k, c));
    CHECK(k.act == a);
  }
}

TEST_CASE("a choice made among other candidates is another key") {
  cg::Key other = kKey;
  other.candidates = "feedbeef";
  const auto path = temp_file("cutlass_cache_");
  {
    cg::CutlassCache cache(path.string());
    cache.store(kKey, kChoice);
  }
  cg::CutlassCache reread(path.string());
  CHECK(reread.find(kKey).has_value());
  CHECK_FALSE(reread.find(other).has_value());
  std::filesystem::remove(path);
}
