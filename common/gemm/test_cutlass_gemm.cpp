// GPU test of the CUTLASS GEMM layer (common/gemm/cutlass_gemm.hpp): every compiled kernel with every
// epilogue (bias, bias + residual, bias + GELU in both forms) against ref::linear at the encoder's
// GEMM shapes and odd row counts, both raster orders; the search and its on-disk record; the
// search with cuBLASLt a candidate; the few-rows split-K kernels (small_m.cu) of every tile width,
// slice count and epilogue, and the search with them candidates; the refusals (misaligned
// operands, a residual after GELU, a search inside a graph capture, a shape a few-rows kernel
// cannot tile); the FP8 kernels of each epilogue against the product of the E4M3 values they
// multiplied (fp8_gemm_case.hpp), their search with cuBLASLt's FP8 GEMM a candidate, and their
// refusals.
#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include "gemm/cutlass_gemm.hpp"
#include "gemm/fp8_gemm_case.hpp"
#include "harness/check.hpp"
#include "harness/compare.hpp"
#include "harness/gpu.hpp"
#include "harness/gpu_test_main.hpp"
#include "harness/launches.hpp"
#include "harness/random.hpp"
#include "reference.hpp"

namespace cg = study::cutlass_gemm;
using cg::Activation;

namespace {

std::vector<float> rounded_normal(size_t n, std::uint64_t seed, float stddev) {
  auto v = study::random_normal(n, seed, 0.f, stddev);
  study::round_to_half(v);
  return v;
}

double gelu(double x, Activation a) {
  if (a == Activation::GeluTanh || a == Activation::GeluTanhF16)
    return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

struct Case {
  study::GemmShape s;
  std::vector<float> x, w, b, r;
  study::DeviceBuffer<__half> dx, dw, db, dr, dy;
  std::vector<float> want;

  Activation act;
  // knee: the outputs in GELU's negative knee (-2.75 +- 1.3) rather than ~N(0, 1), where the tanh
  // form is 2-10% off GELU's value and fp16 rounds it to 0.05%.
  Case(const study::GemmShape& shape, Activation a, bool residual, bool knee = false) : s(shape), act(a) {
    const auto seed = study::fresh_seed();
    const size_t nx = size_t(s.m) * s.k, nw = size_t(s.n) * s.k, ny = size_t(s.m) * s.n;
    x = rounded_normal(nx, seed, 1.f);
    w = rounded_normal(nw, seed + 1, (knee ? 0.25f : 1.f) / std::sqrt(float(s.k)));
    if (knee) {
      b = study::random_uniform(s.n, seed + 2, -3.f, -2.5f);
      study::round_to_half(b);
    } else {
      b = rounded_normal(s.n, seed + 2, 0.5f);
    }
    if (residual) r = rounded_normal(ny, seed + 3, 1.f);
    dx = study::to_device(study::to_half(x));
    dw = study::to_device(study::to_half(w));
    db = study::to_device(study::to_half(b));
    if (residual) dr = study::to_device(study::to_half(r));
    dy = study::DeviceBuffer<__half>(ny);
    ref::linear(x, s.m, s.k, w, b, s.n, want);
    if (act != Activation::None)
      for (auto& v : want) v = static_cast<float>(gelu(v, act));
    for (size_t i = 0; i < r.size(); ++i) want[i] += r[i];
  }
  study::GemmOperands operands() {
    return {dx.get(), dw.get(), dy.get(), db.get(), r.empty() ? nullptr : dr.get()};
  }
  study::Comparison check() {
    // fp16 rounding of y; near 0 the epilogue's fp32 GELU (CUTLASS's tanh form is a fast
    // approximation too, as cuBLASLt's). The fp16 epilogue rounds ~3 more times per output
    // (bias add, GELU's products, tanh.approx.f16), each 2^-11 relative.
    const double rtol = act == Activation::GeluTanhF16 ? 2 * study::kFp16Rtol : study::kFp16Rtol;
    return check({study::kFp16RelTol, 3e-3, rtol});
  }
  study::Comparison check(const study::Tolerance& tol) {
    CUDA_CHECK(cudaDeviceSynchronize());
    return study::compare(study::to_float(study::to_host(dy)), want, tol);
  }
};

// The layer reads its disk cache's path once, at first use: point it at a file of this run's own
// before any test runs, so that the test neither reads nor writes the user's cache.
const std::filesystem::path kCachePath = [] {
  auto p = std::filesystem::temp_directory_path() /
           ("cutlass_gemm_test_" + std::to_string(study::fresh_seed()) + ".tsv");
  setenv("STUDY_CUTLASS_CACHE", p.c_str(), 1);
  return p;
}();

const study::GemmShape kShapes[] = {
    {197, 2304, 768},  // QKV, batch 1
    {591, 768, 3072},  // fc2, batch 3
    {1, 3072, 768},    // a single row
    {200, 136, 72},    // widths that are multiples of 8 but of no tile
};

// One named kernel (CUTLASS's or a few-rows one) on fresh operands and a poisoned output,
// checked against ref::linear with its epilogue.
void check_named_kernel(const std::string& name, const study::GemmShape& s, Activation act, bool residual,
                        int raster) {
  CAPTURE(name);
  CAPTURE(cg::activation_name(act));
  CAPTURE(residual);
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  CAPTURE(raster);
  Case c(s, act, residual);
  study::poison(c.dy);
  cg::run_kernel({name, raster, 2}, s, act, c.operands(), nullptr);
  const auto r = c.check();
  INFO(r.summary());
  CHECK(r.ok);
}

// One GEMM through the layer's search with `opt` (searched on its first call, from the plan on its
// second), checked against ref::linear; the layer's line for the choice it ran.
struct Searched {
  study::GemmShape s;
  Activation act;
  bool residual;
};
std::string check_searched(const Searched& t, int call, const cg::RunOptions& opt) {
  CAPTURE(t.s.m);
  CAPTURE(t.s.n);
  CAPTURE(t.s.k);
  CAPTURE(cg::activation_name(t.act));
  CAPTURE(call);
  Case c(t.s, t.act, t.residual);
  study::poison(c.dy);
  cg::run(c.s, t.act, c.operands(), nullptr, opt);
  const auto r = c.check();
  INFO(r.summary());
  CHECK(r.ok);
  return cg::choices().back();
}

}  // namespace

TEST_CASE("every compiled kernel computes its epilogue") {
  for (Activation act : {Activation::None, Activation::GeluTanh, Activation::GeluErf, Activation::GeluErfFit})
    for (bool residual : {false, true}) {
      if (residual && act != Activation::None) continue;
      const auto names = cg::kernel_names(act, residual);
      REQUIRE(!names.empty());
      for (const auto& name : names)
        for (const auto& s : kShapes)
          for (int raster : {0, 1}) check_named_kernel(name, s, act, residual, raster);
    }
}

// The exact forms (erf and its fit) told from the tanh forms on every compiled kernel: in GELU's
// negative knee the exact ones match erf to fp16's rounding (the fit's own error is 9e-8), the
// tanh ones miss it by 1.7% rel L2 (2-10% an element), which shows the inputs tell them apart.
// Without this, a GELU activation that claims erf could compute tanh and pass every other check
// (3e-3 absolute).
// The few-rows kernels (small_m.cu) have exact forms only (the tanh forms are the libraries'):
// each at a shape every slice count tiles.
TEST_CASE("the exact GELU kernels compute erf's form, the tanh kernels tanh's") {
  const study::Tolerance erf_tol{2e-3, 1e-5, 4 * study::kFp16Rtol};
  const auto check_form = [&](const std::string& name, const study::GemmShape& s, Activation act) {
    const bool exact = act == Activation::GeluErf || act == Activation::GeluErfFit;
    const std::string act_name = cg::activation_name(act);
    CAPTURE(name);
    CAPTURE(act_name);
    CAPTURE(s.m);
    Case c(s, Activation::GeluErf, false, /*knee=*/true);  // the erf reference
    study::poison(c.dy);
    cg::run_kernel({name, 0, 2}, s, act, c.operands(), nullptr);
    const auto r = c.check(erf_tol);
    INFO(r.summary());
    REQUIRE(r.nonfinite == 0);
    MESSAGE(name << " " << act_name << ", " << s.m << " rows: rel L2 against erf " << r.rel_l2);
    if (exact)
      CHECK(r.ok);
    else
      CHECK(r.rel_l2 >= 8e-3);
  };
  for (Activation act : {Activation::GeluErf, Activation::GeluErfFit, Activation::GeluTanh, Activation::GeluTanhF16})
    for (const auto& name : cg::kernel_names(act))
      for (const study::GemmShape& s : {study::GemmShape{197, 3072, 768}, study::GemmShape{1, 3072, 768}})
        check_form(name, s, act);
  for (Activation act : {Activation::GeluErf, Activation::GeluErfFit}) {
    const auto names = cg::small_m_kernel_names(act, false);
    REQUIRE(!names.empty());
    for (const auto& name : names) check_form(name, {197, 384, 1536}, act);
  }
}

TEST_CASE("the fp16-epilogue GELU kernels compute the tanh GELU") {
  const auto names = cg::kernel_names(Activation::GeluTanhF16);
  REQUIRE(!names.empty());
  for (const auto& name : names)
    for (const auto& s : kShapes)
      for (int raster : {0, 1}) {
        CAPTURE(name);
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        CAPTURE(raster);
        Case c(s, Activation::GeluTanhF16, false);
        study::poison(c.dy);
        cg::run_kernel({name, raster, 2}, s, Activation::GeluTanhF16, c.operands(), nullptr);
        const auto r = c.check();
        INFO(r.summary());
        CHECK(r.ok);
      }
  // And through the search with cuBLASLt a candidate, under its own key.
  study::Gemm gemm;
  cg::RunOptions opt;
  opt.cublaslt = &gemm;
  Case c({6304, 3072, 768}, Activation::GeluTanhF16, false);
  study::poison(c.dy);
  cg::run(c.s, Activation::GeluTanhF16, c.operands(), nullptr, opt);
  CHECK(c.check().ok);
  CHECK(cg::choices().back().find("gelu_tanh_f16+cublaslt") != std::string::npos);
}

TEST_CASE("the search picks a kernel, records it on disk, and a new cache reads it back") {
  const auto& path = kCachePath;
  Case c({6304, 768, 768}, Activation::None, true);
  study::poison(c.dy);
  cg::run(c.s, Activation::None, c.operands(), nullptr);
  const auto r = c.check();
  INFO(r.summary());
  CHECK(r.ok);
  const auto lines = cg::choices();
  REQUIRE(!lines.empty());
  CHECK(lines.back().find("(searched)") != std::string::npos);
  // The file's last line is this choice (its key carries the candidates' fingerprint, which
  // the layer sets), and a new cache finds it under that key.
  std::ifstream file(path);
  std::string line, last;
  while (std::getline(file, line)) last = line;
  cg::Key key;
  cg::Choice chosen;
  REQUIRE(cg::CutlassCache::parse_line(last, key, chosen));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(key.gpu == std::string(prop.name) + "/" + std::to_string(prop.multiProcessorCount));
  CHECK((key.m == 6304 && key.n == 768 && key.k == 768 && key.act == Activation::None && key.residual));
  CHECK(key.candidates.size() == 8);
  const auto found = cg::CutlassCache(path.string()).find(key);
  REQUIRE(found.has_value());
  const auto names = cg::kernel_names(Activation::None, /*residual=*/true);
  CHECK(std::find(names.begin(), names.end(), found->kernel) != names.end());
  std::filesystem::remove(path);
}

namespace {

// The few-rows kernels' shapes: K a multiple of 64 x every slice count (1-8), N of both tile
// widths: a batch-1 tile and one row, rows one past a 256-row tile, and three images' rows over
// three tiles, the last partial.
const study::GemmShape kSmallMShapes[] = {{197, 384, 1536}, {1, 128, 3072}, {257, 256, 1536}, {591, 256, 3072}};

}  // namespace

// Every few-rows kernel (each tile width and slice count) with each epilogue it has, on fresh
// operands and a poisoned output: the slices' partial tiles added through the cluster, the rows
// past m neither read nor stored, the epilogue where the rows land. One subcase a shape, named
// "M x N x K": the sanitizer suite runs every kernel at the 257-row one only (-sc).
TEST_CASE("every few-rows split-K kernel computes its epilogue") {
  for (const auto& s : kSmallMShapes) {
    const std::string shape = std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k);
    SUBCASE(shape.c_str()) {
      for (Activation act : {Activation::None, Activation::GeluErf, Activation::GeluErfFit})
        for (bool residual : {false, true}) {
          if (residual && act != Activation::None) continue;
          const auto names = cg::small_m_kernel_names(act, residual);
          REQUIRE(names.size() == 12);
          for (const auto& name : names) check_named_kernel(name, s, act, residual, 0);
        }
    }
  }
  CHECK(cg::small_m_kernel_names(Activation::GeluTanh).empty());  // the tanh forms are the libraries'
}

