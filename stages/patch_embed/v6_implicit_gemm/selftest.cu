// Standalone correctness and timing check of v6_implicit_gemm, independent of the family's
// harness. Build and run from the repository root:
//
//   nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -I common -I stages stages/patch_embed/v6_implicit_gemm/selftest.cu stages/patch_embed/v6_implicit_gemm/kernel.cu common/check.cpp -lcublasLt -o /tmp/v6_selftest && /tmp/v6_selftest
//
// Per shape (batch {1, 3} x image {16, 32, 224, 384} x hidden {192, 768, 1024}): random fp16
// inputs from fixed seeds, the output poisoned with NaN, one launch, and a comparison of every
// output element (cls rows and position embedding included) with a CPU double-precision loop
// over the same fp16 values. PASS: relative L2 error <= 5e-3 and no NaN. Then the refusals
// (image 100, hidden 200, a misaligned pointer) and the kernel time at batch 1, 32 and 256,
// 224 px, hidden 768 (CUDA events, median of 20 calls after 3 warm-up calls).
// Exit status 0 only when every check passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <string>
#include <vector>
#include "check.hpp"
#include "patch_embed/v6_implicit_gemm/implicit_gemm.hpp"

namespace {

constexpr int kP = 16, kC = 3, kK = kC * kP * kP;

std::vector<__half> random_halves(std::size_t n, float scale, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<__half> v(n);
  for (auto& x : v) x = __float2half(dist(gen));
  return v;
}

std::vector<float> to_float(const std::vector<__half>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = __half2float(v[i]);
  return f;
}

struct Device {
  __half *images = nullptr, *w = nullptr, *b = nullptr, *cls = nullptr, *pos = nullptr, *out = nullptr;
  ~Device() {
    for (__half* p : {images, w, b, cls, pos, out}) cudaFree(p);
  }
};

__half* upload(const std::vector<__half>& v) {
  __half* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(__half)));
  CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(__half), cudaMemcpyHostToDevice));
  return d;
}

struct Inputs {
  std::vector<__half> images, w, b, cls, pos;
};

Inputs make_inputs(int batch, int image, int hidden, unsigned seed) {
  const int side = image / kP, tokens = side * side + 1;
  Inputs in;
  in.images = random_halves(static_cast<std::size_t>(batch) * kC * image * image, 1.f, seed);
  in.w = random_halves(static_cast<std::size_t>(hidden) * kK, 1.f / std::sqrt(static_cast<float>(kK)), seed + 1);
  in.b = random_halves(hidden, 0.5f, seed + 2);
  in.cls = random_halves(hidden, 0.5f, seed + 3);
  in.pos = random_halves(static_cast<std::size_t>(tokens) * hidden, 0.5f, seed + 4);
  return in;
}

void upload_all(Device& d, const Inputs& in, std::size_t out_elems) {
  d.images = upload(in.images);
  d.w = upload(in.w);
  d.b = upload(in.b);
  d.cls = upload(in.cls);
  d.pos = upload(in.pos);
  CUDA_CHECK(cudaMalloc(&d.out, out_elems * sizeof(__half)));
  CUDA_CHECK(cudaMemset(d.out, 0xFF, out_elems * sizeof(__half)));  // fp16 0xFFFF is a NaN
}

// The reference's function: out row b * tokens is cls + pos[0]; row b * tokens + 1 + p is
// bias + pos[1 + p] + the 768-long dot product of patch p with the weight row.
std::vector<double> cpu_patch_embed(const Inputs& in, int batch, int image, int hidden) {
  const int side = image / kP, patches = side * side, tokens = patches + 1;
  const std::vector<float> img = to_float(in.images), w = to_float(in.w), b = to_float(in.b),
                           cls = to_float(in.cls), pos = to_float(in.pos);
  std::vector<double> out(static_cast<std::size_t>(batch) * tokens * hidden);
  std::vector<double> a(kK);
  for (int bi = 0; bi < batch; ++bi) {
    double* ob = out.data() + static_cast<std::size_t>(bi) * tokens * hidden;
    for (int n = 0; n < hidden; ++n) ob[n] = static_cast<double>(cls[n]) + pos[n];
    for (int p = 0; p < patches; ++p) {
      const int py = p / side, px = p % side;
      for (int c = 0; c < kC; ++c)
        for (int ky = 0; ky < kP; ++ky)
          for (int kx = 0; kx < kP; ++kx)
            a[(c * kP + ky) * kP + kx] =
                img[((static_cast<std::size_t>(bi) * kC + c) * image + py * kP + ky) * image + px * kP + kx];
      for (int n = 0; n < hidden; ++n) {
        const float* wn = w.data() + static_cast<std::size_t>(n) * kK;
        double acc = 0;
        for (int k = 0; k < kK; ++k) acc += a[k] * wn[k];
        ob[static_cast<std::size_t>(1 + p) * hidden + n] =
            acc + b[n] + pos[static_cast<std::size_t>(1 + p) * hidden + n];
      }
    }
  }
  return out;
}

