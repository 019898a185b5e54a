// What a K-split GEMM task costs at batch 1, and how much of it is the reduction of its slices:
// through L2 with a meeting on an arrival count (e32_read_once's way) or through a thread-block
// cluster's distributed shared memory (the few-rows GEMM kernels' way, common/gemm/small_m.cu),
// the question e32's NOTES and e31's left open. Each tile of 256 rows (batch 1's 197 tokens, the
// rest zeros) by 64 columns has its K cut into `--split` slices of `--chunks` 64-wide chunks, one
// CTA a slice (one an SM); a CTA streams its A and W chunks through 4 cp.async stages, one CTA
// barrier a step, and adds the mma.sync products of its four 64-row tiles; then
// - `--reduce none`: each CTA stores its own tile (the products and one store: the baseline; the
//   sum of the slices only when there is one),
// - `--reduce global`: fp32 partial tiles to global memory, the slices meet on an arrival count,
//   each adds its share of the rows in slice order (as e32's tasks do),
// - `--reduce cluster`: the slices of a tile are a cluster; partial tiles in shared memory, a
//   cluster barrier, each adds its share from its peers' shared memory, a second barrier.
// Each CTA runs `--reps` such tasks in a row inside the kernel (the tile-scheduled kernels run
// their tasks in a persistent loop: no launch between them), so a task's time is the launch's
// over reps. One CSV row, family `probes`, version `cluster_split`. Checked first (every mode
// that reduces, and `none` at one slice): every output against the host's product, output
// poisoned before; a slice left out or a share read before its peers stored changes it.
#include <cooperative_groups.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "encoder/panel.cuh"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"

