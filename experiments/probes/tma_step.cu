// What one step of a TMA + wgmma mainloop costs at batch 1: the measurement e32_read_once's NOTES
// name before any read-once step is built on such a loop. chunk_step timed the tile-scheduled
// kernel's loop (cp.async chunks, one CTA barrier a step, mma.sync): a 64-row step 0.68-0.71 us,
// a 256-row step 0.94 us, whatever the bytes. Here every CTA runs `--steps` steps of a
// warp-specialized loop: one producer thread requests each step's A chunk (`--rows` rows x 64
// columns, fp16, 128-byte swizzled) by TMA into a ring of `--stages` buffers, each with a "full"
// mbarrier (the bytes landed) and an "empty" one (the consumers are done with it); one consumer
// warpgroup per 128 rows (one for 64 rows) waits on "full", issues wgmma m64n64k16 from shared
// memory against a 64 x 64 weight tile and frees the buffer when the next step's products are
// issued. `--weights resident` loads the weight tile once (chunk_step's case); `streamed` brings a
// new 64 x 64 tile of the CTA's own weights with each step (read-once at batch 1: the weights
// stream from HBM while the activations come from L2). `--source same` has every CTA read the
// same A rows (L2), `distinct` its own (HBM, as chunk_step's). `--tasks T` runs T tasks of `--steps`
// steps back to back in the CTA, as a persistent kernel runs its tasks: each task reads weights of
// its own, stores its output tile (fp16) and makes it visible before the next task's inputs are
// requested; `--prefetch-weights` requests the next task's first weight tiles before that.
// `--handoff` takes that hand-off apart: `stored` (the above), `unfenced` (no fence before the next
// task's inputs), `unordered` (stored and fenced, but the next task's inputs not held for it) and
// `none` (no store: the tasks' steps stream back to back). `--store tma` writes the tile into
// shared memory in the tensor map's swizzled layout and stores it by TMA, one bulk store a 64-row
// tile by each consumer warpgroup's first thread, so that the stores drain while the next task's
// products run (`stored` then waits for the bulk stores to complete before the hand-off; the
// tile is written again only once the previous stores have read it). `--handoff cluster` keeps the
// hand-off on chip: CTAs in pairs (clusters of 2), each consumer thread writes its share of the
// tile into the paired CTA's shared memory (distributed shared memory, one of two buffers a task
// in turn) and arrives on that CTA's barrier, releasing the writes; a task's consumers wait
// (acquiring them) for the pair's previous tile before their first step, as a stage of a forward
// waits for the one before (the tile is not a wgmma operand here: the probe times its arrival).
// Checked first: the products' sum over every CTA equals the host's (a skipped step or a buffer
// read before it landed changes it), with --tasks every stored output tile equals the host's, and
// with `cluster` the tiles received add up to the tiles sent. With `--store tma` the cluster's
// tile is staged in shared memory and sent by one bulk copy a 64-row tile
// (cp.async.bulk.shared::cluster), completing the pair's barrier by its bytes; the pair
// acknowledges each tile so that the staging tile is written again only once it has been read.
// One CSV row, family `probes`, version `tma_step`; the note gives the time a step takes and the
// bytes an SM reads a us.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "device/sm90.cuh"
#include "device/tma_map.hpp"
#include "harness/bench.hpp"
#include "harness/gpu.hpp"