// A shape a kernel cannot tile (n not a multiple of its width, k not of 64 x its slices) is
// refused by name, never run on part of the matrix.
TEST_CASE("a few-rows kernel refuses shapes it cannot tile") {
  Case narrow({197, 192, 1536}, Activation::None, false);  // 192 columns: no 128-wide tiles
  CHECK_THROWS_AS(cg::run_kernel({"small_m_128_s2", 0, 1}, narrow.s, Activation::None, narrow.operands(), nullptr),
                  study::StudyError);
  Case shallow({197, 256, 768}, Activation::None, false);  // K = 768: 12 k-blocks, not 8 slices of them
  CHECK_THROWS_AS(cg::run_kernel({"small_m_64_s8", 0, 1}, shallow.s, Activation::None, shallow.operands(), nullptr),
                  study::StudyError);
  study::poison(shallow.dy);
  cg::run_kernel({"small_m_64_s6", 0, 1}, shallow.s, Activation::None, shallow.operands(), nullptr);
  CHECK(shallow.check().ok);
}

// The search with the few-rows kernels among its candidates: at batch 1's shapes whichever wins
// computes the epilogue, searched and then from the plan (the choice is printed).
TEST_CASE("with the few-rows kernels candidates, the chosen kernel computes the epilogue") {
  study::Gemm gemm;
  cg::RunOptions opt;
  opt.cublaslt = &gemm;
  opt.small_m = true;
  for (const Searched& t : {Searched{{197, 2304, 768}, Activation::None, false},
                            Searched{{197, 768, 768}, Activation::None, true},
                            Searched{{197, 3072, 768}, Activation::GeluErfFit, false},
                            Searched{{197, 768, 3072}, Activation::None, true}})
    for (int call = 0; call < 2; ++call) MESSAGE(check_searched(t, call, opt));
}

