// This GPU's ceilings, measured with the study's own harness so every roofline and "% of
// peak" in the report divides by numbers from the same run: device-to-device copy bandwidth
// (bytes read + written), the fp16 tensor-core GEMM rate through the GEMM layer (n^3, no
// epilogue) and the FP8 (E4M3) tensor-core GEMM rate through cuBLASLt (fp16 output, fp32
// accumulation with Hopper's fast FP8 accumulation, unit scales). Three CSV rows, family
// `ceilings`, versions `copy` (gbps), `gemm_fp16` and `gemm_fp8` (tflops).
#include <algorithm>
#include <cmath>
#include <cublasLt.h>
#include <cuda_fp8.h>
#include "gemm/fp8.hpp"
#include "gemm/gemm.hpp"
#include "harness/bench.hpp"
#include "harness/compare.hpp"
#include "harness/gpu.hpp"
#include "harness/memory.hpp"
#include "harness/random.hpp"

namespace {

// The columns that describe a ViT shape do not apply to a ceiling.
study::Row ceiling_row(const study::CommonOptions& o, const char* version) {
  study::Row r = study::base_row(o, "ceilings", version);
  r.set("model", "").set("batch", "").set("image_size", "").set("host_syncs", 0);
  return r;
}

void measure_copy(study::BenchReport& report, const study::CommonOptions& o, int mib) {
  const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  study::DeviceBuffer<char> src(bytes), dst(bytes);
  CUDA_CHECK(cudaMemset(src.get(), 0x5A, bytes));
  const auto run = [&](cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
  };
  study::measure(report, o, "ceilings_copy", run, 2.0 * bytes, 0);  // a copy-engine op: 0 kernels
  report.row.set("tflops", "");  // a copy does no arithmetic
  report.write("ok", "cudaMemcpyAsync device to device, " + std::to_string(mib) +
                         " MiB; gbps counts bytes read + written");
}

// Sixteen outputs of y = x w^T (n x n, row-major, any element type convertible to float)
// against double sums on the host; rows and columns spread by two primes, so the samples hit
// different tiles. A ceiling from a GEMM that computes garbage would be worthless.
template <class T>
study::Comparison sampled_check(const std::vector<T>& x, const std::vector<T>& w, const std::vector<float>& y, int n,
                                const study::Tolerance& tol) {
  std::vector<float> got, want;
  for (int i = 0; i < 16; ++i) {
    const std::size_t r = (i * 7919ull) % n, c = (i * 104729ull) % n;
    double acc = 0;
    for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k)
      acc += static_cast<double>(static_cast<float>(x[r * n + k])) * static_cast<float>(w[c * n + k]);
    got.push_back(y[r * n + c]);
    want.push_back(static_cast<float>(acc));
  }
  return study::compare(got, want, tol);
}

void measure_gemm(study::BenchReport& report, const study::CommonOptions& o, int n, int workspace_mib) {
  const std::size_t count = static_cast<std::size_t>(n) * n;
  // Random inputs: tensor cores draw less power on zeros, which would flatter the ceiling.
  const auto x = study::to_half(study::random_uniform(count, o.seed, -1.f, 1.f));
  const auto w = study::to_half(study::random_uniform(count, o.seed + 1, -1.f, 1.f));
  auto dx = study::to_device(x), dw = study::to_device(w);
  study::DeviceBuffer<__half> dy(count);
  study::GemmConfig gc;
  gc.workspace_bytes = static_cast<std::size_t>(workspace_mib) << 20;
  study::Gemm gemm(gc);
  const study::GemmShape shape{n, n, n};
  const auto run = [&](cudaStream_t s) {
    gemm.run(shape, study::Epilogue::None, {dx.get(), dw.get(), dy.get()}, s);
  };
  std::string check_note = "not checked (--no-check)";
  if (o.check) {
    // A ceiling from a GEMM that computes garbage would be worthless: compare a few outputs.
    study::poison(dy);
    run(nullptr);
    // y is a sum of 8192 products of U(-1, 1) values, |y| up to ~100: rounding to fp16 errs by
    // up to 2^-11 |y| (rtol 2e-3 is twice that), the fp32 sums by ~1e-4 near y = 0.
    const auto cmp = sampled_check(x, w, study::to_float(study::to_host(dy)), n, {study::kFp16RelTol, 1e-2, 2e-3});
    report.row.set("max_abs_err", cmp.max_abs).set("rel_l2_err", cmp.rel_l2);
    if (!cmp.ok) {
      report.write("failed", "GEMM output check failed: " + cmp.summary());
      return;
    }
    check_note = "16 sampled outputs checked";
  }
  study::measure(report, o, "ceilings_gemm", run, 3.0 * count * sizeof(__half), 2.0 * n * count);
  report.row.set("gbps", "");  // the GEMM row carries the compute ceiling only
  report.write("ok", "cuBLASLt fp16 in/out, fp32 accumulate, M=N=K=" + std::to_string(n) +
                         ", heuristic algorithm, workspace " + std::to_string(workspace_mib) +
                         " MiB; " + check_note);
}

