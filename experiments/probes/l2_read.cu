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
// `--sms N` asks what N SMs alone can read: the CTAs that land on SMs N and above leave at once,
// and the others take the buffer's 32 KB blocks from a shared ticket, so the whole buffer is read
// by CTAs on N SMs (the row's note counts the SMs that read). One SM's rate against the whole
// GPU's says whether a tile-scheduled task is bound by its own SM's path from L2 or by L2.
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

// The sum of the words of kUnroll 16-byte chunks `step` apart from `first` (those before `chunks`),
// every load in flight before the first add.
__device__ __forceinline__ unsigned read_spaced(const uint4* __restrict__ buf, long long first, long long step,
                                                long long chunks) {
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    v[u] = first + u * step < chunks ? __ldcg(buf + first + u * step) : make_uint4(0, 0, 0, 0);
  unsigned acc = 0;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  return acc;
}

__global__ void __launch_bounds__(kThreads) read_all(const uint4* __restrict__ buf, long long chunks, int passes,
                                                     unsigned* sum) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  unsigned acc = 0;
  for (int p = 0; p < passes; ++p)
    for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < chunks; i += stride * kUnroll)
      acc += read_spaced(buf, i, stride, chunks);
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, acc);
}

// `--sms`: CTAs on SMs below `sms` read 32 KB blocks (kUnroll loads of each thread) in ticket
// order, thread 0 taking the next block's ticket while the CTA's loads of this one are in flight;
// each reading CTA adds one to its SM's count in `used`.
__global__ void __launch_bounds__(kThreads) read_on_sms(const uint4* __restrict__ buf, long long chunks, int passes,
                                                        unsigned sms, unsigned long long* ticket, unsigned* used,
                                                        unsigned* sum) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (sm >= sms) return;
  constexpr long long kBlock = static_cast<long long>(kThreads) * kUnroll;  // 16-byte chunks a ticket
  const long long blocks = (chunks + kBlock - 1) / kBlock;
  const unsigned long long total = static_cast<unsigned long long>(blocks) * passes;
  __shared__ unsigned long long slot[2];  // this block's ticket and the next one's, in turn
  if (threadIdx.x == 0) {
    atomicAdd(used + sm, 1u);
    slot[0] = atomicAdd(ticket, 1ull);
  }
  __syncthreads();
  unsigned acc = 0;
  for (int cur = 0;; cur ^= 1) {
    const unsigned long long t = slot[cur];
    if (t >= total) break;
    unsigned long long following = 0;
    if (threadIdx.x == 0) following = atomicAdd(ticket, 1ull);
    acc += read_spaced(buf, static_cast<long long>(t % blocks) * kBlock + threadIdx.x, kThreads, chunks);
    // The other slot was last read before the previous barrier.
    if (threadIdx.x == 0) slot[cur ^ 1] = following;
    __syncthreads();
  }
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, acc);
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("l2_read", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int mib = 24, passes = 20, ctas_per_sm = 4, sms = 0;
    study::Cli cli("l2_read",
                   "Measures the rate at which all SMs read a buffer resident in L2 (or, larger than L2, in "
                   "DRAM): one CSV row.");
    cli.add_common(o);
    cli.add_int("--mib", &mib, "buffer size in MiB (default 24: inside an H100's or H200's L2)");
    cli.add_int("--passes", &passes, "reads of the whole buffer per call (default 20)");
    cli.add_int("--ctas-per-sm", &ctas_per_sm, "CTAs of 256 threads per SM (default 4)");
    cli.add_int("--sms", &sms, "only the CTAs on SMs 0..N-1 read, the buffer shared by ticket (default 0: every SM, "
                               "each CTA its own stride)",
                0);
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
    const int sm_count = study::sm_count(o.device), ctas = sm_count * ctas_per_sm;
    if (sms > sm_count)
      throw study::StudyError(study::ErrorKind::Usage,
                              "--sms " + std::to_string(sms) + ": the GPU has " + std::to_string(sm_count) + " SMs");
    const uint4* b = reinterpret_cast<const uint4*>(buf.get());
    unsigned* s = sum.get();
    study::DeviceBuffer<unsigned long long> ticket(1);
    study::DeviceBuffer<unsigned> used(static_cast<std::size_t>(sm_count));
    const auto run = [&](cudaStream_t st) {
      if (sms == 0) {
        read_all<<<ctas, kThreads, 0, st>>>(b, chunks, passes, s);
        return;
      }
      CUDA_CHECK(cudaMemsetAsync(ticket.get(), 0, sizeof(unsigned long long), st));
      CUDA_CHECK(cudaMemsetAsync(used.get(), 0, used.bytes(), st));
      read_on_sms<<<ctas, kThreads, 0, st>>>(b, chunks, passes, static_cast<unsigned>(sms), ticket.get(), used.get(),
                                             s);
    };
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
    std::string on = std::to_string(ctas) + " CTAs of " + std::to_string(kThreads) + " threads";
    if (sms > 0) {
      int read = 0, readers = 0;  // in the last call
      for (unsigned u : study::to_host(used)) {
        read += u != 0;
        readers += static_cast<int>(u);
      }
      on += " launched, the " + std::to_string(readers) + " on SMs below " + std::to_string(sms) + " (" +
            std::to_string(read) + " SMs) reading by 32 KB tickets";
    }
    report.write("ok", std::to_string(mib) + " MiB buffer, " + std::to_string(passes) + " passes a call, " + on + ", " +
                           std::to_string(kUnroll) + " 16-byte loads in flight a thread" +
                           (o.check ? "; the words' sum checked after one call" : ""));
    return 0;
  });
}
