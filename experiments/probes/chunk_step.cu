// What one step of a streamed GEMM mainloop costs at batch 1, the question e32_read_once's task
// clock left open (stages/encoder/e32_read_once/NOTES.md): its 64-row chunk steps took ~0.7-0.85
// us each with 8 stages in flight, e30's ~0.55 with 4, whatever their bytes. Every CTA runs
// `--steps` steps of the tile-scheduled kernel's loop shape: A chunks of `--rows` rows x 64
// columns (fp16, cp.async.cg through L2 into the swizzled tiles panel.cuh's copies write),
// `--stages` of them in flight, one CTA barrier a step, and with `--mma` the mma.sync products of
// every 64-row tile of the chunk against one resident 64 x 64 weight tile. `--source same` has
// every CTA read the same rows (as the 36 column tasks of a QKV stage do), `distinct` each its
// own (at the default 48 steps, 104-207 MB: more than the L2, so `distinct` streams from HBM
// while `same` reads L2). The buffer is read once before the timed calls. One CSV row, family `probes`,
// version `chunk_step`; the note gives the time a step takes and the bytes an SM reads a us.
// Checked first: the products' sum over every CTA equals the host's (a step skipped or a stage
// read before it landed changes it).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "encoder/panel.cuh"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"

namespace {

using namespace encoder::panel;

constexpr std::size_t kMaxSmem = 227 * 1024;  // a Hopper CTA's (opt-in)

// One CTA's steps: chunk s of its A is rows [0, kRows) x columns [64 s, 64 s + 64) of a row-major
// [kRows][64 steps] fp16 matrix. kStages chunks in flight (one commit group each).
template <int kRows, int kStages, bool kMma>
__global__ void __launch_bounds__(kThreads) steps_kernel(const __half* a, int steps, bool same, const __half* w,
                                                         float* sums) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __half* stages = reinterpret_cast<__half*>(smem_raw);
  __half* w_s = stages + kStages * kRows * kBK;
  const long long ld = static_cast<long long>(steps) * kBK;
  const __half* mine = a + (same ? 0 : blockIdx.x * static_cast<long long>(kRows) * ld);
  const RowSlab<kBM> wt(w, kBK, 0, kBM, 0);
  wt.copy(w_s, 0);
  auto request = [&](int s) {
#pragma unroll
    for (int t = 0; t < kRows / kBM; ++t)
      RowSlab<kBM>(mine, ld, t * kBM, kRows, 0).copy(stages + (s % kStages) * kRows * kBK + t * kTileHalves, s);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) request(s);
    cp_async_commit();
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = 16 * (warp & 3), wn = 32 * (warp >> 2);
  float acc[4][4] = {};
  for (int s = 0; s < steps; ++s) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // step s's chunk landed for every thread; step s - 1's stage is free
    if (s + kStages - 1 < steps) request(s + kStages - 1);
    cp_async_commit();
    if constexpr (kMma) {
#pragma unroll
      for (int t = 0; t < kRows / kBM; ++t)
        mma_chunk<32>(acc, stages + (s % kStages) * kRows * kBK + t * kTileHalves, w_s, wm, wn, lane);
    }
  }
  cp_async_wait<0>();
  float total = 0.f;
  for (auto& q : acc)
    for (float v : q) total += v;
  for (int m = 16; m > 0; m >>= 1) total += __shfl_xor_sync(0xffffffffu, total, m);
  if (lane == 0) atomicAdd(sums, total);
}

using Kernel = void (*)(const __half*, int, bool, const __half*, float*);

template <int kRows, int kStages>
Kernel pick(bool mma) {
  return mma ? steps_kernel<kRows, kStages, true> : steps_kernel<kRows, kStages, false>;
}