namespace {

using namespace sm90;

constexpr int kCols = 64;                       // a chunk's columns: one 128-byte swizzled row
constexpr int kTileBytes = 64 * kCols * 2;      // a 64 x 64 fp16 tile, 8 KB
constexpr std::size_t kMaxSmem = 227 * 1024;    // a Hopper CTA's (opt-in)

constexpr int consumer_groups(int rows) { return rows >= 128 ? rows / 128 : 1; }
constexpr int threads_for(int rows) { return 128 * (1 + consumer_groups(rows)); }
std::size_t stage_bytes(int rows, bool streamed) { return static_cast<std::size_t>(rows) * kCols * 2 + (streamed ? kTileBytes : 0); }
// The ring, the resident weight tile (not with `cluster`'s streamed weights), the output tile when
// staged for TMA, `cluster`'s two receiving buffers, the barriers.
std::size_t smem_bytes(int rows, int stages, bool streamed, bool tma_store, bool cluster) {
  const std::size_t tile = static_cast<std::size_t>(rows) * kCols * 2;
  return stages * stage_bytes(rows, streamed) + (cluster && streamed ? 0 : kTileBytes) + (tma_store ? tile : 0) +
         (cluster ? 2 * tile : 0) + (2 * stages + 2 + (cluster ? 3 : 0)) * 8 + 1024;  // +1024: alignment
}

// How a task hands its output to the next task's inputs (--tasks > 1); see the header.
enum class Handoff { stored, unfenced, unordered, none, cluster };
constexpr const char* kHandoffNames[] = {"stored", "unfenced", "unordered", "none", "cluster"};

struct Params {
  int steps, stages;
  int a_row0_step;  // A's first row is blockIdx.x * this (0: every CTA the same rows)
  int tasks;        // tasks back to back, each `steps` steps; a task's inputs wait for the one before
  bool prefetch;    // the next task's first weight tiles requested before its inputs are ready
  __half* out;      // tasks > 1: each task's output tile stored here, grid x rows x 64
  Handoff handoff;  // tasks > 1
  bool tma_store;   // tasks > 1: the output tile through shared memory and a TMA store
  bool verify;      // cluster: add every received tile's |values| into *received (the check's launch)
  float* received;
};

#ifdef STUDY_WGMMA
// f(tile, row in the tile, 16-byte chunk of the row, two fp16 values) for each pair of products a
// consumer thread holds of its warpgroup's 64-row tiles. wgmma m64nN's layout: rows 16 warp +
// lane / 4 (+8), columns 8 j + 2 (lane % 4) in registers 4 j (+2 for row + 8).
template <int kTiles, typename F>
__device__ __forceinline__ void for_each_pair(const float (&acc)[kTiles][32], int warp, int lane, F f) {
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        f(i, 16 * warp + lane / 4 + 8 * h, j, __floats2half2_rn(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]));
}

// Where a consumer thread's pair (`for_each_pair`'s tile i of group c, row, chunk j) goes in a
// task's output tile in shared memory: the output map's 128-byte swizzle (row r's 16-byte chunk j
// at j ^ r % 8), 64-row tiles one after another.
template <int kTilesPerGroup>
__device__ __forceinline__ int swizzled(int c, int i, int row, int j, int lane) {
  return (c * kTilesPerGroup + i) * kTileBytes + row * 128 + ((j ^ (row % 8)) * 16) + (lane % 4) * 4;
}

// One consumer warpgroup's share of a task's output tile (its 64-row tiles) written into shared
// memory in the output map's 128-byte swizzle and fenced for the async proxy.
template <int kTilesPerGroup>
__device__ __forceinline__ void stage_tile(const float (&acc)[kTilesPerGroup][32], unsigned char* out_tile, int c,
                                           int warp, int lane) {
  for_each_pair(acc, warp, lane, [&](int i, int row, int j, __half2 v) {
    *reinterpret_cast<__half2*>(out_tile + swizzled<kTilesPerGroup>(c, i, row, j, lane)) = v;
  });
  fence_proxy_async();  // the generic proxy's writes, before the TMA engine reads them
}

// One consumer warpgroup's share of a task's output tile staged in shared memory and stored
// by TMA from its first thread; with `complete`, that thread waits until the stores are performed
// and fenced (the hand-off may follow). The tile is written again only once the previous stores
// have read it.
template <int kRows>
__device__ __forceinline__ void store_by_tma(const float (&acc)[kRows / 64 / consumer_groups(kRows)][32],
                                             unsigned char* out_tile, const void* map_out, bool complete, int c,
                                             int warp, int lane) {
  constexpr int kTilesPerGroup = kRows / 64 / consumer_groups(kRows);
  const bool issuer = warp == 0 && lane == 0;
  if (issuer) bulk_wait_read<0>();
  named_barrier(1 + c, 128);
  stage_tile(acc, out_tile, c, warp, lane);
  named_barrier(1 + c, 128);
  if (issuer) {
#pragma unroll
    for (int i = 0; i < kTilesPerGroup; ++i)
      tma_store_2d(map_out, 0, blockIdx.x * kRows + (c * kTilesPerGroup + i) * 64,
                   out_tile + (c * kTilesPerGroup + i) * kTileBytes);
    bulk_commit();
    if (complete) {
      bulk_wait<0>();
      __threadfence();
    }
  }
}
#endif

