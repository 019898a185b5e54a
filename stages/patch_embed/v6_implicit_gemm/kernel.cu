// v6_implicit_gemm: the whole patch embedding in one kernel, as an implicit GEMM on mma.sync
// tensor cores. The loader (tiles read straight from the NCHW image) and the token-row
// epilogue are in implicit_gemm.cuh, shared with v7_implicit_wgmma; this file is the main loop.
//
// A block computes a 128 x kBN tile of Y (kBN = 128, or 64 when hidden is not a multiple of
// 128) with 8 warps, each a 64 x 32 (or 32 x 32) sub-tile of m16n8k16 MMAs (fp16 in, fp32
// accumulators) fed by ldmatrix.x4 from the swizzled shared-memory rows. K = 768 runs as 12
// tiles of 64 through a 3-stage cp.async pipeline (one barrier per tile). The epilogue stages
// the fp32 accumulators in shared memory for the shared token-row store.
#include "patch_embed/implicit_gemm.cuh"

namespace patch_embed {
namespace {

using namespace implicit_gemm;
constexpr int kStages = 3;  // cp.async pipeline depth

// Warp grid of a tile shape. kBN = 128: 2 x 4 warps of 64 x 32; kBN = 64: 4 x 2 warps of 32 x 32.
template <int kBN>
struct Warps {
  static constexpr int kN = kBN / 32;
  static constexpr int kM = kThreads / 32 / kN;
  static constexpr int kWM = kBM / kM;  // warp tile rows
  static constexpr int kMT = kWM / 16;  // m16 MMA tiles per warp
  static constexpr int kNT = 4;         // n8 MMA tiles per warp (32 columns)
  static_assert(kM * kN * 32 == kThreads && kWM % 16 == 0, "warp grid");
};

using study::tiles::ldmatrix_x4;
using study::tiles::mma;

// Two blocks per SM (2 x 96 KB of shared memory), so one block's pipeline fill and epilogue
// overlap the other's main loop: at most 128 registers per thread.
template <int kBN>
__global__ void __launch_bounds__(kThreads, 2) kernel(const Params p) {
  using W = Warps<kBN>;
  using T = Smem<kBN, kStages>;
  extern __shared__ __align__(1024) unsigned char smem[];
  __half* const pipe = reinterpret_cast<__half*>(smem);  // per stage: A [128][64], then B [kBN][64]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = tile_m0(p), n0 = tile_n0<kBN>(p);
  const TileLoader<kBN> loader(p, m0, n0, tid);
  auto load_tile = [&](int kt, int stage) {
    __half* a_dst = pipe + stage * T::kStageHalves;
    loader.load(kt, a_dst, a_dst + kBM * kBK);
  };

  // ---- Main loop: 12 K tiles, 3 stages, one barrier per tile. ----
  const int wm0 = (warp / W::kN) * W::kWM, wn0 = (warp % W::kN) * 32;
  float acc[W::kMT][W::kNT][4];
#pragma unroll
  for (int mt = 0; mt < W::kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < W::kNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;

  // ldmatrix.x4 lane addresses. A (m16 x k16 at rows r0.., k-chunks 2ks, 2ks+1): matrices
  // (rows +0..7, chunk 2ks), (+8..15, 2ks), (+0..7, 2ks+1), (+8..15, 2ks+1) = a0..a3.
  // B (W rows = n, k-major): matrices (n +0..7, 2ks), (+0..7, 2ks+1), (+8..15, 2ks),
  // (+8..15, 2ks+1) = the (b0, b1) pairs of two n8 tiles.
  const int a_row = wm0 + (lane & 15), a_hi = lane >> 4;
  const int b_row = wn0 + (lane & 7) + ((lane >> 4) << 3), b_hi = (lane >> 3) & 1;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    load_tile(s, s);
    cp_async_commit();
  }

  int stage = 0;
#pragma unroll 1
  for (int kt = 0; kt < kKTiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread)
    __syncthreads();               // ... for every thread; tile kt-1's stage is free again
    if (kt + kStages - 1 < kKTiles) {
      const int next = stage == 0 ? kStages - 1 : stage - 1;  // (kt + 2) % 3
      load_tile(kt + kStages - 1, next);
    }
    cp_async_commit();  // possibly empty: keeps the group count uniform for the wait above

    const __half* a_s = pipe + stage * T::kStageHalves;
    const __half* b_s = a_s + kBM * kBK;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t af[W::kMT][4], bf[W::kNT / 2][4];
#pragma unroll
      for (int mt = 0; mt < W::kMT; ++mt) ldmatrix_x4(af[mt], smem_addr(a_s + swizzle(a_row + 16 * mt, 2 * ks + a_hi)));
#pragma unroll
      for (int np = 0; np < W::kNT / 2; ++np)
        ldmatrix_x4(bf[np], smem_addr(b_s + swizzle(b_row + 16 * np, 2 * ks + b_hi)));
#pragma unroll
      for (int mt = 0; mt < W::kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < W::kNT; ++nt) mma(acc[mt][nt], af[mt], bf[nt / 2][2 * (nt % 2)], bf[nt / 2][2 * (nt % 2) + 1]);
    }
    stage = stage == kStages - 1 ? 0 : stage + 1;
  }

  // ---- Epilogue: fp32 tile through shared memory, then 16-byte token-row stores. ----
  cp_async_wait<0>();
  __syncthreads();  // every warp is done reading the pipeline stages
  float* const cs = reinterpret_cast<float*>(smem);  // [128][kLd]
  {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mt = 0; mt < W::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < W::kNT; ++nt) {
        float* c = cs + (wm0 + 16 * mt + g) * T::kLd + wn0 + 8 * nt + 2 * q;
        *reinterpret_cast<float2*>(c) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(c + 8 * T::kLd) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
  }
  __syncthreads();

  store_token_rows<kBN>(p, cs, m0, n0, tid);
}

std::string supports(const Problem& p) {
  if (auto why = check_common(p); !why.empty()) return why;
  return implicit_gemm::supports(p.batch, p.image_size, p.hidden);
}

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  const Params p = make_params("v6_implicit_gemm", pr, a);
  if (p.hidden % 128 == 0)
    launch_tiles<128, kernel<128>, Smem<128, kStages>::kBytes>(p, stream);
  else
    launch_tiles<64, kernel<64>, Smem<64, kStages>::kBytes>(p, stream);
}

}  // namespace

extern const Version v6_implicit_gemm = study::make_version<Version>("v6_implicit_gemm", supports, launch);

}  // namespace patch_embed
