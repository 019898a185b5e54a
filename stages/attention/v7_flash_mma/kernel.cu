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
#include "check.hpp"
#include "attention/flash.cuh"

namespace attention {
namespace {

using namespace flash;

constexpr int kWarps = 4;   // per block
constexpr int kMTiles = 2;  // m16 MMA tiles (16 query rows each) per warp
constexpr int kThreads = kWarps * 32, kWarpRows = 16 * kMTiles, kRows = kWarps * kWarpRows;

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// c += a b for one m16n8k16 tile: a 16x16 row-major (4 regs), b 16x8 column-major (2 regs).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One 64-key tile for one warp of kMTiles x 16 query rows. kRagged: the sequence ends inside
// this tile after `valid` keys; whole 16-key groups past it are skipped (online_softmax masks
// the rest to -inf).
template <bool kRagged>
__device__ __forceinline__ void tile(const uint32_t (&qf)[kMTiles][4][4], const __half* k_s,
                                     const __half* v_s, Rows<kMTiles>& st, int valid, float scale_log2,
                                     int lane) {
  float s[kMTiles][8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;

  // S = Q K^T. ldmatrix.x4 on K rows: matrices (keys +0..7, chunk 2ks), (+0..7, 2ks+1),
  // (+8..15, 2ks), (+8..15, 2ks+1) are the B fragments of two 8-key n-tiles, shared by the
  // warp's m-tiles.
#pragma unroll
  for (int np = 0; np < 4; ++np) {
    if (kRagged && np * 16 >= valid) break;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t b[4];
      const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, smem_addr(k_s + swizzle(key, 2 * ks + ((lane >> 3) & 1))));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma(s[mt][2 * np], qf[mt][ks], b[0], b[1]);
        mma(s[mt][2 * np + 1], qf[mt][ks], b[2], b[3]);
      }
    }
  }

  online_softmax<kMTiles, kRagged>(s, st, valid, scale_log2, lane);

  // O += P V over 16-key steps. P's A fragment for keys 16kk..: n-tiles 2kk and 2kk+1 of S.
  // ldmatrix.x4.trans on V rows: matrices (keys +0..7, chunk 2dp), (+8..15, 2dp),
  // (+0..7, 2dp+1), (+8..15, 2dp+1) are the B fragments of two 8-wide d n-tiles.
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if (kRagged && kk * 16 >= valid) break;
    uint32_t a[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) p_fragment(a[mt], s[mt], kk);
#pragma unroll
    for (int dp = 0; dp < 4; ++dp) {
      uint32_t b[4];
      const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      ldmatrix_x4_trans(b, smem_addr(v_s + swizzle(key, 2 * dp + (lane >> 4))));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma(st.o[mt][2 * dp], a[mt], b[0], b[1]);
        mma(st.o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

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
    if (j == 0) {
      // Q fragments for the 4 k-steps over d, kept in registers for the whole sweep:
      // matrices (rows +0..7, chunk 2ks), (+8..15, 2ks), (+0..7, 2ks+1), (+8..15, 2ks+1).
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          ldmatrix_x4(qf[mt][ks], smem_addr(q_s + swizzle(wrow + 16 * mt + (lane & 15), 2 * ks + (lane >> 4))));
    }
    const int valid = tokens - j * kKeys;
    if (valid >= kKeys)
      tile<false>(qf, k_s[j & 1], v_s[j & 1], st, kKeys, scale_log2, lane);
    else
      tile<true>(qf, k_s[j & 1], v_s[j & 1], st, valid, scale_log2, lane);
  }
  if (!active) return;

  // Normalize, stage the warp's outputs in its own (now unused) Q rows, and write them as
  // whole 128-byte rows.
  store_rows(st, q_s + wrow * kD, head.out, head.width, row0 + wrow, tokens, lane);
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  require_aligned(a, 16, "v7_flash_mma");
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