template <int kRows, bool kMma, bool kStreamed>
__global__ void __launch_bounds__(threads_for(kRows), 1)
steps_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_w,
             const __grid_constant__ CUtensorMap map_out, Params p, float* sums) {
#ifdef STUDY_WGMMA
  constexpr int kGroups = consumer_groups(kRows);
  constexpr int kTilesPerGroup = kRows / 64 / kGroups;  // 64-row tiles each consumer warpgroup multiplies
  constexpr int kStageBytes = kRows * kCols * 2 + (kStreamed ? kTileBytes : 0);
  extern __shared__ unsigned char smem_raw[];
  // TMA's 128-byte swizzle and the descriptors key on address bits: 1024-aligned buffers.
  unsigned char* smem = smem_raw + ((1024 - (shared_addr(smem_raw) & 1023)) & 1023);
  constexpr int kOutBytes = kRows * kCols * 2;
  const bool cluster = p.handoff == Handoff::cluster;
  const bool bulk = cluster && p.tma_store;  // the pair's tile staged here and sent by bulk copies
  unsigned char* w_resident = smem + p.stages * kStageBytes;
  // tma_store: the task's output staged, 64-row tiles, 1024-aligned; cluster: the two buffers the
  // paired CTA's tiles arrive in, task by task in turn, in the same layout.
  unsigned char* out_tile = w_resident + (cluster && kStreamed ? 0 : kTileBytes);
  unsigned char* inbox = out_tile + (p.tma_store ? kOutBytes : 0);
  uint64_t* full = reinterpret_cast<uint64_t*>(inbox + (cluster ? 2 * kOutBytes : 0));
  uint64_t* empty = full + p.stages;
  uint64_t* w_ready = empty + p.stages;
  uint64_t* task_done = w_ready + 1;  // the consumers stored a task's output (tasks > 1)
  uint64_t* arrived = task_done + 1;  // cluster, [2]: the paired CTA's tile is in inbox + b * kOutBytes
  uint64_t* staged_free = arrived + 2;  // bulk: the pair holds this CTA's previous tile
  const int group = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);  // warp-uniform, for wgmma
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.stages; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], 4 * kGroups);  // lane 0 of every consumer warp
    }
    mbar_init(w_ready, 1);
    mbar_init(task_done, p.tma_store ? kGroups : 4 * kGroups);  // each group's issuer, or every consumer warp
    if (cluster) {
      // Register stores: every consumer thread of the pair arrives; bulk copies: this CTA arms
      // each phase with the tile's bytes, which the copies complete (here the pair's tiles of
      // tasks 0 and 1); the pair acknowledges each tile but its last.
      for (int b = 0; b < 2; ++b) mbar_init(&arrived[b], bulk ? 1 : 128 * kGroups);
      mbar_init(staged_free, 1);
      if (bulk) mbar_arrive_expect_tx(&arrived[0], kOutBytes), mbar_arrive_expect_tx(&arrived[1], kOutBytes);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (cluster) cluster_sync();  // the pair's barriers exist before either arrives on the other's

  if (group == 0) {  // the producer: one thread
    if (threadIdx.x != 0) return;
    if constexpr (!kStreamed) {
      mbar_arrive_expect_tx(w_ready, kTileBytes);
      tma_load_2d(w_resident, &map_w, 0, 64 * blockIdx.x, w_ready);
    }
    const int row0 = blockIdx.x * p.a_row0_step;
    constexpr int kBytesA = kRows * kCols * 2;
    auto load_a = [&](int st, int s) { tma_load_2d(smem + st * kStageBytes, &map_a, kCols * s, row0, &full[st]); };
    // Each task its own weights (a GEMM task at batch 1 reads its weight slice once), its
    // inputs the same rows (the stage's activations, in L2).
    auto load_w = [&](int st, int t, int s) {
      tma_load_2d(smem + st * kStageBytes + kBytesA, &map_w, kCols * (t * p.steps + s), 64 * blockIdx.x, &full[st]);
    };
    int st = 0, phase = 0;
    for (int t = 0; t < p.tasks; ++t) {
      // With prefetch, the weights of the task's first steps are requested while the task before
      // still runs (they depend on nothing); their inputs only once that task has stored its output.
      const int early = t > 0 && p.prefetch ? min(p.stages, p.steps) : 0;
      const int first = st;
      for (int s = 0; s < early; ++s) {
        mbar_wait(&empty[st], phase ^ 1);
        mbar_arrive_expect_tx(&full[st], kStageBytes);  // the inputs' bytes complete the phase later
        load_w(st, t, s);
        if (++st == p.stages) st = 0, phase ^= 1;
      }
      if (t > 0 && (p.handoff == Handoff::stored || p.handoff == Handoff::unfenced)) mbar_wait(task_done, (t - 1) & 1);
      for (int s = 0, at = first; s < early; ++s, at = at + 1 == p.stages ? 0 : at + 1) load_a(at, s);
      for (int s = early; s < p.steps; ++s) {
        mbar_wait(&empty[st], phase ^ 1);  // a fresh barrier passes parity 1
        mbar_arrive_expect_tx(&full[st], kStageBytes);
        load_a(st, s);
        if constexpr (kStreamed) load_w(st, t, s);
        if (++st == p.stages) st = 0, phase ^= 1;
      }
    }
    return;
  }

  const int c = group - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  float acc[kTilesPerGroup][32];
  float total = 0.f, received = 0.f;
  // cluster: waits for the paired CTA's tile of its task u (in buffer u % 2, that buffer's
  // (u / 2)-th arrival), adding its |values| in the check's launch.
  auto receive = [&](int u) {
    mbar_wait<true>(&arrived[u & 1], (u >> 1) & 1);
    if (bulk && threadIdx.x == 128) {
      if (u + 2 < p.tasks) mbar_arrive_expect_tx(&arrived[u & 1], kOutBytes);  // the pair's tile of task u + 2
      if (u + 1 < p.tasks) mbar_arrive_cluster(cluster_addr(staged_free, cluster_rank() ^ 1));  // its staging is free
    }
    if (p.verify) {
      const uint32_t* tile = reinterpret_cast<const uint32_t*>(inbox + (u & 1) * kOutBytes);
      for (int i = static_cast<int>(threadIdx.x) - 128; i < kOutBytes / 4; i += 128 * kGroups) {
        const __half2 v = *reinterpret_cast<const __half2*>(tile + i);
        received += fabsf(__low2float(v)) + fabsf(__high2float(v));
      }
    }
  };
  if constexpr (!kStreamed) mbar_wait(w_ready, 0);  // also without products: no CTA exits with a load in flight
  int st = 0, phase = 0;
  for (int t = 0; t < p.tasks; ++t) {
    if (cluster && t > 0) receive(t - 1);  // the stage before, handed over on chip
    int prev = -1;  // the buffer whose products were issued a step ago
    for (int s = 0; s < p.steps; ++s) {
      mbar_wait(&full[st], phase);
      if constexpr (kMma) {
        const uint32_t a = shared_addr(smem + st * kStageBytes);
        const uint64_t b = tile_desc(kStreamed ? a + kRows * kCols * 2 : shared_addr(w_resident));
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kCols / 16; ++ks)  // +32 bytes along the swizzled rows per k-step
#pragma unroll
          for (int i = 0; i < kTilesPerGroup; ++i)
            wgmma_ss_n64(acc[i], tile_desc(a + (c * kTilesPerGroup + i) * kTileBytes) + 2 * ks, b + 2 * ks,
                         s > 0 || ks > 0);
        wgmma_commit();
        if (prev >= 0) {  // the previous step's products are done: its buffer can be refilled
          wgmma_wait<1>();
          if (lane == 0) mbar_arrive(&empty[prev]);
        }
        prev = st;
      } else {
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[st]);
      }
      if (++st == p.stages) st = 0, phase ^= 1;
    }
    if constexpr (kMma) {
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < kTilesPerGroup; ++i) {
        reg_fence(acc[i]);
#pragma unroll
        for (float v : acc[i]) total += v;
      }
    }
    if (p.tasks > 1) {
      if constexpr (kMma) {
        if (lane == 0) mbar_arrive(&empty[prev]);
        if (bulk) {
          // Staged here once the pair has the previous tile, then each 64-row tile copied into
          // the pair's buffer t % 2 by its group's first thread, completing the pair's barrier.
          const uint32_t peer = cluster_rank() ^ 1;
          if (t > 0) mbar_wait<true>(staged_free, (t - 1) & 1);
          stage_tile(acc, out_tile, c, warp, lane);
          named_barrier(1 + c, 128);
          if (warp == 0 && lane == 0) {
            const uint32_t dst = cluster_addr(inbox + (t & 1) * kOutBytes, peer), bar = cluster_addr(&arrived[t & 1], peer);
#pragma unroll
            for (int i = 0; i < kTilesPerGroup; ++i)
              bulk_copy_cluster(dst + (c * kTilesPerGroup + i) * kTileBytes,
                                out_tile + (c * kTilesPerGroup + i) * kTileBytes, kTileBytes, bar);
          }
        } else if (cluster) {
          // Into the paired CTA's buffer t % 2, swizzled as the TMA store's tile; each thread's
          // arrival releases its own writes.
          const uint32_t peer = cluster_rank() ^ 1;
          const uint32_t dst = cluster_addr(inbox + (t & 1) * kOutBytes, peer);
          for_each_pair(acc, warp, lane, [&](int i, int row, int j, __half2 v) {
            st_cluster(dst + swizzled<kTilesPerGroup>(c, i, row, j, lane), *reinterpret_cast<const uint32_t*>(&v));
          });
          mbar_arrive_cluster(cluster_addr(&arrived[t & 1], peer));
        } else if (p.handoff != Handoff::none && p.tma_store) {
          store_by_tma<kRows>(acc, out_tile, &map_out, p.handoff == Handoff::stored, c, warp, lane);
        } else if (p.handoff != Handoff::none) {
          // The task's output tile stored as a task of the forward stores it (fp16), each thread
          // its own pairs, then made visible before the next task's inputs may be requested.
          for_each_pair(acc, warp, lane, [&](int i, int row, int j, __half2 v) {
            const long long r = static_cast<long long>(blockIdx.x) * kRows + (c * kTilesPerGroup + i) * 64 + row;
            *reinterpret_cast<__half2*>(p.out + r * 64 + 8 * j + 2 * (lane % 4)) = v;
          });
          if (p.handoff != Handoff::unfenced) __threadfence();
        }
      }
      __syncwarp();
      // Only a producer that waits hears of the store: a phase nobody waits on is a barrier misuse.
      const bool waited = p.handoff == Handoff::stored || p.handoff == Handoff::unfenced;
      if (waited && lane == 0 && (!p.tma_store || warp == 0)) mbar_arrive(task_done);
    }
  }
  // A bulk store still reading the output tile keeps the CTA's shared memory alive; the pair's
  // last tile has landed before the CTA leaves (no write reaches a CTA that has exited).
  if (p.tma_store && warp == 0 && lane == 0) bulk_wait<0>();
  if (cluster) {
    receive(p.tasks - 1);
    cluster_sync();  // neither CTA of the pair leaves while the other may still reach its shared memory
  }
  for (int m = 16; m > 0; m >>= 1) total += __shfl_xor_sync(0xffffffffu, total, m);
  if (lane == 0) atomicAdd(sums, total);
  if (p.verify) {
    for (int m = 16; m > 0; m >>= 1) received += __shfl_xor_sync(0xffffffffu, received, m);
    if (lane == 0) atomicAdd(p.received, received);
  }