void measure_gemm_fp8(study::BenchReport& report, const study::CommonOptions& o, int n, int workspace_mib) {
  const std::size_t count = static_cast<std::size_t>(n) * n;
  // Random U(-1, 1) inputs rounded to E4M3 (zeros would flatter the ceiling, as for fp16).
  std::vector<__nv_fp8_e4m3> x(count), w(count);
  {
    const auto xf = study::random_uniform(count, o.seed + 2, -1.f, 1.f);
    for (std::size_t i = 0; i < count; ++i) x[i] = __nv_fp8_e4m3(xf[i]);
    const auto wf = study::random_uniform(count, o.seed + 3, -1.f, 1.f);
    for (std::size_t i = 0; i < count; ++i) w[i] = __nv_fp8_e4m3(wf[i]);
  }
  namespace f8 = study::fp8;
  auto dx = study::to_device(x);
  // Unit scales: the inputs are E4M3 values already (an amax of 448 over a margin of 1 is 1).
  f8::Weight dw{study::to_device(w), study::DeviceBuffer<float>(1), f8::Scaling::Tensor};
  const f8::ActivationScale unit(f8::kE4M3Max, 1.f);
  CUDA_CHECK(cudaMemcpy(dw.scale.get(), unit.scale(), sizeof(float), cudaMemcpyDeviceToDevice));
  study::DeviceBuffer<__half> dy(count);
  study::Fp8Gemm gemm(static_cast<std::size_t>(workspace_mib) << 20, /*candidates=*/1);  // the heuristic's first
  study::Fp8Operands op;
  op.x = dx.get();
  op.x_scale = unit.scale();
  op.w = &dw;
  op.y = dy.get();
  const auto run = [&](cudaStream_t s) { gemm.run({n, n, n}, study::Epilogue::None, op, s); };
  std::string check_note = "not checked (--no-check)";
  if (o.check) {
    study::poison(dy);
    run(nullptr);
    // Products of E4M3 values are exact in fp32; fast accumulation promotes partial sums to fp32
    // less often (a few 1e-3 of |y| at worst); the fp16 output rounds by 2^-11 |y|.
    const auto cmp = sampled_check(x, w, study::to_float(study::to_host(dy)), n, {2e-2, 5e-2, 1e-2});
    report.row.set("max_abs_err", cmp.max_abs).set("rel_l2_err", cmp.rel_l2);
    if (!cmp.ok) {
      report.write("failed", "FP8 GEMM output check failed: " + cmp.summary());
      return;
    }
    check_note = "16 sampled outputs checked";
  }
  study::measure(report, o, "ceilings_gemm_fp8", run, 2.0 * count + count * sizeof(__half), 2.0 * n * count);
  report.row.set("gbps", "");
  report.write("ok", "cuBLASLt E4M3 in, fp16 out, fp32 accumulate (fast accumulation), unit scales, M=N=K=" +
                         std::to_string(n) + ", heuristic algorithm, workspace " + std::to_string(workspace_mib) +
                         " MiB; " + check_note);
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("ceilings", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int copy_mib = 1024, gemm_n = 8192, workspace_mib = 4;
    study::Cli cli("ceilings", "Measures this GPU's copy bandwidth and fp16 and FP8 GEMM rates: three CSV rows.");
    cli.add_common(o);
    cli.add_int("--copy-mib", &copy_mib, "bytes copied per repeat, in MiB (default 1024)");
    cli.add_int("--gemm-size", &gemm_n, "M = N = K of the GEMMs (default 8192)");
    cli.add_int("--workspace-mib", &workspace_mib, "cuBLASLt workspace in MiB (default 4)", 0);
    cli.parse(argc, argv);
    study::validate_common(o);
    // Host copies of the GEMM inputs are generated in fp32: 32768^2 is already 4 GiB each.
    if (gemm_n > 32768)
      throw study::StudyError(study::ErrorKind::Usage,
                              "--gemm-size must be <= 32768, got " + std::to_string(gemm_n));
    if (copy_mib > 65536)
      throw study::StudyError(study::ErrorKind::Usage,
                              "--copy-mib must be <= 65536, got " + std::to_string(copy_mib));
    if (workspace_mib > 4096)
      throw study::StudyError(study::ErrorKind::Usage,
                              "--workspace-mib must be <= 4096, got " + std::to_string(workspace_mib));

    report.open(o);
    report.row = ceiling_row(o, "copy");
    study::require_gpu(o.device);
    // The ceilings are measured on one stream; a row must not claim streams it did not use.
    if (study::refuse_streams(report, o, "ceilings")) {
      report.row = ceiling_row(o, "gemm_fp16");
      report.write("skipped", "the ceilings bench runs on one stream (--streams 1 only)");
      return 0;
    }
    {
      // Both measurements, one after the other: the larger device need, the GEMM's host need
      // (fp16 x and w, an fp32 input being generated or y checked beside them).
      const double copy = 2.0 * (static_cast<double>(copy_mib) * (1 << 20));
      const double count = static_cast<double>(gemm_n) * gemm_n;
      study::MemoryNeed need;
      need.device = std::max(copy, 3 * count * sizeof(__half) + static_cast<double>(workspace_mib) * (1 << 20));
      need.host = 2 * count * sizeof(__half) + count * (sizeof(float) + sizeof(__half));
      try {
        study::require_memory(need, "ceilings with --copy-mib " + std::to_string(copy_mib) + " --gemm-size " +
                                        std::to_string(gemm_n));
      } catch (const study::StudyError& e) {
        report.write("skipped", e.what());
        report.row = ceiling_row(o, "gemm_fp16");  // bench_main writes its row and exits 3
        report.written = false;
        throw;
      }
    }
    measure_copy(report, o, copy_mib);
    // A failure from here on is the GEMM row's, not the copy's.
    report.row = ceiling_row(o, "gemm_fp16");
    report.written = false;
    measure_gemm(report, o, gemm_n, workspace_mib);
    const bool fp16_ok = report.row.get("status") == "ok";
    report.row = ceiling_row(o, "gemm_fp8");
    report.written = false;
    measure_gemm_fp8(report, o, gemm_n, workspace_mib);
    return fp16_ok && report.row.get("status") == "ok" ? 0 : 1;
  });
}