namespace {

namespace cg = cooperative_groups;
using namespace encoder::panel;

constexpr int kRows = 256;   // a row group: every token of one 224 px image
constexpr int kValid = 197;  // the tokens; rows past them load as zeros and are never stored
constexpr int kStages = 4;
constexpr int kStageHalves = kRows * kBK + kBM * kBK;  // A's four 64-row tiles, then W's 64 rows
constexpr int kPartStride = kBM + 8;                   // fp32 partial rows, padded against bank conflicts
constexpr std::size_t kSmem = std::max<std::size_t>(sizeof(__half) * kStages * kStageHalves,
                                                    sizeof(float) * kRows * kPartStride);

enum class Reduce { None, Global, Cluster };

struct Args {
  const __half* a;    // [kRows][k]
  const __half* w;    // [n][k]
  __half* out;        // [kRows][n]
  float* partials;    // global: [2 (a task's parity)][grid][kRows][kBM]
  unsigned* arrived;  // global: [tiles], slices arrived in this launch
  unsigned* left;     // global: [tiles], slices done with the launch (the last one resets both)
  int k, n, split, chunks, reps;
};

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Calls f(row, column) -> (the fp32 pair at that place) for the two rows and column pairs a thread
// holds of each 16 x 32 warp tile of the four 64-row tiles (panel.cuh's store_tile layout).
template <class F>
__device__ __forceinline__ void for_each_pair(const float (&acc)[4][4][4], int wm, int wn, int lane, F f) {
#pragma unroll
  for (int t = 0; t < 4; ++t)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        f(kBM * t + wm + (lane >> 2) + 8 * hr, wn + 8 * j + 2 * (lane & 3),
          make_float2(acc[t][j][2 * hr], acc[t][j][2 * hr + 1]));
}

__device__ __forceinline__ void store_four(__half* out, float4 v) {
  *reinterpret_cast<__half2*>(out) = __floats2half2_rn(v.x, v.y);
  *reinterpret_cast<__half2*>(out + 2) = __floats2half2_rn(v.z, v.w);
}

// The rows of a tile that slice `rank` of `split` adds: a share of the 256, fours of columns a thread.
template <class Load>
__device__ __forceinline__ void add_share(const Args& p, int rank, int n0, Load load) {
  const int r0 = rank * kRows / p.split, r1 = (rank + 1) * kRows / p.split;
  for (int i = threadIdx.x; i < (r1 - r0) * (kBM / 4); i += kThreads) {
    const int row = r0 + i / (kBM / 4), col = i % (kBM / 4) * 4;
    if (row >= kValid) break;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int q = 0; q < p.split; ++q) {
      const float4 v = load(q, row, col);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    store_four(p.out + static_cast<long long>(row) * p.n + n0 + col, sum);
  }
}

template <Reduce kReduce>
__global__ void __launch_bounds__(kThreads, 1) split_kernel(Args p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __half* stages = reinterpret_cast<__half*>(smem_raw);
  float* part = reinterpret_cast<float*>(smem_raw);  // the partial tile, once the stages are read
  const int tile = blockIdx.x / p.split, rank = blockIdx.x % p.split;
  const int n0 = tile * kBM, k0 = rank * p.chunks * kBK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = 16 * (warp & 3), wn = 32 * (warp >> 2);
  const RowSlab<kBM> w_rows(p.w, p.k, n0, p.n, k0);
  auto request = [&](int s) {
    __half* st = stages + (s % kStages) * kStageHalves;
#pragma unroll
    for (int t = 0; t < 4; ++t) RowSlab<kBM>(p.a, p.k, kBM * t, kValid, k0).copy(st + t * kTileHalves, s);
    w_rows.copy(st + 4 * kTileHalves, s);
  };
  for (int rep = 0; rep < p.reps; ++rep) {
    float acc[4][4][4] = {};
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < p.chunks) request(s);
      cp_async_commit();
    }
    for (int s = 0; s < p.chunks; ++s) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // chunk s landed for every thread; chunk s - 1's stage is free
      if (s + kStages - 1 < p.chunks) request(s + kStages - 1);
      cp_async_commit();
      const __half* st = stages + (s % kStages) * kStageHalves;
#pragma unroll
      for (int t = 0; t < 4; ++t) mma_chunk<32>(acc[t], st + t * kTileHalves, st + 4 * kTileHalves, wm, wn, lane);
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages: the partial tile may overwrite them
    if constexpr (kReduce == Reduce::None) {
      for_each_pair(acc, wm, wn, lane, [&](int r, int c, float2 v) {
        if (r < kValid) *reinterpret_cast<__half2*>(p.out + static_cast<long long>(r) * p.n + n0 + c) = __float22half2_rn(v);
      });
    } else if constexpr (kReduce == Reduce::Global) {
      const long long plane = static_cast<long long>(kRows) * kBM;
      float* planes = p.partials + (rep & 1) * gridDim.x * plane;  // a task's parity: see the meeting
      for_each_pair(acc, wm, wn, lane, [&](int r, int c, float2 v) {
        *reinterpret_cast<float2*>(planes + blockIdx.x * plane + r * kBM + c) = v;
      });
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(&p.arrived[tile], 1u);
        // Every slice's task `rep` stored. A slice reaches task rep + 2's stores (this parity's
        // planes again) only after task rep + 1's meeting, which every slice reaches only after
        // its share of task rep: no plane is written while a peer still reads it.
        while (load_acquire(&p.arrived[tile]) < static_cast<unsigned>(p.split * (rep + 1))) {
        }
      }
      __syncthreads();
      const float* mine = planes + static_cast<long long>(tile) * p.split * plane;
      add_share(p, rank, n0, [&](int q, int row, int col) {
        return __ldcg(reinterpret_cast<const float4*>(mine + q * plane + row * kBM + col));
      });
    } else {
      cg::cluster_group cluster = cg::this_cluster();
      for_each_pair(acc, wm, wn, lane,
                    [&](int r, int c, float2 v) { *reinterpret_cast<float2*>(part + r * kPartStride + c) = v; });
      cluster.sync();  // every slice's partial tile stored
      add_share(p, rank, n0, [&](int q, int row, int col) {
        return *reinterpret_cast<const float4*>(cluster.map_shared_rank(part + row * kPartStride + col, q));
      });
      cluster.sync();  // no slice's next stages overwrite a tile a peer still reads
    }
  }
  if constexpr (kReduce == Reduce::Global) {
    __syncthreads();
    // The launch's last slice of the tile resets its counts for the next launch (stream-ordered).
    if (threadIdx.x == 0 && atomicAdd(&p.left[tile], 1u) == static_cast<unsigned>(p.split - 1)) {
      p.arrived[tile] = 0;
      p.left[tile] = 0;
    }
  }
}

using Kernel = void (*)(Args);

