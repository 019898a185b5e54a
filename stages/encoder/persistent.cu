// The persistent kernel of e13_persistent (persistent.hpp says what it computes). GEMM items
// are 64 x 96 output tiles on mma.sync m16n8k16 (fp16 in, fp32 accumulators), 8 warps of 16 x 48:
// the item's whole A panel (64 rows x `hidden` columns, fc2 a quarter of its K) is loaded into
// shared memory at once, so a LayerNorm before the GEMM normalizes it there; the weights stream
// through a 6-stage cp.async pipeline. Attention items are 64 query rows of one (image, head):
// Q and every key and value of the head land in shared memory with one wait, and 4 warps run
// the flash tile of v7_flash_mma over them.
#include "attention/flash_mma.cuh"
#include "device/tiles.cuh"
#include "encoder/panel.cuh"
#include "encoder/persistent.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/test_hooks.hpp"
#include "layernorm/layernorm.hpp"

namespace encoder::persistent {

namespace {

using namespace panel;  // the tiles, copies, LayerNorm and epilogues this kernel shares with tiled.cu
constexpr int kBN = 96;       // output tile kBM x kBN
constexpr int kStages = 6;    // weight chunks in flight
constexpr int kMlpRatio = 4;  // fc2's K = 4 hidden: split in 4 slices of `hidden`

struct Params {
  const BlockView* layers;
  int n_layers, rows, tokens, hidden, heads;
  float eps, scale_log2;
  __half *x, *qkv, *attn, *h;
  float* partial;      // [kMlpRatio][rows][hidden]
  unsigned* barrier;   // [count, generation]
  unsigned* counters;  // one per fc2 output tile
#ifdef STUDY_TEST_HOOKS
  bool planted_no_barrier;  // the barrier before the projection left out
#endif
};


// Grid-wide barrier: the last CTA to arrive resets the count and bumps the generation the
// others wait on. Fences make every write before it visible to every read after it.
__device__ void grid_sync(unsigned* barrier) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* generation = barrier + 1;
    const unsigned g = *generation;  // read before arriving: it cannot move until all have
    __threadfence();
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      atomicExch(barrier, 0u);
      __threadfence();
      atomicAdd(barrier + 1, 1u);
    } else {
      while (*generation == g) __nanosleep(20);
    }
    __threadfence();
  }
  __syncthreads();
}

struct Item {
  int m0, n0, slice;
};
__device__ __forceinline__ Item decode(const Gemm& g, int item) {
  const int n_tiles = (g.n + kBN - 1) / kBN;
  const int slice = item % g.splits, tile = item / g.splits;
  return {tile / n_tiles * kBM, tile % n_tiles * kBN, slice};
}

static_assert(kBN % kRowStep == 0, "whole rows per thread");

// An item's weight rows n0.., from the start of its K slice.
__device__ __forceinline__ RowSlab<kBN> weight_rows(const Gemm& g, int hidden, const Item& it) {
  return RowSlab<kBN>(g.w, static_cast<long long>(g.splits) * hidden, it.n0, g.n, it.slice * hidden);
}

// fc2: this CTA's slice of the tile goes to `partial`; the CTA that completes the tile's last
// slice adds the slices in order (so the result does not depend on which one that is), the
// bias and the residual, into x.
__device__ void split_residual(const Params& p, const Gemm& g, const Item& it, const float (&acc)[6][4],
                               int row_base, int col_base, int lane) {
  const long long plane = static_cast<long long>(p.rows) * g.n;
  store_partial<48>(p.partial + it.slice * plane, g, acc, p.rows, row_base, col_base, lane);
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int n_tiles = (g.n + kBN - 1) / kBN;
    unsigned* counter = p.counters + (it.m0 / kBM) * n_tiles + it.n0 / kBN;
    last = atomicAdd(counter, 1u) == static_cast<unsigned>(g.splits - 1);
    if (last) *counter = 0;  // ready for the next block's fc2
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  add_slices<kBN>(p.partial, plane, g, p.rows, it.m0, it.n0);
}

