// CPU tests of the shared harness: statistics, CSV, command line, ViT shapes, comparison, and
// the cuDNN versions' check of the loaded cuDNN against the build's.
#include <doctest/doctest.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include "harness/cudnn_version.hpp"
#include "device/gelu.cuh"
#include "harness/bench.hpp"
#include "harness/check.hpp"
#include "harness/cli.hpp"
#include "harness/compare.hpp"
#include "harness/csv.hpp"
#include "harness/memory.hpp"
#include "harness/random.hpp"
#include "harness/stats.hpp"
#include "harness/vit_config.hpp"

using namespace study;

// The exact GELU the erf-fit epilogue computes (device/gelu.cuh), walked on the host every 1e-4
// over [-20, 20] against erf in double: within 1e-7 plus fp32's rounding of the result. The tanh
// form, the error it replaces, must fail the same bound (else the bound could not tell them apart).
TEST_CASE("GELU's exact form by its fitted exp2 matches erf to fp32 rounding") {
  auto exact = [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); };
  auto tanh_form = [](double x) {
    return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  };
  double worst = 0, worst_at = 0, tanh_worst = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = static_cast<float>(i * 1e-4);
    const double want = exact(x);
    const double err = std::fabs(study::gelu_erf_fit(x) - want) - 0x1p-23 * std::fabs(want);
    if (err > worst) worst = err, worst_at = x;
    tanh_worst = std::max(tanh_worst, std::fabs(tanh_form(x) - want) - 0x1p-23 * std::fabs(want));
  }
  INFO("worst excess over fp32 rounding " << worst << " at x = " << worst_at);
  CHECK(worst <= 1e-7);
  CHECK(tanh_worst > 1e-4);
  CHECK(study::gelu_erf_fit(0.f) == 0.f);
  CHECK(study::gelu_erf_fit(7.5f) == 7.5f);   // beyond the fit: x, exactly
  CHECK(study::gelu_erf_fit(-7.5f) == 0.f);   // and 0 (fp32 -0 compares equal)
  CHECK(std::isnan(study::gelu_erf_fit(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("summary statistics") {
  const Stats s = summarize({4, 1, 3, 2});
  CHECK(s.mean == doctest::Approx(2.5));
  CHECK(s.median == doctest::Approx(2.5));
  CHECK(s.min == 1);
  CHECK(s.max == 4);
  CHECK(s.std == doctest::Approx(std::sqrt(5.0 / 3.0)));
  CHECK(summarize({7}).std == 0);
  CHECK(summarize({3, 1, 2}).median == 2);
  CHECK_THROWS(summarize({}));
}

TEST_CASE("ViT token counts and models") {
  CHECK(tokens_for_image(224) == 197);
  CHECK(tokens_for_image(384) == 577);
  CHECK(tokens_for_image(512) == 1025);
  CHECK(tokens_for_image(16) == 2);
  CHECK_THROWS_AS(tokens_for_image(200), StudyError);
  CHECK_THROWS_AS(tokens_for_image(0), StudyError);
  CHECK_THROWS_AS(tokens_for_image(-16), StudyError);
  CHECK(find_model("vit_b").hidden == 768);
  CHECK(find_model("vit_l").layers == 24);
  for (const auto& m : models()) CHECK(m.head_dim() == 64);
  CHECK_THROWS_AS(find_model("vit_h"), StudyError);
}

TEST_CASE("CSV escaping and schema") {
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("a,b") == "\"a,b\"");
  CHECK(csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_columns().size() == 54);
  CHECK(csv_columns().front() == "run_id");
  CHECK(csv_columns()[38] == "note");  // new columns are appended after it
  CHECK(csv_columns().back() == "energy_why_not");
  Row r;
  CHECK_THROWS(r.set("no_such_column", 1));
  r.set("mean_us", std::numeric_limits<double>::quiet_NaN());
  CHECK(r.get("mean_us") == "nan");
}

TEST_CASE("a CSV of another schema is never appended to") {
  char dir[] = "/tmp/test_common_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string old_csv = std::string(dir) + "/old.csv", same = std::string(dir) + "/same.csv";
  {  // the schema before `rows` and the columns after it were added
    std::FILE* f = std::fopen(old_csv.c_str(), "w");
    std::string header;
    for (size_t i = 0; i < 39; ++i) header += (i ? "," : "") + csv_columns()[i];
    std::fprintf(f, "%s\nrow\n", header.c_str());
    std::fclose(f);
  }
  try {
    CsvWriter w(old_csv);
    FAIL("appending to a file of another schema must be refused");
  } catch (const StudyError& e) {
    CHECK(e.kind == ErrorKind::Usage);
    const std::string what = e.what();
    CHECK(what.find(old_csv) != std::string::npos);
    CHECK(what.find("lacks column(s) rows, h2d_us") != std::string::npos);
  }
  CHECK(header_difference("a," + csv_header()).find("unknown column(s) a") != std::string::npos);
  CHECK(header_difference(csv_header()).empty());
  { CsvWriter w(same); }  // new file: header written
  { CsvWriter w(same); }  // same schema: appending is fine
  std::FILE* f = std::fopen(same.c_str(), "r");
  char line[1024] = {0};
  REQUIRE(std::fgets(line, sizeof line, f) != nullptr);
  std::fclose(f);
  CHECK(std::string(line) == csv_header() + "\n");
  std::remove(old_csv.c_str());
  std::remove(same.c_str());
  rmdir(dir);
}

TEST_CASE("command line parsing") {
  CommonOptions o;
  int rows = 0;
  Cli cli("t", "test");
  cli.add_common(o);
  cli.add_int("--rows", &rows, "rows");
  const char* argv[] = {"t", "--batch", "8", "--image-size=384", "--flush-l2", "--rows", "3", "--no-check"};
  cli.parse(8, const_cast<char**>(argv));
  CHECK(o.batch == 8);
  CHECK(o.image_size == 384);
  CHECK(o.flush_l2);
  CHECK_FALSE(o.check);
  CHECK(rows == 3);
  CHECK(cli.given("--rows"));
  CHECK_FALSE(cli.given("--model"));
  CHECK(o.warmup == 5);
  CHECK(o.iters == 10);

  auto rejects = [](std::vector<const char*> args) {
    CommonOptions o2;
    Cli c("t", "test");
    c.add_common(o2);
    args.insert(args.begin(), "t");
    try {
      c.parse(static_cast<int>(args.size()), const_cast<char**>(args.data()));
    } catch (const StudyError& e) {
      return e.kind == ErrorKind::Usage;
    }
    return false;
  };
  CHECK(rejects({"--batch", "0"}));
  CHECK(rejects({"--batch", "-1"}));
  CHECK(rejects({"--batch", "1.5"}));
  CHECK(rejects({"--iters"}));
  CHECK(rejects({"--bogus"}));
  CHECK(rejects({"--flush-l2=1"}));
  CHECK(rejects({"--seed", "-4"}));
  CHECK(rejects({"--batch", "4294967296"}));
  CHECK(rejects({"--streams", "0"}));
  CHECK(rejects({"--streams", "SM"}));
  CHECK(rejects({"--streams", "sm2"}));
}

TEST_CASE("--streams takes a count or 'sm', left unresolved (0) until the device is known") {
  for (const char* value : {"sm", "8"}) {
    CommonOptions o;
    Cli cli("t", "test");
    cli.add_common(o);
    const char* argv[] = {"t", "--streams", value};
    cli.parse(3, const_cast<char**>(argv));
    CHECK(o.streams == (std::string(value) == "sm" ? 0 : 8));
    // An unresolved "sm" leaves the streams column empty: no row records a count not used.
    CHECK(base_row(o, "f", "v").get("streams") == (std::string(value) == "sm" ? "" : "8"));
  }
}

TEST_CASE("comparison: NaN never passes, tolerance is relative L2") {
  std::vector<float> ref = {1, 2, 3, 4};
  CHECK(compare(ref, ref).ok);
  std::vector<float> close = {1.001f, 2, 3, 4};
  CHECK(compare(close, ref).ok);
  std::vector<float> far = {1.5f, 2, 3, 4};
  CHECK_FALSE(compare(far, ref).ok);
  std::vector<float> nan = {1, std::nanf(""), 3, 4};
  const auto c = compare(nan, ref);
  CHECK_FALSE(c.ok);
  CHECK(c.nonfinite == 1);
  CHECK(c.worst_index == 1);
  std::vector<float> inf = {1, 2, INFINITY, 4};
  CHECK_FALSE(compare(inf, ref).ok);
  CHECK_FALSE(compare(std::vector<float>{}, std::vector<float>{}).ok);
}

TEST_CASE("comparison: one wrong element or one wrong row among 50432 x 768 fails") {
  constexpr std::size_t rows = 50432, hidden = 768;
  // A LayerNorm-like output: values of order 1, exact copy first.
  auto ref = random_normal(rows * hidden, 11);
  round_to_half(ref);
  std::vector<float> got = ref;
  const auto exact = compare(got, ref);
  CHECK(exact.ok);
  CHECK(exact.outside == 0);
  CHECK(exact.rel_l2 == 0);

  // One element off by 0.1: invisible to the relative L2 error, outside its element bound.
  const std::size_t planted = 31337 * hidden + 5;
  got[planted] = ref[planted] + 0.1f;
  const auto one = compare(got, ref);
  CHECK(one.rel_l2 <= kFp16RelTol);
  CHECK_FALSE(one.ok);
  CHECK(one.outside == 1);
  CHECK(one.worst_element == planted);
  CHECK(one.summary().find("1 element(s) outside") != std::string::npos);
  got[planted] = ref[planted];

  // One whole row written as zeros: the relative L2 error is sqrt(1/50432) = 0.0045, within
  // its 5e-3 tolerance; the element bound catches the row.
  const std::size_t bad_row = 20000;
  std::fill_n(got.begin() + bad_row * hidden, hidden, 0.f);
  const auto row = compare(got, ref);
  CHECK(row.rel_l2 <= kFp16RelTol);
  CHECK_FALSE(row.ok);
  CHECK(row.outside > hidden / 2);
  CHECK(row.worst_element / hidden == bad_row);
  // So is a row holding its neighbour's values (a row offset).
  std::copy_n(ref.begin() + (bad_row + 1) * hidden, hidden, got.begin() + bad_row * hidden);
  CHECK_FALSE(compare(got, ref).ok);
  std::copy_n(ref.begin() + bad_row * hidden, hidden, got.begin() + bad_row * hidden);

  // One row scaled by 1.01 (a wrong statistic): 1% of |ref| is outside atol + 2e-3 |ref| for
  // the row's larger elements, far under any relative L2 tolerance.
  for (std::size_t i = bad_row * hidden; i < (bad_row + 1) * hidden; ++i) got[i] = ref[i] * 1.01f;
  const auto scaled = compare(got, ref);
  CHECK(scaled.rel_l2 < 1e-4);
  CHECK_FALSE(scaled.ok);
  CHECK(scaled.worst_element / hidden == bad_row);
  std::copy_n(ref.begin() + bad_row * hidden, hidden, got.begin() + bad_row * hidden);

  // Errors of fp16 rounding (half an ulp) everywhere pass.
  for (std::size_t i = 0; i < got.size(); i += 7) got[i] = ref[i] * (1.f + 4.8e-4f);
  CHECK(compare(got, ref).ok);

  // NaN anywhere fails, also where the element bound would not look.
  got = ref;
  got[rows * hidden - 1] = std::nanf("");
  const auto nan = compare(got, ref);
  CHECK_FALSE(nan.ok);
  CHECK(nan.nonfinite == 1);
}

TEST_CASE("comparison: the element bound is atol + rtol |ref|, as torch.testing.assert_close") {
  const Tolerance tol{1.0, 0.01, 0.1};  // rel L2 out of the way
  const std::vector<float> ref = {0, 1, -10, 100};
  CHECK(compare(std::vector<float>{0.0099f, 1.1f, -11.0f, 110.f}, ref, tol).ok);
  CHECK_FALSE(compare(std::vector<float>{0.0101f, 1, -10, 100}, ref, tol).ok);   // atol alone at 0
  CHECK_FALSE(compare(std::vector<float>{0, 1.12f, -10, 100}, ref, tol).ok);     // 0.12 > 0.11
  CHECK_FALSE(compare(std::vector<float>{0, 1, -11.02f, 100}, ref, tol).ok);     // |ref| counts, not ref
  const auto c = compare(std::vector<float>{0, 1, -10, 120}, ref, tol);
  CHECK_FALSE(c.ok);
  CHECK(c.worst_element == 3);
  CHECK(c.worst_ratio == doctest::Approx(20.0 / 10.01));
  // A NaN in the reference is never a match.
  CHECK_FALSE(compare(std::vector<float>{0, 1, -10, 100}, std::vector<float>{0, 1, -10, std::nanf("")}, tol).ok);
}

TEST_CASE("comparison via a GPU reference: the reference is checked on the sample first") {
  const std::vector<float> want = {1.f, 2.f, 3.f};                   // the CPU's sampled elements
  const std::vector<float> gref = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};    // the GPU's, every element
  const std::vector<float> sample(gref.begin(), gref.begin() + 3);
  std::vector<float> got = gref;
  CHECK(study::compare_via_gpu_reference(got, gref, sample, want, {}, "MLP", "rows").ok);
  got[5] = 7.f;  // a wrong element outside the CPU's sample is caught through the GPU reference
  CHECK_FALSE(study::compare_via_gpu_reference(got, gref, sample, want, {}, "MLP", "rows").ok);
  std::vector<float> bad_sample = sample;
  bad_sample[1] = 2.01f;  // a GPU reference off the CPU's: its fault, said as such
  try {
    study::compare_via_gpu_reference(gref, gref, bad_sample, want, {}, "MLP", "rows");
    FAIL("a GPU reference that disagrees with the CPU reference must throw");
  } catch (const study::StudyError& e) {
    CHECK(e.kind == study::ErrorKind::Data);
    CHECK(std::string(e.what()).find("the GPU MLP reference disagrees with the CPU reference on the sampled rows") !=
          std::string::npos);
  }
}

TEST_CASE("memory: a need above what is free is refused with one line naming both") {
  const double gib = 1024.0 * 1024 * 1024;
  FreeMemory free;
  free.device = 80 * gib;
  free.host = 60 * gib;
  MemoryNeed fits{10 * gib, 10 * gib};
  CHECK(memory_refusal(fits, free, "x").empty());
  // The reserve is kept on each side.
  CHECK_FALSE(memory_refusal({80 * gib - kDeviceReserveBytes / 2, 0}, free, "x").empty());
  CHECK(memory_refusal({80 * gib - kDeviceReserveBytes, 0}, free, "x").empty());

  const std::string host = memory_refusal({1, 1211.8e9}, free, "layernorm v5_unrolled rows=394000000");
  CHECK(host.find("out of host memory") == 0);
  CHECK(host.find("layernorm v5_unrolled rows=394000000") != std::string::npos);
  CHECK(host.find("(1211800000000 bytes)") != std::string::npos);  // needed
  CHECK(host.find("(64424509440 bytes) free") != std::string::npos);  // free
  CHECK(host.find('\n') == std::string::npos);

  const std::string device = memory_refusal({100 * gib, 1}, free, "mlp");
  CHECK(device.find("out of device memory") == 0);
  CHECK(device.find("(107374182400 bytes)") != std::string::npos);
  // Host is asked first: the host's OOM killer is what kills a bench without a word.
  CHECK(memory_refusal({100 * gib, 100 * gib}, free, "mlp").find("host") != std::string::npos);
  // A side whose free memory is unknown is not checked.
  CHECK(memory_refusal({1e18, 1e18}, FreeMemory{}, "x").empty());
}

TEST_CASE("memory: MemAvailable and the cgroup limit are read as bytes") {
  const std::string meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n"
                              "MemAvailable:   19000000 kB\nBuffers:  10 kB\n";
  CHECK(parse_mem_available(meminfo) == 19000000.0 * 1024);
  CHECK(parse_mem_available("MemTotal: 1 kB\n") < 0);
  CHECK(parse_mem_available("") < 0);
  CHECK(cgroup_room("8589934592\n", "1073741824\n") == 7516192768.0);
  CHECK(cgroup_room("max\n", "1073741824\n") < 0);
  CHECK(cgroup_room("100\n", "200\n") == 0);
  CHECK(cgroup_room("", "") < 0);
  // This machine's numbers are readable and positive.
  CHECK(host_available_bytes() > 0);
}

TEST_CASE("seeded random inputs are reproducible and fp16-representable after rounding") {
  CHECK(random_normal(16, 7) == random_normal(16, 7));
  CHECK(random_normal(16, 7) != random_normal(16, 8));
  auto x = random_uniform(64, 3, -10.f, 10.f);
  round_to_half(x);
  for (float v : x) CHECK(__half2float(__float2half_rn(v)) == v);
}

TEST_CASE("cuDNN versions refuse a loaded cuDNN other than the build's, naming both") {
  CHECK(cudnn_version_name(91900) == "9.19.0");
  CHECK(cudnn_version_name(91401) == "9.14.1");
  CHECK(cudnn_version_name(8907) == "8.9.7");  // cuDNN 8 numbered major*1000 + minor*100 + patch
  CHECK(cudnn_mismatch(91900, 91900).empty());
  const std::string why = cudnn_mismatch(91900, 91400);
  REQUIRE_FALSE(why.empty());
  CHECK(why.find("cuDNN 9.14.0 (91400) is loaded") != std::string::npos);
  CHECK(why.find("the build used cuDNN 9.19.0 (91900)") != std::string::npos);
  CHECK_FALSE(cudnn_mismatch(91900, 91901).empty());  // a patch level differs: another library
  CHECK_FALSE(cudnn_mismatch(91400, 91900).empty());  // newer at run time is refused too
  CHECK(cudnn_column(91900, 91900) == "91900");
  CHECK(cudnn_column(91900, 91400) == "91400 (built against 91900: cuDNN versions refuse)");
}
