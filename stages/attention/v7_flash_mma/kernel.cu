// v7_flash_mma: flash-attention-style forward on mma.sync tensor cores (any GPU since Ampere;
// v7_flash runs the same algorithm on Hopper's wgmma).
//
// A block owns 128 query rows of one (batch, head): 4 warps of 32 rows, two m16 MMA tiles per
// warp, so every K/V fragment loaded from shared memory feeds two MMAs. The block streams the
// head's keys and values through shared memory in tiles of 64, double-buffered with cp.async
// (tile j+1 loads while tile j is computed). Per tile and warp: S = Q K^T with m16n8k16 MMAs
// (fp16 in, fp32 accumulators), an online softmax on the accumulators in registers (running
// row max and sum), P converted in registers into the A operand of O += P V (the accumulator
// layout of m16n8 matches the A fragment layout of m16n8k16), and nothing of size tokens^2
// anywhere. Fragments come from shared memory through ldmatrix (.trans for V); the 128-byte
// rows are XOR-swizzled in 16-byte chunks so the 8 rows an ldmatrix phase reads hit 8 bank
// groups. 4 warps x 2 m-tiles and lazy rescaling were the fastest of the variants measured
// (NOTES.md).
#include <cstdint>
#include "attention/attention.hpp"
#include "attention/flash_mma.cuh"
#include "harness/check.hpp"

namespace attention {
namespace {

using namespace flash;

constexpr int kWarps = 4;   // per block
constexpr int kMTiles = 2;  // m16 MMA tiles (16 query rows each) per warp
constexpr int kThreads = kWarps * 32, kWarpRows = 16 * kMTiles, kRows = kWarps * kWarpRows;

// Two blocks per SM: ~250 registers per thread hold O, S and Q of two m-tiles.
__global__ void __launch_bounds__(kThreads, 2)
kernel(const __half* __restrict__ qkv, __half* __restrict__ out, int tokens, int heads, float scale_log2) {
  __shared__ __align__(128) __half q_s[kRows * kD];  // later the warps' output staging
  __shared__ __align__(128) __half k_s[2][kKeys * kD];
  __shared__ __align__(128) __half v_s[2][kKeys * kD];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const HeadView head(qkv, out, tokens, heads);
  const int stride = head.stride;
  const __half *q_g = head.q, *k_g = head.k, *v_g = head.v;
  const int row0 = blockIdx.x * kRows;
  const int tiles = (tokens + kKeys - 1) / kKeys;

  load_tile<kRows, kThreads>(q_s, q_g, stride, row0, tokens);
  load_tile<kKeys, kThreads>(k_s[0], k_g, stride, 0, tokens);
  load_tile<kKeys, kThreads>(v_s[0], v_g, stride, 0, tokens);
  cp_async_commit();

  // A warp past the sequence end computes nothing but still loads and meets the barriers.
  const int wrow = warp * kWarpRows;
  const bool active = row0 + wrow < tokens;
  uint32_t qf[kMTiles][4][4];
  Rows<kMTiles> st;
  st.init();

  for (int j = 0; j < tiles; ++j) {
    cp_async_wait<0>();
    __syncthreads();  // tile j has landed for every thread; tile j-1's buffer is free
    if (j + 1 < tiles) {
      load_tile<kKeys, kThreads>(k_s[(j + 1) & 1], k_g, stride, (j + 1) * kKeys, tokens);
      load_tile<kKeys, kThreads>(v_s[(j + 1) & 1], v_g, stride, (j + 1) * kKeys, tokens);
      cp_async_commit();
    }
    if (!active) continue;
    if (j == 0) load_q_fragments(qf, q_s, wrow, lane);  // kept in registers for the whole sweep
    const int valid = tokens - j * kKeys;
    if (valid >= kKeys)
      mma_tile<kMTiles, false>(qf, k_s[j & 1], v_s[j & 1], st, kKeys, scale_log2, lane);
    else
      mma_tile<kMTiles, true>(qf, k_s[j & 1], v_s[j & 1], st, valid, scale_log2, lane);
  }
  if (!active) return;

  // Normalize, stage the warp's outputs in its own (now unused) Q rows, and write them as
  // whole 128-byte rows.
  store_rows(st, q_s + wrow * kD, head.out, head.width, row0 + wrow, tokens, lane);
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  require_aligned(a.qkv, a.out, 16, "v7_flash_mma");
  static const bool configured = [] {  // as much shared memory per SM as there can be blocks
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const dim3 grid = head_grid(p.tokens, p.heads, p.batch, kRows);
  kernel<<<grid, kThreads, 0, stream>>>(a.qkv, a.out, p.tokens, p.heads, scale_log2());
  LAUNCH_CHECK();
}

}  // namespace

extern const Version v7_flash_mma{"v7_flash_mma", check_tiled, launch};

}  // namespace attention
