// What a dependency between two tasks on different SMs costs without a kernel boundary: the
// tile-scheduled forward's one assumption that no existing row measures (stages/encoder/NOTES.md,
// "The tile-scheduled forward", assumes ~1 us). A ring of resident CTAs, one per SM: on each turn
// one CTA waits (thread 0 polling a counter with acquire loads) until the counter names its turn,
// reads the tile the previous CTA wrote, writes it back with every 32-bit word plus one, and
// releases the counter to the next CTA. The turns form one dependent chain, so a call's time over
// its turns is the latency of one hand-off, the tile's read and write included (64 x 64 fp16 is
// 8 KiB). One CSV row, family `probes`, version `flag_handoff`; the note gives the hand-off.
// Checked first: after one call every word of the tile equals the number of turns (a hand-off
// that let a CTA read before the previous one's stores were visible loses increments).
#include <cuda/atomic>
#include <string>
#include <vector>
#include "harness/bench.hpp"
#include "harness/gpu.hpp"
#include "harness/launches.hpp"

namespace {

constexpr int kThreads = 128;
// More than half of an SM's shared memory, unused: no SM can hold two CTAs of the ring, so every
// hand-off crosses SMs, as between two tasks of the tile-scheduled forward.
constexpr int kOneCtaPerSm = 120 * 1024;

__global__ void __launch_bounds__(kThreads) ring(unsigned* counter, unsigned* tile, int words, int rounds) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_device> turn_now(*counter);
  const unsigned ctas = gridDim.x;
  for (int r = 0; r < rounds; ++r) {
    const unsigned turn = r * ctas + blockIdx.x;
    if (threadIdx.x == 0)
      while (turn_now.load(cuda::memory_order_acquire) != turn) {
      }
    __syncthreads();
    for (int i = threadIdx.x; i < words; i += kThreads) tile[i] += 1u;
    __syncthreads();
    if (threadIdx.x == 0) {
      // The last turn leaves the counter at 0 for the next call: every other CTA is past its
      // last wait by then.
      const bool last = turn + 1 == ctas * static_cast<unsigned>(rounds);
      turn_now.store(last ? 0u : turn + 1, cuda::memory_order_release);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("flag_handoff", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int ctas = 0, rounds = 50, tile_kib = 8;
    study::Cli cli("flag_handoff",
                   "Measures one hand-off between CTAs on different SMs (a counter released and acquired, a tile "
                   "read and written): one CSV row.");
    cli.add_common(o);
    cli.add_int("--ctas", &ctas, "CTAs in the ring, one per SM (default: every SM)", 2);
    cli.add_int("--rounds", &rounds, "times around the ring per call (default 50)");
    cli.add_int("--tile-kib", &tile_kib, "the tile handed on, in KiB (default 8: 64 x 64 fp16; 0: the counter alone)",
                0);
    cli.parse(argc, argv);
    study::validate_common(o);
    if (tile_kib > 1024)
      throw study::StudyError(study::ErrorKind::Usage, "--tile-kib must be <= 1024, got " + std::to_string(tile_kib));
    if (!study::open_probe(report, o, "flag_handoff")) return 0;
    const int sms = study::sm_count(o.device);
    if (!cli.given("--ctas")) ctas = sms;
    if (ctas > sms)
      throw study::StudyError(study::ErrorKind::Usage, "--ctas must be at most the GPU's " + std::to_string(sms) +
                                                           " SMs (one resident CTA each), got " + std::to_string(ctas));
    int cooperative = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, o.device));
    if (!cooperative) {
      report.write("skipped", "no cooperative launch on this GPU: the ring needs every CTA resident");
      return 0;
    }
    const int words = tile_kib * 1024 / 4;
    study::DeviceBuffer<unsigned> counter(1), tile(std::max(words, 1));
    CUDA_CHECK(cudaMemset(counter.get(), 0, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(tile.get(), 0, tile.bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, kOneCtaPerSm));
    unsigned* c = counter.get();
    unsigned* t = tile.get();
    const auto run = [&](cudaStream_t s) {  // every CTA resident, or the ring never closes
      study::launch_cooperative(ring, dim3(ctas), dim3(kThreads), kOneCtaPerSm, s, c, t, words, rounds);
    };
    const double turns = static_cast<double>(ctas) * rounds;
    if (o.check && words > 0) {
      run(nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<unsigned> got = study::to_host(tile);
      const std::vector<unsigned> end = study::to_host(counter);
      std::size_t wrong = 0;
      for (unsigned v : got) wrong += v != static_cast<unsigned>(turns);
      if (wrong || end[0] != 0) {
        report.write("failed", std::to_string(wrong) + " of " + std::to_string(words) + " words are not " +
                                   std::to_string(static_cast<long>(turns)) + " after one call (counter left at " +
                                   std::to_string(end[0]) + ")");
        return 1;
      }
    }
    // Each turn reads and writes the tile once.
    study::measure(report, o, "flag_handoff", run, 2.0 * turns * words * 4, 0);
    const double median = std::stod(report.row.get("median_us"));
    report.row.set("gbps", "").set("tflops", "");
    report.write("ok", "ring of " + std::to_string(ctas) + " CTAs x " + std::to_string(rounds) + " rounds, " +
                           std::to_string(tile_kib) + " KiB tile; one hand-off " +
                           std::to_string(median / turns) + " us" +
                           (o.check && words ? "; tile checked after one call" : ""));
    return 0;
  });
}