Kernel kernel_for(int rows, int stages, bool mma) {
  const int i = (rows == 256) * 5 + (stages == 2 ? 0 : stages == 3 ? 1 : stages == 4 ? 2 : stages == 6 ? 3 : 4);
  const Kernel table[] = {pick<64, 2>(mma),  pick<64, 3>(mma),  pick<64, 4>(mma),  pick<64, 6>(mma),  pick<64, 8>(mma),
                          pick<256, 2>(mma), pick<256, 3>(mma), pick<256, 4>(mma), pick<256, 6>(mma), pick<256, 8>(mma)};
  return table[i];
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("chunk_step", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int rows = 64, stages = 8, steps = 48, ctas = 0, ctas_per_sm = 2;
    std::string source = "same";
    bool mma = true;
    study::Cli cli("chunk_step",
                   "Times the steps of a streamed GEMM mainloop (A chunks through cp.async stages, one CTA barrier "
                   "a step, optional mma.sync): one CSV row.");
    cli.add_common(o);
    cli.add_int("--rows", &rows, "A rows a step: 64 or 256 (default 64)", 64);
    cli.add_int("--stages", &stages, "chunks in flight: 2, 3, 4, 6 or 8 (default 8)", 2);
    cli.add_int("--steps", &steps, "steps a CTA (default 48)", 1);
    cli.add_int("--ctas", &ctas, "CTAs (default: --ctas-per-sm x SMs)", 0);
    cli.add_int("--ctas-per-sm", &ctas_per_sm, "CTAs an SM when --ctas is not given (default 2)", 1);
    cli.add_string("--source", &source, "same (every CTA reads the same rows) or distinct (default same)");
    cli.add_flag("--no-mma", &mma, "copies and barriers only, no products", false);
    cli.parse(argc, argv);
    study::validate_common(o);
    if (rows != 64 && rows != 256) throw study::StudyError(study::ErrorKind::Usage, "--rows must be 64 or 256");
    if (stages != 2 && stages != 3 && stages != 4 && stages != 6 && stages != 8)
      throw study::StudyError(study::ErrorKind::Usage, "--stages must be 2, 3, 4, 6 or 8");
    if (source != "same" && source != "distinct")
      throw study::StudyError(study::ErrorKind::Usage, "--source must be same or distinct, got '" + source + "'");
    if (!study::open_probe(report, o, "chunk_step")) return 0;
    const int sms = study::sm_count(o.device);
    const bool same = source == "same";
    const std::size_t smem = sizeof(__half) * (static_cast<std::size_t>(stages) * rows * kBK + kTileHalves);
    if (smem > kMaxSmem)
      throw study::StudyError(study::ErrorKind::Usage, std::to_string(stages) + " stages of " + std::to_string(rows) +
                                                           " rows need " + std::to_string(smem) +
                                                           " bytes of shared memory, more than a CTA's " +
                                                           std::to_string(kMaxSmem));
    const Kernel k = kernel_for(rows, stages, mma);
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    // The default grid is every CTA resident at once: no CTA waits for another's SM.
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, smem));
    const int grid = ctas > 0 ? ctas : std::max(1, std::min(ctas_per_sm, per_sm)) * sms;
    const std::size_t per_cta = static_cast<std::size_t>(rows) * steps * kBK;
    // Small integers in [-2, 2] and a weight tile of ones: every product exact in fp32.
    std::vector<__half> ha(per_cta * (same ? 1 : grid)), hw(kTileHalves, __float2half(1.f));
    for (std::size_t i = 0; i < ha.size(); ++i) ha[i] = __float2half(static_cast<float>(static_cast<int>(i % 5) - 2));
    auto a = study::to_device(ha);
    auto w = study::to_device(hw);
    study::DeviceBuffer<float> sums(1);
    report.row.set("model", o.model).set("batch", o.batch).set("image_size", o.image_size);
    if (o.check && mma) {
      CUDA_CHECK(cudaMemset(sums.get(), 0, sizeof(float)));
      k<<<grid, kThreads, smem>>>(a.get(), steps, same, w.get(), sums.get());
      CUDA_CHECK(cudaDeviceSynchronize());
      // Each output element is a row's 64-column sum in its chunk; every CTA adds all of its
      // rows' chunks, 64 output columns each.
      double want = 0;
      for (int c = 0; c < (same ? 1 : grid); ++c)
        for (std::size_t i = 0; i < per_cta; ++i) want += __half2float(ha[c * per_cta + i]);
      want *= 64.0 * (same ? grid : 1);
      const float got = study::to_host(sums)[0];
      if (std::fabs(got - want) > 1e-3 * std::fabs(want) + 1.0) {
        report.write("failed", "products' sum " + std::to_string(got) + ", the host's " + std::to_string(want));
        return 1;
      }
    }
    study::measure(report, o, "chunk_step",
                   [&](cudaStream_t s) { k<<<grid, kThreads, smem, s>>>(a.get(), steps, same, w.get(), sums.get()); },
                   0, 0);
    const double median = std::stod(report.row.get("median_us"));
    const double bytes_per_sm = 2.0 * rows * kBK * steps * grid / sms;
    report.row.set("gbps", std::to_string(2.0 * rows * kBK * steps * grid / (median * 1e3))).set("tflops", "");
    report.write("ok", std::to_string(grid) + " CTAs on " + std::to_string(sms) + " SMs (" + std::to_string(per_sm) +
                           " fit an SM), " + std::to_string(rows) +
                           "-row chunks, " + std::to_string(stages) + " stages, " + source + " rows, " +
                           (mma ? "mma.sync" : "no products") + "; a step " + std::to_string(median / steps) +
                           " us; " + std::to_string(bytes_per_sm / (median * 1e3)) + " GB/s an SM" +
                           (o.check && mma ? "; products' sum checked" : ""));
    return 0;
  });
}