#else
  __trap();  // built without sm_90a: main() refuses before getting here
#endif
}

using Kernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, Params, float*);

template <int kRows>
Kernel pick(bool mma, bool streamed) {
  if (mma) return streamed ? steps_kernel<kRows, true, true> : steps_kernel<kRows, true, false>;
  return streamed ? steps_kernel<kRows, false, true> : steps_kernel<kRows, false, false>;
}

Kernel kernel_for(int rows, bool mma, bool streamed) {
  return rows == 64 ? pick<64>(mma, streamed) : rows == 128 ? pick<128>(mma, streamed) : pick<256>(mma, streamed);
}

// Every task's output element is its row's sum over the task's K (the weights are ones), rounded
// to fp16 as the kernel rounds it; the last task's tiles stay. "" when every element matches, else
// the first that does not.
std::string first_wrong_output(const std::vector<__half>& out, const std::vector<__half>& a, int grid, int rows,
                               bool same, long long cols) {
  for (int b = 0; b < grid; ++b)
    for (int r = 0; r < rows; ++r) {
      const long long a_row = (same ? 0 : static_cast<long long>(b) * rows) + r;
      float sum = 0.f;
      for (long long k = 0; k < cols; ++k) sum += __half2float(a[a_row * cols + k]);
      const float want = __half2float(__float2half(sum));
      for (int n = 0; n < 64; ++n) {
        const float got = __half2float(out[(static_cast<std::size_t>(b) * rows + r) * 64 + n]);
        if (!(got == want))
          return "CTA " + std::to_string(b) + " row " + std::to_string(r) + " column " + std::to_string(n) + ": " +
                 std::to_string(got) + ", the host's " + std::to_string(want);
      }
    }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  return study::bench_main("tma_step", [&](study::BenchReport& report) {
    study::CommonOptions o;
    int rows = 64, stages = 4, steps = 48, tasks = 1, ctas = 0, ctas_per_sm = 1;
    std::string source = "same", weights = "resident", handoff = "stored", store = "registers";
    bool mma = true, prefetch = false;
    study::Cli cli("tma_step",
                   "Times the steps of a TMA + wgmma mainloop (A chunks by TMA into a ring of mbarrier-guarded "
                   "buffers, a producer thread and wgmma consumers): one CSV row.");
    cli.add_common(o);
    cli.add_int("--rows", &rows, "A rows a step: 64, 128 or 256 (default 64)", 64);
    cli.add_int("--stages", &stages, "buffers in the ring, 2 to 8 (default 4)", 2);
    cli.add_int("--steps", &steps, "steps a task (default 48)", 1);
    cli.add_int("--tasks", &tasks,
                "tasks a CTA back to back, each storing its output tile before the next one's inputs are "
                "requested (default 1: no store)", 1);
    cli.add_int("--ctas", &ctas, "CTAs (default: --ctas-per-sm x SMs)", 0);
    cli.add_int("--ctas-per-sm", &ctas_per_sm, "CTAs an SM when --ctas is not given (default 1)", 1);
    cli.add_string("--source", &source, "same (every CTA reads the same A rows) or distinct (default same)");
    cli.add_string("--weights", &weights, "resident (one tile, loaded once) or streamed (a tile a step; default resident)");
    cli.add_string("--handoff", &handoff,
                   "stored, unfenced, unordered, none or cluster (to the paired CTA's shared memory): how a task "
                   "hands its output to the next (--tasks > 1; default stored)");
    cli.add_string("--store", &store,
                   "registers (each thread its accumulators, to global memory or with --handoff cluster to the "
                   "pair's shared memory) or tma (through shared memory, one bulk store, or bulk copy to the pair, a "
                   "64-row tile): how a task stores its output (--tasks > 1; default registers)");
    cli.add_flag("--no-mma", &mma, "loads and barriers only, no products", false);
    cli.add_flag("--prefetch-weights", &prefetch,
                 "request a task's first weight tiles while the task before runs (--weights streamed, --tasks > 1)",
                 true);
    cli.parse(argc, argv);
    study::validate_common(o);
    if (rows != 64 && rows != 128 && rows != 256)
      throw study::StudyError(study::ErrorKind::Usage, "--rows must be 64, 128 or 256");
    if (stages > 8) throw study::StudyError(study::ErrorKind::Usage, "--stages must be 2 to 8");
    if (source != "same" && source != "distinct")
      throw study::StudyError(study::ErrorKind::Usage, "--source must be same or distinct, got '" + source + "'");
    if (weights != "resident" && weights != "streamed")
      throw study::StudyError(study::ErrorKind::Usage, "--weights must be resident or streamed, got '" + weights + "'");
    const bool streamed = weights == "streamed", same = source == "same";
    if (prefetch && (!streamed || tasks < 2))
      throw study::StudyError(study::ErrorKind::Usage, "--prefetch-weights needs --weights streamed and --tasks 2 or more");
    const auto named = std::find(std::begin(kHandoffNames), std::end(kHandoffNames), handoff);
    if (named == std::end(kHandoffNames))
      throw study::StudyError(study::ErrorKind::Usage,
                              "--handoff must be stored, unfenced, unordered, none or cluster, got '" + handoff + "'");
    if (handoff != "stored" && tasks < 2)
      throw study::StudyError(study::ErrorKind::Usage, "--handoff " + handoff + " needs --tasks 2 or more");
    const Handoff how = static_cast<Handoff>(named - std::begin(kHandoffNames));
    if (store != "registers" && store != "tma")
      throw study::StudyError(study::ErrorKind::Usage, "--store must be registers or tma, got '" + store + "'");
    const bool tma_store = store == "tma", cluster = how == Handoff::cluster;
    if (tma_store && (tasks < 2 || !mma))
      throw study::StudyError(study::ErrorKind::Usage, "--store tma needs --tasks 2 or more and the products");
    if (cluster && !mma) throw study::StudyError(study::ErrorKind::Usage, "--handoff cluster needs the products");
    if (cluster && ctas % 2)
      throw study::StudyError(study::ErrorKind::Usage, "--handoff cluster pairs the CTAs: --ctas must be even");
    const std::size_t smem = smem_bytes(rows, stages, streamed, tma_store, cluster);
    if (smem > kMaxSmem)
      throw study::StudyError(study::ErrorKind::Usage,
                              std::to_string(stages) + " stages of " + std::to_string(rows) + " rows" +
                                  (streamed ? " and a weight tile" : "") + " need " + std::to_string(smem) +
                                  " bytes of shared memory, more than a CTA's " + std::to_string(kMaxSmem));
    if (!study::open_probe(report, o, "tma_step")) return 0;
    if (const auto why = wgmma_unavailable(); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, why);
    const int sms = study::sm_count(o.device);
    const Kernel k = kernel_for(rows, mma, streamed);
    const int threads = threads_for(rows);
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    // The default grid is every CTA resident at once: no CTA waits for another's SM.
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, smem));
    int grid = ctas > 0 ? ctas : std::max(1, std::min(ctas_per_sm, per_sm)) * sms;
    if (cluster) grid -= grid % 2;
    const long long cols = static_cast<long long>(steps) * kCols, a_rows = static_cast<long long>(rows) * (same ? 1 : grid);
    // Small integers in [-2, 2] and weights of ones: every product exact in fp32.
    std::vector<__half> ha(a_rows * cols), hw(static_cast<std::size_t>(64) * grid * (streamed ? cols * tasks : kCols),
                                              __float2half(1.f));
    for (std::size_t i = 0; i < ha.size(); ++i) ha[i] = __float2half(static_cast<float>(static_cast<int>(i % 5) - 2));
    auto a = study::to_device(ha);
    auto w = study::to_device(hw);
    const CUtensorMap map_a = tile_map(a.get(), a_rows, cols, rows);
    const CUtensorMap map_w = tile_map(w.get(), 64LL * grid, streamed ? cols * tasks : kCols, 64);
    study::DeviceBuffer<__half> out(tasks > 1 ? static_cast<std::size_t>(grid) * rows * 64 : 64 * 64);
    const CUtensorMap map_out = tile_map(out.get(), tasks > 1 ? static_cast<long long>(grid) * rows : 64, 64, 64);
    study::DeviceBuffer<float> sums(1), received(1);
    const Params p{steps, stages, same ? 0 : rows, tasks, prefetch, out.get(), how, tma_store, false, received.get()};
    cudaLaunchAttribute pair{};  // cluster: the CTAs in pairs, each pair on two SMs of one GPC at once
    pair.id = cudaLaunchAttributeClusterDimension;
    pair.val.clusterDim.x = 2;
    pair.val.clusterDim.y = pair.val.clusterDim.z = 1;
    auto config = [&](cudaStream_t s) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(grid);
      cfg.blockDim = dim3(threads);
      cfg.dynamicSmemBytes = smem;
      cfg.stream = s;
      cfg.attrs = &pair;
      cfg.numAttrs = 1;
      return cfg;
    };
    auto launch = [&](const Params& q, cudaStream_t s) {
      if (!cluster) {
        k<<<grid, threads, smem, s>>>(map_a, map_w, map_out, q, sums.get());
        return;
      }
      const cudaLaunchConfig_t cfg = config(s);
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, map_a, map_w, map_out, q, sums.get()));
    };
    int pairs_at_once = 0;
    if (cluster) {
      const cudaLaunchConfig_t cfg = config(nullptr);
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&pairs_at_once, k, &cfg));
    }
    report.row.set("model", o.model).set("batch", o.batch).set("image_size", o.image_size);
    if (o.check && mma) {
      CUDA_CHECK(cudaMemset(sums.get(), 0, sizeof(float)));
      CUDA_CHECK(cudaMemset(received.get(), 0, sizeof(float)));
      if (tasks > 1) study::poison(out);
      Params checked = p;
      checked.verify = cluster;
      launch(checked, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      // Each output element is a row's 64-column sum in its chunk; every CTA adds all of its
      // rows' chunks, 64 output columns each.
      double want = 0;
      for (float v : ha) want += v;
      want *= 64.0 * (same ? grid : 1) * tasks;
      const float got = study::to_host(sums)[0];
      if (std::fabs(got - want) > 1e-3 * std::fabs(want) + 1.0) {
        report.write("failed", "products' sum " + std::to_string(got) + ", the host's " + std::to_string(want));
        return 1;
      }
      if (tasks > 1 && how != Handoff::none && !cluster) {
        if (const std::string bad = first_wrong_output(study::to_host(out), ha, grid, rows, same, cols); !bad.empty()) {
          report.write("failed", "stored output " + bad);
          return 1;
        }
      }
      if (cluster) {
        // Every CTA receives each of its pair's tiles once: in all, each CTA's tile of every task,
        // whose elements are its rows' sums (64 columns alike), exact in fp16.
        double sent = 0;
        for (long long r = 0; r < a_rows; ++r) {
          float sum = 0.f;
          for (long long kk = 0; kk < cols; ++kk) sum += __half2float(ha[r * cols + kk]);
          sent += std::fabs(__half2float(__float2half(sum)));
        }
        sent *= 64.0 * (same ? grid : 1) * tasks;
        const float got_tiles = study::to_host(received)[0];
        if (!(std::fabs(got_tiles - sent) <= 1e-3 * sent + 1.0)) {
          report.write("failed", "tiles received add up to " + std::to_string(got_tiles) + ", the tiles sent to " +
                                     std::to_string(sent));
          return 1;
        }
      }
    }
    study::measure(report, o, "tma_step", [&](cudaStream_t s) { launch(p, s); },
                   0, 0);
    const double median = std::stod(report.row.get("median_us"));
    const double bytes = static_cast<double>(stage_bytes(rows, streamed)) * steps * tasks * grid;
    report.row.set("gbps", std::to_string(bytes / (median * 1e3))).set("tflops", "");
    report.write("ok", std::to_string(grid) + " CTAs on " + std::to_string(sms) + " SMs (" + std::to_string(per_sm) +
                           " fit an SM), " +
                           (cluster ? "in pairs (" + std::to_string(pairs_at_once) + " at once), " : std::string()) +
                           std::to_string(rows) + "-row chunks, " + std::to_string(stages) +
                           " stages, " + (tasks > 1 ? std::to_string(tasks) + " tasks of " : std::string()) + std::to_string(steps) + " steps" +
                           (prefetch ? ", weights prefetched" : "") +
                           (how != Handoff::stored ? ", hand-off " + handoff : std::string()) +
                           (tma_store ? (cluster ? ", sent by bulk copies" : ", stored by TMA") : std::string()) + ", " + source + " rows, weights " + weights + ", " +
                           (mma ? "wgmma" : "no products") + "; a step " + std::to_string(median / (steps * tasks)) + " us" +
                           (tasks > 1 ? ", a task " + std::to_string(median / tasks) + " us" : std::string()) + "; " +
                           std::to_string(bytes / sms / (median * 1e3)) + " GB/s an SM" +
                           (o.check && mma ? (cluster ? "; products' sum and tiles received checked"
                                              : tasks > 1 && how != Handoff::none ? "; products' sum and output checked"
                                                                                  : "; products' sum checked")
                                           : ""));
    return 0;
  });
}