template <Epi kEpi>
__device__ void gemm_item(const Params& p, const Gemm& g, int item, bool prefetched, __half* smem) {
  const Item it = decode(g, item);
  const int hidden = p.hidden, chunks = hidden / kBK;
  __half* a_s = smem;
  __half* w_s = smem + chunks * kTileHalves;
  const RowSlab<kBN> w = weight_rows(g, hidden, it);
  if (!prefetched) prefetch_w<kBN, kStages>(w_s, w, chunks);

  load_panel(a_s, g, it.m0, it.slice, p.rows, hidden, p.eps);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = 16 * (warp & 3), wn = 48 * (warp >> 2);
  float acc[6][4] = {};
  mma_panel<kBN, kStages, 48>(acc, a_s, w_s, w, chunks, wm, wn, lane);

  const int row_base = it.m0 + wm, col_base = it.n0 + wn;
  if constexpr (kEpi == Epi::SplitResidual) {
    split_residual(p, g, it, acc, row_base, col_base, lane);
  } else {
    store_tile<kEpi, 48>(g, acc, p.rows, row_base, col_base, lane);
  }
  __syncthreads();  // the next item reuses the shared memory
}

__device__ __forceinline__ int gemm_items(const Params& p, const Gemm& g) {
  return (p.rows + kBM - 1) / kBM * ((g.n + kBN - 1) / kBN) * g.splits;
}

// One GEMM phase: this CTA's first weights requested, then the barrier (the phase before must
// be complete before A is read), then its items.
template <Epi kEpi>
__device__ void gemm_phase(const Params& p, const Gemm& g, __half* smem, bool sync) {
  const int items = gemm_items(p, g);
  if (blockIdx.x < items)
    prefetch_w<kBN, kStages>(smem + p.hidden / kBK * kTileHalves, weight_rows(g, p.hidden, decode(g, blockIdx.x)),
                             p.hidden / kBK);
  if (sync) grid_sync(p.barrier);
  for (int item = blockIdx.x; item < items; item += gridDim.x)
    gemm_item<kEpi>(p, g, item, item == blockIdx.x, smem);
}

// Attention: item = 64 query rows of one (image, head). Q, K and V of the head in shared
// memory (keys past the sequence zero), then warps 0-3 take 16 rows each.
__device__ void attention_phase(const Params& p, __half* smem) {
  using namespace attention::flash;
  grid_sync(p.barrier);
  const int T = p.tokens, q_blocks = (T + kBM - 1) / kBM, key_tiles = (T + kKeys - 1) / kKeys;
  const int items = p.rows / T * p.heads * q_blocks, width = p.hidden, stride = 3 * p.hidden;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __half* q_s = smem;
  __half* k_s = q_s + kBM * kD;
  __half* v_s = k_s + key_tiles * kKeys * kD;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int qb = item % q_blocks, head = item / q_blocks % p.heads, b = item / q_blocks / p.heads;
    const __half* q = p.qkv + static_cast<long long>(b) * T * stride + head * kD;
    const __half *k = q + width, *v = k + width;
    load_tile<kBM, kThreads>(q_s, q, stride, qb * kBM, T);
    for (int t = 0; t < key_tiles; ++t) {
      load_tile<kKeys, kThreads>(k_s + t * kKeys * kD, k, stride, t * kKeys, T);
      load_tile<kKeys, kThreads>(v_s + t * kKeys * kD, v, stride, t * kKeys, T);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    const int row0 = qb * kBM + 16 * warp;
    if (warp < 4 && row0 < T) {
      uint32_t qf[1][4][4];
      load_q_fragments<1>(qf, q_s, 16 * warp, lane);
      Rows<1> st;
      st.init();
      for (int t = 0; t < key_tiles; ++t) {
        const int valid = T - t * kKeys;
        if (valid >= kKeys)
          mma_tile<1, false>(qf, k_s + t * kKeys * kD, v_s + t * kKeys * kD, st, kKeys, p.scale_log2, lane);
        else
          mma_tile<1, true>(qf, k_s + t * kKeys * kD, v_s + t * kKeys * kD, st, valid, p.scale_log2, lane);
      }
      // The warp's Q rows become its output staging: every lane's ldmatrix of them (lanes read
      // rows other lanes write) must be done first. v7_flash_mma has a __syncthreads between the
      // two in its key loop; here all keys are in shared memory and nothing else orders them.
      __syncwarp();
      store_rows(st, q_s + 16 * warp * kD, p.attn + static_cast<long long>(b) * T * width + head * kD, width, row0,
                 T, lane);
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads, 1) blocks_kernel(Params p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);
  const int D = p.hidden;
  for (int l = 0; l < p.n_layers; ++l) {
    const BlockView w = p.layers[l];
    gemm_phase<Epi::Bias>(p, {p.x, D, w.qkv_w, w.qkv_b, w.ln1_g, w.ln1_b, 3 * D, 1, p.qkv, 3 * D}, smem, l > 0);
    attention_phase(p, smem);
#ifdef STUDY_TEST_HOOKS
    const bool attention_barrier = !p.planted_no_barrier;
#else
    constexpr bool attention_barrier = true;
#endif
    gemm_phase<Epi::BiasResidual>(p, {p.attn, D, w.proj_w, w.proj_b, nullptr, nullptr, D, 1, p.x, D}, smem,
                                  attention_barrier);
    gemm_phase<Epi::BiasGelu>(p, {p.x, D, w.fc1_w, w.fc1_b, w.ln2_g, w.ln2_b, kMlpRatio * D, 1, p.h, kMlpRatio * D},
                              smem, true);
    gemm_phase<Epi::SplitResidual>(
        p, {p.h, kMlpRatio * D, w.fc2_w, w.fc2_b, nullptr, nullptr, D, kMlpRatio, p.x, D}, smem, true);
  }
}

std::size_t smem_bytes(const Problem& p) { return panel::smem_bytes(p.model.hidden, p.tokens(), kBN, kStages); }

int m_tiles(int rows) { return (rows + kBM - 1) / kBM; }
int fc2_tiles(const Problem& p) { return (p.model.hidden + kBN - 1) / kBN; }

}  // namespace