Kernel kernel_for(Reduce r) {
  return r == Reduce::None ? split_kernel<Reduce::None>
                           : r == Reduce::Global ? split_kernel<Reduce::Global> : split_kernel<Reduce::Cluster>;
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("cluster_split", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int tiles = 8, split = 8, chunks = 6, reps = 16;
    std::string reduce_name = "cluster";
    study::Cli cli("cluster_split",
                   "Times K-split GEMM tasks of 256 x 64 at batch 1, their slices reduced through L2 or a cluster's "
                   "shared memory: one CSV row.");
    cli.add_common(o);
    cli.add_int("--tiles", &tiles, "output tiles of 256 x 64 (default 8)", 1);
    cli.add_int("--split", &split, "K slices a tile, one CTA each: 1 to 16 (default 8)", 1);
    cli.add_int("--chunks", &chunks, "64-wide K chunks a slice (default 6)", 1);
    cli.add_int("--reps", &reps, "tasks a CTA runs in a row inside one launch (default 16)", 1);
    cli.add_string("--reduce", &reduce_name, "none, global or cluster (default cluster)");
    cli.parse(argc, argv);
    study::validate_common(o);
    if (split > 16) throw study::StudyError(study::ErrorKind::Usage, "--split must be 1 to 16");
    if (reduce_name != "none" && reduce_name != "global" && reduce_name != "cluster")
      throw study::StudyError(study::ErrorKind::Usage, "--reduce must be none, global or cluster, got '" + reduce_name + "'");
    const Reduce reduce = reduce_name == "none" ? Reduce::None : reduce_name == "global" ? Reduce::Global : Reduce::Cluster;
    if (reduce != Reduce::None && split < 2)
      throw study::StudyError(study::ErrorKind::Usage, "--reduce " + reduce_name + " needs --split 2 or more");
    if (!study::open_probe(report, o, "cluster_split")) return 0;
    const int sms = study::sm_count(o.device);
    const int grid = tiles * split;
    // One CTA an SM (kSmem): a meeting through L2 spins, so every slice must be resident at once.
    if (reduce == Reduce::Global && grid > sms)
      throw study::StudyError(study::ErrorKind::Usage, std::to_string(grid) + " CTAs meeting through L2 need as many SMs; this GPU has " +
                                                           std::to_string(sms));
    const Kernel k = kernel_for(reduce);
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = split;
    cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
    if (reduce == Reduce::Cluster) {
      if (split > 8) CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      config.attrs = &cluster;
      config.numAttrs = 1;
      int clusters = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, k, &config));
      if (clusters == 0)
        throw study::StudyError(study::ErrorKind::Usage, "a cluster of " + std::to_string(split) + " CTAs of " +
                                                             std::to_string(kSmem) + " bytes does not fit this GPU");
      if (clusters * split < grid)
        throw study::StudyError(study::ErrorKind::Usage, std::to_string(tiles) + " clusters of " + std::to_string(split) +
                                                             " do not fit at once (" + std::to_string(clusters) + " do)");
    }
    const int k_dim = split * chunks * kBK, n = tiles * kBM;
    // Small integers (A in [-2, 2], W in [-1, 1]): every product and partial sum exact in fp32.
    std::vector<__half> ha(static_cast<std::size_t>(kRows) * k_dim), hw(static_cast<std::size_t>(n) * k_dim);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < k_dim; ++c) ha[static_cast<std::size_t>(r) * k_dim + c] = __float2half(static_cast<float>((r * 7 + c * 3) % 5 - 2));
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k_dim; ++c) hw[static_cast<std::size_t>(r) * k_dim + c] = __float2half(static_cast<float>((r * 3 + c * 5 + c / 7) % 3 - 1));
    auto a = study::to_device(ha);
    auto w = study::to_device(hw);
    study::DeviceBuffer<__half> out(static_cast<std::size_t>(kRows) * n);
    study::DeviceBuffer<float> partials(reduce == Reduce::Global ? 2 * static_cast<std::size_t>(grid) * kRows * kBM : 1);
    study::DeviceBuffer<unsigned> counts(2 * static_cast<std::size_t>(tiles));
    CUDA_CHECK(cudaMemset(counts.get(), 0, counts.bytes()));
    const Args args{a.get(), w.get(), out.get(), partials.get(), counts.get(), counts.get() + tiles, k_dim, n, split, chunks, reps};
    auto launch = [&](cudaStream_t s) {
      config.stream = s;
      CUDA_CHECK(cudaLaunchKernelEx(&config, k, args));
    };
    report.row.set("model", o.model).set("batch", o.batch).set("image_size", o.image_size);
    const bool checked = o.check && (reduce != Reduce::None || split == 1);
    if (checked) {
      CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));  // NaN until written
      launch(nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<__half> got = study::to_host(out);
      for (int r = 0; r < kValid; ++r)
        for (int c = 0; c < n; ++c) {
          double want = 0;
          for (int kk = 0; kk < k_dim; ++kk)
            want += static_cast<double>(__half2float(ha[static_cast<std::size_t>(r) * k_dim + kk])) *
                    __half2float(hw[static_cast<std::size_t>(c) * k_dim + kk]);
          const double g = __half2float(got[static_cast<std::size_t>(r) * n + c]);
          if (!(std::fabs(g - want) <= 1e-3 * std::fabs(want) + 0.5)) {
            report.write("failed", "output row " + std::to_string(r) + " column " + std::to_string(c) + ": " +
                                       std::to_string(g) + ", the host's " + std::to_string(want));
            return 1;
          }
        }
    }
    study::measure(report, o, "cluster_split", launch, 0, 0);
    const double median = std::stod(report.row.get("median_us"));
    const double task = median / reps;
    // A's rows once a task and a CTA, W's slice once: the bytes through L2 a task.
    const double bytes = 2.0 * (kRows + kBM) * chunks * kBK * grid;
    report.row.set("gbps", std::to_string(bytes / (task * 1e3))).set("tflops", "");
    report.write("ok", std::to_string(tiles) + " tiles x " + std::to_string(split) + " slices = " + std::to_string(grid) +
                           " CTAs on " + std::to_string(sms) + " SMs, K " + std::to_string(k_dim) + " (" +
                           std::to_string(chunks) + " chunks a slice), reduce=" + reduce_name + ", " +
                           std::to_string(reps) + " tasks a launch; a task " + std::to_string(task) + " us" +
                           (checked ? "; every output checked" : "; unchecked (no reduction)"));
    return 0;
  });
}
