// How fast the SMs together read data that sits in L2: the denominator of a tile-scheduled
// forward's traffic between L2 and the SMs (stages/encoder/NOTES.md: at batch 1 the 64 x 64 tiles
// re-read each weight tile once per row tile and each activation row once per column tile, ~1.2
// GB a forward against 170 MB of weights). Every CTA reads its share of a buffer `--passes` times
// with 16-byte loads that bypass L1 (ld.global.cg), kUnroll of them in flight a thread, and adds
// up the words it read. A buffer that fits in L2 is resident after the warm-up calls, so a call's
// bytes over its time is the L2-to-SM read rate; a buffer far larger than L2 gives the DRAM read
// rate for comparison. One CSV row, family `probes`, version `l2_read`; `gbps` is the rate.
// Checked first: the sum of the words every thread read equals the buffer's sum times the passes
// (a load skipped or read twice changes it).
#include <cstdint>
#include <string>
#include <vector>
#include "harness/bench.hpp"
#include "harness/gpu.hpp"

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 8;                 // loads in flight a thread
constexpr unsigned kPattern = 2654435761u;  // word i holds i * kPattern

__global__ void fill(unsigned* words, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    words[i] = static_cast<unsigned>(i) * kPattern;
}

__global__ void __launch_bounds__(kThreads) read_all(const uint4* __restrict__ buf, long long chunks, int passes,
                                                     unsigned* sum) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  unsigned acc = 0;
  for (int p = 0; p < passes; ++p)
    for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < chunks; i += stride * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        v[u] = i + u * stride < chunks ? __ldcg(buf + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, acc);
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("l2_read", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int mib = 24, passes = 20, ctas_per_sm = 4;
    study::Cli cli("l2_read",
                   "Measures the rate at which all SMs read a buffer resident in L2 (or, larger than L2, in "
                   "DRAM): one CSV row.");
    cli.add_common(o);
    cli.add_int("--mib", &mib, "buffer size in MiB (default 24: inside an H100's or H200's L2)");
    cli.add_int("--passes", &passes, "reads of the whole buffer per call (default 20)");
    cli.add_int("--ctas-per-sm", &ctas_per_sm, "CTAs of 256 threads per SM (default 4)");
    cli.parse(argc, argv);
    study::validate_common(o);
    if (mib > 4096) throw study::StudyError(study::ErrorKind::Usage, "--mib must be <= 4096, got " + std::to_string(mib));
    if (ctas_per_sm > 8)
      throw study::StudyError(study::ErrorKind::Usage, "--ctas-per-sm must be <= 8, got " + std::to_string(ctas_per_sm));
    if (o.flush_l2)
      throw study::StudyError(study::ErrorKind::Usage, "--flush-l2: l2_read times a buffer left in L2 on purpose");
    if (!study::open_probe(report, o, "l2_read")) return 0;
    const long long words = static_cast<long long>(mib) * 1024 * 1024 / 4, chunks = words / 4;
    study::DeviceBuffer<unsigned> buf(static_cast<std::size_t>(words)), sum(1);
    fill<<<1024, 256>>>(buf.get(), words);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    const int ctas = study::sm_count(o.device) * ctas_per_sm;
    const uint4* b = reinterpret_cast<const uint4*>(buf.get());
    unsigned* s = sum.get();
    const auto run = [&](cudaStream_t st) { read_all<<<ctas, kThreads, 0, st>>>(b, chunks, passes, s); };
    if (o.check) {
      CUDA_CHECK(cudaMemset(s, 0, sizeof(unsigned)));
      run(nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      // sum of i * kPattern over i < words, times the passes, mod 2^32
      const std::uint64_t n = static_cast<std::uint64_t>(words);
      const unsigned expect = static_cast<unsigned>(n * (n - 1) / 2) * kPattern * static_cast<unsigned>(passes);
      const unsigned got = study::to_host(sum)[0];
      if (got != expect) {
        report.write("failed", "the words read add up to " + std::to_string(got) + ", not " + std::to_string(expect));
        return 1;
      }
    }
    study::measure(report, o, "l2_read", run, static_cast<double>(passes) * words * 4, 0);
    report.row.set("tflops", "");
    report.write("ok", std::to_string(mib) + " MiB buffer, " + std::to_string(passes) + " passes a call, " +
                           std::to_string(ctas) + " CTAs of " + std::to_string(kThreads) + " threads, " +
                           std::to_string(kUnroll) + " 16-byte loads in flight a thread" +
                           (o.check ? "; the words' sum checked after one call" : ""));
    return 0;
  });
}