std::string unavailable() {
  int device = 0, cooperative = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (!cooperative) return "the GPU has no cooperative launch (every CTA of the grid resident at once)";
  return {};
}

std::string refuses(const Problem& p, int batch) {
  const int D = p.model.hidden;
  if (auto why = refuses_shape(p); !why.empty()) return why;
  if (p.tokens() > kMaxTokens)
    return std::to_string(p.tokens()) + " tokens: every key of a head must fit in shared memory (at most " +
           std::to_string(kMaxTokens) + ")";
  if (static_cast<long long>(batch) * p.tokens() * kMlpRatio * D >= (1LL << 31)) return "the batch overflows 32-bit indexing";
  return {};
}

std::size_t Blocks::scratch_bytes(const Problem& p, int batch) {
  const long long rows = static_cast<long long>(batch) * p.tokens();
  return sizeof(float) * kMlpRatio * rows * p.model.hidden + sizeof(unsigned) * (2 + m_tiles(rows) * fc2_tiles(p)) +
         sizeof(BlockView) * p.model.layers;
}

Blocks::Blocks(const Problem& p, int batch, const std::vector<BlockView>& blocks)
    : p_(p), rows_(batch * p.tokens()), smem_(smem_bytes(p)) {
  if (auto why = refuses(p, batch); !why.empty()) throw study::StudyError(study::ErrorKind::Usage, "e13_persistent: " + why);
  CUDA_CHECK(cudaFuncSetAttribute(blocks_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_)));
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, blocks_kernel, kThreads, smem_));
  if (per_sm < 1)
    throw study::StudyError(study::ErrorKind::Usage, "e13_persistent: a CTA with " + std::to_string(smem_) +
                                                         " bytes of shared memory does not fit on an SM");
  grid_ = sms;  // one CTA per SM: every phase's items are dealt out over all of them
  layers_ = study::DeviceBuffer<BlockView>(blocks.size());
  CUDA_CHECK(cudaMemcpy(layers_.get(), blocks.data(), layers_.bytes(), cudaMemcpyHostToDevice));
  partial_ = study::DeviceBuffer<float>(static_cast<std::size_t>(kMlpRatio) * rows_ * p.model.hidden);
  sync_ = study::DeviceBuffer<unsigned>(2 + static_cast<std::size_t>(m_tiles(rows_)) * fc2_tiles(p));
  CUDA_CHECK(cudaMemset(sync_.get(), 0, sync_.bytes()));  // every counter returns to 0 by itself
  CUDA_CHECK(cudaDeviceSynchronize());
}

void Blocks::poison_scratch() { study::poison(partial_); }

void Blocks::run(__half* x, __half* qkv, __half* attn, __half* h, cudaStream_t s) const {
  Params prm{};
  set_forward(prm, p_, layers_.get(), rows_, x, attn, h);
  prm.qkv = qkv;
  prm.partial = partial_.get();
  prm.barrier = sync_.get();
  prm.counters = sync_.get() + 2;
#ifdef STUDY_TEST_HOOKS
  prm.planted_no_barrier = study::planted("persistent_no_barrier");
#endif
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid_);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem_;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // all CTAs resident: the grid barrier needs them
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, blocks_kernel, prm));
}

}  // namespace encoder::persistent