TEST_CASE("refusals: misaligned operands, a residual after GELU, a search inside a capture") {
  Case c({197, 768, 768}, Activation::None, true);
  auto op = c.operands();
  op.x = op.x + 1;  // 2-byte aligned
  CHECK_THROWS_AS(cg::run(c.s, Activation::None, op, nullptr), study::StudyError);
  CHECK_THROWS_AS(cg::run(c.s, Activation::GeluTanh, c.operands(), nullptr), study::StudyError);
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // A shape never run in this process: its search would have to run inside the capture, which
  // ends and frees what it recorded when the refusal propagates.
  CHECK_THROWS_AS(study::capture_graph(stream, [&](cudaStream_t s) {
                    cg::run({197, 768, 776}, Activation::None, c.operands(), s);
                  }),
                  study::StudyError);
  cudaStreamCaptureStatus status;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  CHECK(status == cudaStreamCaptureStatusNone);
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("with cuBLASLt a candidate, whichever library wins computes the epilogue, under its own key") {
  study::Gemm gemm;
  cg::RunOptions opt;
  opt.cublaslt = &gemm;
  for (const Searched& t : {Searched{{197, 3072, 768}, Activation::GeluTanh, false},
                            Searched{{197, 768, 3072}, Activation::None, true},
                            Searched{{6304, 768, 3072}, Activation::None, true},
                            Searched{{3, 2304, 768}, Activation::None, false}})
    for (int call = 0; call < 2; ++call) {  // searched, then from the plan
      const std::string line = check_searched(t, call, opt);
      INFO(line);
      CHECK(line.find(std::to_string(t.s.m) + "x" + std::to_string(t.s.n)) == 0);
      CHECK(line.find("+cublaslt") != std::string::npos);
    }
  // The exact GELU (erf, or its fit) has no cuBLASLt epilogue: the CUTLASS kernels alone, under
  // the CUTLASS-only key.
  Case erf({197, 3072, 768}, Activation::GeluErf, false);
  for (Activation act : {Activation::GeluErf, Activation::GeluErfFit}) {
    erf.act = act;
    study::poison(erf.dy);
    cg::run(erf.s, act, erf.operands(), nullptr, opt);
    CHECK(erf.check().ok);
    INFO(cg::choices().back());
    CHECK(cg::choices().back().find(std::string(" ") + cg::activation_name(act) + ":") != std::string::npos);
    CHECK(cg::choices().back().find("cublaslt") == std::string::npos);
  }
  // A folded LayerNorm has no cuBLASLt candidate.
  CHECK_THROWS_AS(cg::run_ln_folded(erf.s, Activation::None, erf.operands(), {}, nullptr, opt), study::StudyError);
}

namespace {

// The FP8 kernels' shapes: a QKV-like GEMM at batch 1, a deep one over several row tiles and a
// partial one, one row, and widths (multiples of 16) of no tile.
const study::GemmShape kFp8Shapes[] = {{197, 768, 768}, {400, 256, 3072}, {1, 768, 768}, {200, 144, 80}};

struct Fp8Form {
  study::Epilogue e;
  bool residual, e4m3_out;
  const char* key;  // its activation field in the search's key
};
// QKV (bias, in fp16 or E4M3 for an E4M3 attention), projection and fc2 (bias + residual), fc1
// (bias + GELU, E4M3 output).
const Fp8Form kFp8Forms[] = {{study::Epilogue::Bias, false, false, "fp8_none"},
                             {study::Epilogue::Bias, false, true, "fp8_none_e4m3"},
                             {study::Epilogue::Bias, true, false, "fp8_none"},
                             {study::Epilogue::GeluBias, false, true, "fp8_gelu_tanh_e4m3"}};

fp8_test::GemmCase fp8_case(const study::GemmShape& s, const Fp8Form& f) {
  return {s, f.e, f.residual, f.e4m3_out, study::fp8::Scaling::Tensor};
}

}  // namespace

TEST_CASE("every compiled FP8 kernel computes its epilogue") {
  for (const Fp8Form& f : kFp8Forms) {
    const auto names = cg::fp8_kernel_names(f.e, f.residual, f.e4m3_out);
    REQUIRE(!names.empty());
    for (const auto& name : names)
      for (const auto& s : kFp8Shapes)
        for (int raster : {0, 1}) {
          CAPTURE(name);
          CAPTURE(raster);
          const fp8_test::Fp8Run run = [&](const study::GemmShape& sh, study::Epilogue e,
                                           const study::Fp8Operands& op) {
            cg::run_fp8_kernel({name, raster, 2}, sh, e, op, nullptr);
          };
          fp8_test::check_gemm(run, fp8_case(s, f));
        }
  }
}

TEST_CASE("the FP8 search, cuBLASLt's FP8 GEMM a candidate, runs the faster under an fp8 key") {
  study::Fp8Gemm lt;
  cg::Fp8RunOptions opt;
  opt.cublaslt = &lt;
  const fp8_test::Fp8Run run = [&](const study::GemmShape& sh, study::Epilogue e, const study::Fp8Operands& op) {
    cg::run_fp8(sh, e, op, nullptr, opt);
  };
  for (const Fp8Form& f : kFp8Forms)
    for (const study::GemmShape s : {study::GemmShape{197, 3072, 768}, study::GemmShape{6304, 768, 768}})
      for (int call = 0; call < 2; ++call) {  // searched, then from the plan
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(call);
        fp8_test::check_gemm(run, fp8_case(s, f));
        const std::string line = cg::choices().back();
        INFO(line);
        CHECK(line.find(std::to_string(s.m) + "x" + std::to_string(s.n)) == 0);
        CHECK(line.find(" " + std::string(f.key) + (f.residual ? "+cublaslt+residual" : "+cublaslt:")) !=
              std::string::npos);
      }
}

TEST_CASE("FP8: per-channel weights, an fp16 GELU output, widths off 16 and no bias are refused") {
  namespace f8 = study::fp8;
  using study::Epilogue;
  const fp8_test::SmallOperands small;
  const study::Fp8Operands op = small.op();
  const auto& y = small.y;
  const auto& s = small.s;
  study::DeviceBuffer<f8::e4m3> y8(64 * 64);
  const f8::Weight channel = f8::quantize_weight(small.w.get(), 64, 64, f8::Scaling::Channel, nullptr);
  CHECK_NOTHROW(cg::run_fp8({64, 64, 64}, Epilogue::Bias, op, nullptr));
  CHECK_THROWS_AS(cg::run_fp8({64, 56, 64}, Epilogue::Bias, op, nullptr), study::StudyError);   // n % 16
  CHECK_THROWS_AS(cg::run_fp8({64, 64, 40}, Epilogue::Bias, op, nullptr), study::StudyError);   // k % 16
  CHECK_THROWS_AS(cg::run_fp8({64, 64, 64}, Epilogue::GeluBias, op, nullptr), study::StudyError);  // fp16 GELU
  CHECK_THROWS_AS(cg::run_fp8({64, 64, 64}, Epilogue::None, op, nullptr), study::StudyError);
  study::Fp8Operands per_channel = op;
  per_channel.w = &channel;
  CHECK_THROWS_AS(cg::run_fp8({64, 64, 64}, Epilogue::Bias, per_channel, nullptr), study::StudyError);
  study::Fp8Operands no_bias = op;
  no_bias.bias = nullptr;
  CHECK_THROWS_AS(cg::run_fp8({64, 64, 64}, Epilogue::Bias, no_bias, nullptr), study::StudyError);
  study::Fp8Operands gelu_residual = op;
  gelu_residual.y = nullptr;
  gelu_residual.y8 = y8.get();
  gelu_residual.y_inv_scale = s.inv_scale();
  CHECK_NOTHROW(cg::run_fp8({64, 64, 64}, Epilogue::GeluBias, gelu_residual, nullptr));
  gelu_residual.residual = y.get();
  CHECK_THROWS_AS(cg::run_fp8({64, 64, 64}, Epilogue::GeluBias, gelu_residual, nullptr), study::StudyError);
  CHECK_THROWS_AS(cg::run_fp8_kernel({"no_such_kernel", 0, 1}, {64, 64, 64}, Epilogue::Bias, op, nullptr),
                  study::StudyError);
}

int main(int argc, char** argv) {
  return gpu_test_main(argc, argv, "cutlass_gemm", [] { return cg::unavailable(); });
}

TEST_CASE("the LayerNorm-folded kernels match LayerNorm then the Linear") {
  const int D = 768;
  for (const study::GemmShape s : {study::GemmShape{197, 3 * D, D}, study::GemmShape{3, 4 * D, D}})
    for (Activation act : {Activation::None, Activation::GeluTanh}) {
      const auto seed = study::fresh_seed();
      CAPTURE(seed);
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(cg::activation_name(act));
      // A residual stream with a large per-row offset, so that the folded form's subtraction of
      // mu * colsum is exercised where it cancels most.
      auto x = rounded_normal(size_t(s.m) * s.k, seed, 1.f);
      for (int r = 0; r < s.m; ++r)
        for (int k = 0; k < s.k; ++k) x[size_t(r) * s.k + k] += 4.f * ((r % 5) - 2);
      study::round_to_half(x);
      auto gamma = rounded_normal(s.k, seed + 1, 0.2f);
      for (auto& g : gamma) g += 1.f;
      study::round_to_half(gamma);
      const auto beta = rounded_normal(s.k, seed + 2, 0.2f);
      const auto w = rounded_normal(size_t(s.n) * s.k, seed + 3, 1.f / std::sqrt(float(s.k)));
      const auto b = rounded_normal(s.n, seed + 4, 0.5f);
      // Reference: LayerNorm (eps 1e-6) in double, then the Linear and the activation.
      std::vector<float> h(x.size());
      for (int r = 0; r < s.m; ++r) {
        double mu = 0, var = 0;
        for (int k = 0; k < s.k; ++k) mu += x[size_t(r) * s.k + k];
        mu /= s.k;
        for (int k = 0; k < s.k; ++k) var += (x[size_t(r) * s.k + k] - mu) * (x[size_t(r) * s.k + k] - mu);
        const double rstd = 1.0 / std::sqrt(var / s.k + 1e-6);
        for (int k = 0; k < s.k; ++k)
          h[size_t(r) * s.k + k] = static_cast<float>((x[size_t(r) * s.k + k] - mu) * rstd * gamma[k] + beta[k]);
      }
      std::vector<float> want;
      ref::linear(h, s.m, s.k, w, b, s.n, want);
      if (act != Activation::None)
        for (auto& v : want) v = static_cast<float>(gelu(v, act));

      auto dx = study::to_device(study::to_half(x)), dw = study::to_device(study::to_half(w));
      auto db = study::to_device(study::to_half(b)), dg = study::to_device(study::to_half(gamma));
      auto dbeta = study::to_device(study::to_half(beta));
      study::DeviceBuffer<__half> wf(size_t(s.n) * s.k), dy(size_t(s.m) * s.n);
      study::DeviceBuffer<float> col_sum(s.n), col_bias(s.n), mean(s.m), rstd(s.m);
      cg::fold_layernorm(dw.get(), db.get(), dg.get(), dbeta.get(), s.n, s.k, wf.get(), col_sum.get(), col_bias.get(),
                         nullptr);
      cg::row_stats(dx.get(), s.m, s.k, 1e-6f, mean.get(), rstd.get(), nullptr);
      const cg::LnFold ln{mean.get(), rstd.get(), col_sum.get(), col_bias.get()};
      study::GemmOperands op;
      op.x = dx.get();
      op.w = wf.get();
      op.y = dy.get();
      const auto names = cg::ln_kernel_names(act);
      REQUIRE(!names.empty());
      for (const auto& name : names) {
        CAPTURE(name);
        study::poison(dy);
        cg::run_kernel({name, 1, 2}, s, act, op, nullptr, &ln);
        CUDA_CHECK(cudaDeviceSynchronize());
        const auto got = study::to_float(study::to_host(dy));
        // fp16 rounding of y and of the folded weights (gamma multiplied in before rounding).
        const auto r = study::compare(got, want, {study::kFp16RelTol, 5e-3, 2 * study::kFp16Rtol});
        INFO(r.summary());
        CHECK(r.ok);
      }
    }
}