bool check_shape(int batch, int image, int hidden, unsigned seed) {
  const int side = image / kP, tokens = side * side + 1;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * tokens * hidden;
  const Inputs in = make_inputs(batch, image, hidden, seed);
  Device d;
  upload_all(d, in, out_elems);
  patch_embed::implicit_gemm_launch(d.images, d.w, d.b, d.cls, d.pos, d.out, batch, image, hidden, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<__half> got(out_elems);
  CUDA_CHECK(cudaMemcpy(got.data(), d.out, out_elems * sizeof(__half), cudaMemcpyDeviceToHost));
  const std::vector<double> want = cpu_patch_embed(in, batch, image, hidden);

  double max_abs = 0, err2 = 0, ref2 = 0;
  std::size_t nans = 0, first_nan = out_elems;
  for (std::size_t i = 0; i < out_elems; ++i) {
    const double g = __half2float(got[i]);
    if (std::isnan(g)) {
      if (!nans++) first_nan = i;
      continue;
    }
    const double e = g - want[i];
    max_abs = std::max(max_abs, std::fabs(e));
    err2 += e * e;
    ref2 += want[i] * want[i];
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
  const bool pass = nans == 0 && rel <= 5e-3;
  std::printf("batch %d image %3d hidden %4d: max abs %.3e  rel L2 %.3e  NaN %zu  %s\n", batch, image, hidden,
              max_abs, rel, nans, pass ? "PASS" : "FAIL");
  if (nans)
    std::printf("  first NaN at out row %zu (token %zu of image %zu), column %zu\n", first_nan / hidden,
                first_nan / hidden % tokens, first_nan / hidden / tokens, first_nan % hidden);
  return pass;
}

bool check_refusals() {
  bool ok = true;
  auto expect = [&](bool cond, const char* what) {
    std::printf("refusal: %-48s %s\n", what, cond ? "PASS" : "FAIL");
    ok &= cond;
  };
  expect(!patch_embed::implicit_gemm_supports(1, 100, 768).empty(), "image 100 refused");
  expect(patch_embed::implicit_gemm_supports(1, 100, 768).find("100") != std::string::npos, "... naming 100");
  expect(!patch_embed::implicit_gemm_supports(1, 224, 200).empty(), "hidden 200 refused");
  expect(patch_embed::implicit_gemm_supports(1, 224, 200).find("200") != std::string::npos, "... naming 200");
  expect(patch_embed::implicit_gemm_supports(2, 208, 384).empty(), "batch 2 image 208 hidden 384 accepted");

  const Inputs in = make_inputs(1, 32, 192, 7);
  Device d;
  upload_all(d, in, static_cast<std::size_t>(5) * 192 + 8);
  bool threw = false;
  try {
    patch_embed::implicit_gemm_launch(d.images, d.w, d.b, d.cls, d.pos, d.out + 1, 1, 32, 192, nullptr);
  } catch (const study::StudyError& e) {
    threw = e.kind == study::ErrorKind::Usage;
  }
  expect(threw, "misaligned out pointer throws (Usage)");
  threw = false;
  try {
    patch_embed::implicit_gemm_launch(d.images, d.w, d.b, d.cls, d.pos, d.out, 1, 100, 192, nullptr);
  } catch (const study::StudyError& e) {
    threw = e.kind == study::ErrorKind::Usage;
  }
  expect(threw, "launch at image 100 throws (Usage)");
  CUDA_CHECK(cudaDeviceSynchronize());
  return ok;
}

void time_shape(int batch, int image, int hidden) {
  const int side = image / kP, patches = side * side, tokens = patches + 1;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * tokens * hidden;
  const Inputs in = make_inputs(batch, image, hidden, 11);
  Device d;
  upload_all(d, in, out_elems);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  auto call = [&] {
    patch_embed::implicit_gemm_launch(d.images, d.w, d.b, d.cls, d.pos, d.out, batch, image, hidden, nullptr);
  };
  for (int i = 0; i < 3; ++i) call();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CUDA_CHECK(cudaEventRecord(start));
    call();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = 0.5 * (ms[9] + ms[10]) * 1e3;
  const double flop = 2.0 * batch * patches * static_cast<double>(hidden) * kK;
  const double bytes = 2.0 * (in.images.size() + in.w.size() + in.pos.size() + out_elems);
  std::printf("time batch %d image %d hidden %d: median %.1f us (min %.1f, max %.1f), %.0f TFLOP/s, %.0f GB/s "
              "(compulsory bytes)\n",
              batch, image, hidden, us, ms.front() * 1e3, ms.back() * 1e3, flop / us * 1e-6, bytes / us * 1e-3);
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
}

}  // namespace

int main() {
  try {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    int failed = 0, passed = 0;
    unsigned seed = 1;
    for (int batch : {1, 3})
      for (int image : {16, 32, 224, 384})
        for (int hidden : {192, 768, 1024}) (check_shape(batch, image, hidden, seed += 10) ? passed : failed)++;
    (check_refusals() ? passed : failed)++;

    time_shape(1, 224, 768);
    time_shape(32, 224, 768);
    time_shape(256, 224, 768);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 2;
  }
}
