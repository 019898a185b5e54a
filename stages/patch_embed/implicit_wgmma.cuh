// The wgmma main loop of the implicit-GEMM patch embeddings (v7_implicit_wgmma,
// v8_balanced_tiles, v9_pos_first, v10_round_tiles): implicit_gemm.cuh's loader and token-row epilogue around
// Hopper's warpgroup MMA, for a 128 x kBN block tile (kBN = 128, 96 or 64). The versions differ
// in which kBN a shape gets and in the order of the epilogue's reads.
//
// The 8 warps are 2 warpgroups; warpgroup g owns rows 64 g..64 g + 63 of the block's 128 x kBN
// tile and issues, per 64-wide K tile, 4 wgmma m64nkBNk16 that read A and B from shared memory
// through descriptors (the swizzled rows v6 fed to ldmatrix are exactly wgmma's 128-byte
// swizzle layout): no ldmatrix, no per-warp fragment traffic through registers, and the
// tensor cores run asynchronously from the issuing threads.
//
// Pipeline: kStages shared-memory stages, tiles loaded kAhead tiles ahead by cp.async, and
// kInFlight wgmma groups left running across the barrier. A stage is reused only when no
// wgmma can still read it: tiles kt - kInFlight .. kt + kAhead occupy distinct stages, so
// kAhead + kInFlight + 1 <= kStages.
#pragma once
#include <string>
#include "device/sm90.cuh"
#include "harness/gpu.hpp"
#include "patch_embed/implicit_gemm.cuh"
#include "patch_embed/n_tile.hpp"

namespace patch_embed::implicit_wgmma {
namespace {

using namespace implicit_gemm;

// kStages x 32 KB of pipeline (kBN = 128). 3 stages with no wgmma group across the barrier
// keep 2 blocks per SM (96 KB each), so one block's epilogue overlaps the other's main loop.
constexpr int kStages = 3;
constexpr int kInFlight = 0;
constexpr int kAhead = kStages - 1 - kInFlight;
constexpr int kBlocksPerSm = kStages * (kBM + 128) * kBK * 2 <= 114 * 1024 ? 2 : 1;
static_assert(kAhead >= 1, "at least one tile in flight");

#ifdef STUDY_WGMMA
// One warpgroup's d += A B, m64 x kBN x k16 (kBN / 2 accumulators per thread).
template <int kBN>
__device__ __forceinline__ void wgmma_step(float (&d)[kBN / 2], uint64_t a, uint64_t b) {
  static_assert(kBN == 128 || kBN == 96 || kBN == 64, "the N tiles sm90.cuh has");
  if constexpr (kBN == 128)
    sm90::wgmma_ss_n128(d, a, b, 1);
  else if constexpr (kBN == 96)
    sm90::wgmma_ss_n96(d, a, b, 1);
  else
    sm90::wgmma_ss_n64(d, a, b, 1);
}
#endif

// kPosFirst: the epilogue's position-embedding reads all issued before its stores
// (store_token_rows).
template <int kBN, bool kPosFirst>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) kernel(const Params p) {
#ifdef STUDY_WGMMA
  using T = Smem<kBN, kStages>;
  extern __shared__ unsigned char smem_raw[];
  // The swizzle (and so the descriptors) key on address bits: 1024-byte-aligned stages.
  unsigned char* const smem = smem_raw + ((1024 - (sm90::shared_addr(smem_raw) & 1023)) & 1023);
  __half* const pipe = reinterpret_cast<__half*>(smem);  // per stage: A [128][64], then B [kBN][64]

  const int tid = threadIdx.x, lane = tid % 32;
  // Warp-uniform by construction (ptxas serializes wgmma under a branch it cannot prove uniform).
  const int group = __shfl_sync(0xffffffffu, tid / 128, 0), warp = (tid % 128) / 32;
  const int m0 = tile_m0(p), n0 = tile_n0<kBN>(p);
  const TileLoader<kBN> loader(p, m0, n0, tid);
  auto load_tile = [&](int kt) {
    __half* a_dst = pipe + (kt % kStages) * T::kStageHalves;
    loader.load(kt, a_dst, a_dst + kBM * kBK);
  };

  float acc[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.f;

#pragma unroll
  for (int kt = 0; kt < kAhead; ++kt) {
    load_tile(kt);
    cp_async_commit();
  }
#pragma unroll 1
  for (int kt = 0; kt < kKTiles; ++kt) {
    cp_async_wait<kAhead - 1>();  // tile kt has landed (this thread's chunks)
    sm90::fence_proxy_async();    // ... and is visible to the async proxy wgmma reads through
    __syncthreads();              // ... for every thread; every warpgroup waited for tile kt - 1 - kInFlight
    if (kt + kAhead < kKTiles) load_tile(kt + kAhead);
    cp_async_commit();  // possibly empty: keeps the group count uniform for the wait above

    const uint32_t a = smem_addr(pipe + (kt % kStages) * T::kStageHalves);
    const uint64_t a_desc = sm90::tile_desc(a + group * 64 * kBK * 2), b_desc = sm90::tile_desc(a + kBM * kBK * 2);
    sm90::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks)  // +32 bytes along the swizzled rows per k16 step
      wgmma_step<kBN>(acc, a_desc + 2 * ks, b_desc + 2 * ks);
    sm90::wgmma_commit();
    sm90::wgmma_wait<kInFlight>();
  }
  sm90::wgmma_wait<0>();
  sm90::reg_fence(acc);

  // ---- Epilogue: fp32 tile through shared memory, then the shared token-row store. ----
  cp_async_wait<0>();
  __syncthreads();  // every warpgroup is done reading the pipeline stages
  float* const cs = reinterpret_cast<float*>(smem);  // [128][kLd]
  // wgmma m64nN accumulators, per warp: rows 16 warp + lane / 4 (+8), columns
  // 8 j + 2 (lane % 4) + {0, 1} in registers 4 j + {0, 1} (+2 for the row + 8).
  const int row = group * 64 + warp * 16 + lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    float* c = cs + row * T::kLd + 8 * j + col;
    *reinterpret_cast<float2*>(c) = make_float2(acc[4 * j], acc[4 * j + 1]);
    *reinterpret_cast<float2*>(c + 8 * T::kLd) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
  }
  __syncthreads();
  store_token_rows<kBN, kPosFirst>(p, cs, m0, n0, tid);
#else
  __trap();  // built without sm_90a: supports() refuses before a launch gets here
#endif
}

// + 1024: the kernel aligns the stages up to the next 1024 bytes.
template <int kBN>
constexpr int kSmemBytes = Smem<kBN, kStages>::kBytes + 1024;

// Shapes both versions take (every hidden size a multiple of 64), on Hopper.
inline std::string supports(const Problem& p) {
  if (auto why = check_common(p); !why.empty()) return why;
  if (auto why = implicit_gemm::supports(p.batch, p.image_size, p.hidden); !why.empty()) return why;
  return sm90::wgmma_unavailable();
}

// The call's parameters after the Hopper, shape and pointer checks (StudyError(Usage) naming
// `version`).
inline Params checked_params(const char* version, const Problem& pr, const Args& a) {
  if (auto why = sm90::wgmma_unavailable(); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, std::string(version) + ": " + why);
  return make_params(version, pr, a);
}

template <int kBN, bool kPosFirst = false>
void launch(const Params& p, cudaStream_t stream) {
  launch_tiles<kBN, kernel<kBN, kPosFirst>, kSmemBytes<kBN>>(p, stream);
}

// The launch at a given N tile (128, 96 or 64, dividing hidden), else StudyError(Usage)
// naming `version`.
template <bool kPosFirst>
void launch_n_tile(const char* version, int n_tile, const Params& p, cudaStream_t stream) {
  if (n_tile != 128 && n_tile != 96 && n_tile != 64)
    throw study::StudyError(study::ErrorKind::Usage,
                            std::string(version) + ": no " + std::to_string(n_tile) + "-wide N tile (128, 96 or 64)");
  if (p.hidden % n_tile)
    throw study::StudyError(study::ErrorKind::Usage, std::string(version) + ": hidden " + std::to_string(p.hidden) +
                                                         " is not a multiple of the N tile " + std::to_string(n_tile));
  if (n_tile == 128)
    launch<128, kPosFirst>(p, stream);
  else if (n_tile == 96)
    launch<96, kPosFirst>(p, stream);
  else
    launch<64, kPosFirst>(p, stream);
}

// v8_balanced_tiles, v9_pos_first and v10_round_tiles: the N tile picked per shape by `pick`
// (balanced_tiles::pick or pick_by_rounds), or forced (n_tile > 0, the GPU suite's
// launch_v*_with_n_tile).
using TilePick = int (*)(long long m_tiles, int hidden, int sms);
template <bool kPosFirst>
void launch_balanced(const char* version, const Problem& pr, const Args& a, cudaStream_t stream, int n_tile = 0,
                     TilePick pick = balanced_tiles::pick) {
  const Params p = checked_params(version, pr, a);
  if (n_tile <= 0) n_tile = pick(m_tiles(p), p.hidden, study::sm_count());
  launch_n_tile<kPosFirst>(version, n_tile, p, stream);
}

// The record of a Hopper-only version of this kernel.
inline Version version_record(const char* name, void (*launch)(const Problem&, const Args&, cudaStream_t)) {
  Version v = study::make_version<Version>(name, supports, launch);
  v.unavailable = sm90::wgmma_unavailable;
  return v;
}

}  // namespace
}  // namespace patch_embed::implicit_wgmma
