// The parts of the implicit-GEMM patch embeddings (v6_implicit_gemm on mma.sync,
// v7_implicit_wgmma on wgmma) that do not depend on the tensor-core instruction: the loader that
// reads GEMM tiles straight from the NCHW image, the token-row epilogue, and the host-side
// checks and launch parameters. Each version's kernel.cu adds its main loop.
//
// Since stride = kernel = 16, the convolution is exactly the GEMM
//   Y[m, n] = sum_k A[m, k] W[n, k],   m = b * P + p (P patches per image), k = c * 256 + ky * 16 + kx,
// with A[m, k] = images[b, c, py * 16 + ky, px * 16 + kx] (p = py * side + px) and W the conv
// weight read as row-major [hidden, 768]. A block computes a 128 x kBN tile of Y; K = 768 runs
// as 12 tiles of 64, each tile row one 128-byte shared-memory row, XOR-swizzled in 16-byte
// chunks (chunk ^ row % 8): the layout ldmatrix reads without bank conflicts and the layout
// wgmma's 128-byte-swizzle descriptors describe, given a 1024-byte-aligned tile.
#pragma once
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include "device/tiles.cuh"
#include "harness/check.hpp"
#include "harness/vit_config.hpp"
#include "patch_embed/patch_embed.hpp"

namespace patch_embed::implicit_gemm {

constexpr int kPatch = study::kPatch;                   // 16
constexpr int kK = study::kChannels * kPatch * kPatch;  // 768
constexpr int kBM = 128;                                // block tile rows (patches)
constexpr int kBK = 64;                                 // K tile: one 128-byte smem row
constexpr int kKTiles = kK / kBK;                       // 12
constexpr int kThreads = 256;                           // 8 warps (2 warpgroups)
constexpr int kChunks = kBK / 8;                        // 16-byte chunks per tile row
constexpr int kLoadRows = kThreads / kChunks;           // tile rows one load pass covers
static_assert(kK % kBK == 0 && kBK == 64, "the swizzle assumes 128-byte tile rows");
static_assert(kBM % kLoadRows == 0, "every thread loads the same number of A chunks");

// Shared memory of a block: kStages pipeline stages of A [128][64] then B [kBN][64], reused
// after the main loop as the fp32 staging tile [128][kLd] of the epilogue.
template <int kBN, int kStages>
struct Smem {
  static constexpr int kStageHalves = (kBM + kBN) * kBK;
  static constexpr int kPipeBytes = kStages * kStageHalves * 2;
  static constexpr int kLd = kBN + 8;  // fp32 staging row stride: 8 (mod 32) words, conflict free
  static constexpr int kStagingBytes = kBM * kLd * 4;
  static constexpr int kBytes = kPipeBytes > kStagingBytes ? kPipeBytes : kStagingBytes;
  static_assert(kBN % kLoadRows == 0, "every thread loads the same number of B chunks");
  static_assert((kBM * kBK * 2) % 1024 == 0 && (kStageHalves * 2) % 1024 == 0,
                "tiles stay 1024-byte aligned (the swizzle's period)");
};

struct Params {
  const __half* images;
  const __half* w;
  const __half* bias;
  const __half* cls;
  const __half* pos;
  __half* out;
  int rows;     // M = batch * patches
  int patches;  // P = side^2
  int side;     // S / 16
  int size;     // S
  int hidden;   // N
  int n_tiles;  // hidden / kBN
};

using study::tiles::cp_async16;
using study::tiles::cp_async_commit;
using study::tiles::cp_async_wait;
using study::tiles::smem_addr;
using study::tiles::swizzle;
static_assert(kBK == study::tiles::kRowHalves, "a K tile row is one swizzled 128-byte row");

// 8 halves as one 16-byte vector.
union Half8 {
  uint4 u;
  __half2 h[4];
};

// Block tile origin: the n tile index runs fastest over the 1-D grid, so the hidden / kBN
// blocks sharing an A tile run together and the image is read from DRAM about once.
__device__ __forceinline__ int tile_m0(const Params& p) { return (blockIdx.x / p.n_tiles) * kBM; }
template <int kBN>
__device__ __forceinline__ int tile_n0(const Params& p) { return (blockIdx.x % p.n_tiles) * kBN; }

// The loader: thread tid moves chunk j = tid % 8 of tile rows tid / 8 + 32 i of A and B. A
// 64-wide K tile of one A row is 4 consecutive patch rows ky of one channel, each 16 pixels =
// 32 contiguous bytes = two chunks; consecutive GEMM rows are neighbouring patches, so a warp's
// chunks cover whole 128-byte image row segments. Rows past M are zero-filled.
template <int kBN>
struct TileLoader {
  static constexpr int kARows = kBM / kLoadRows, kBRows = kBN / kLoadRows;
  const __half* a_src[kARows];
  bool a_ok[kARows];
  const __half* b_src;
  int dst0, size;

  __device__ TileLoader(const Params& p, int m0, int n0, int tid) : size(p.size) {
    const int j = tid % kChunks, lrow = tid / kChunks;
    // Chunk j of a 64-wide K tile: patch row ky = 4 (kt % 4) + j / 2, pixels 8 (j % 2)..+7.
    const int chunk_off = (j >> 1) * size + (j & 1) * 8;
#pragma unroll
    for (int i = 0; i < kARows; ++i) {
      const int m = m0 + lrow + i * kLoadRows;
      a_ok[i] = m < p.rows;
      const int mm = a_ok[i] ? m : 0;  // rows past M: a valid address, zero-filled
      const int b = mm / p.patches, pp = mm - b * p.patches;
      const int py = pp / p.side, px = pp - py * p.side;
      a_src[i] = p.images + (static_cast<size_t>(b) * study::kChannels * size + py * kPatch) * size +
                 px * kPatch + chunk_off;
    }
    b_src = p.w + static_cast<size_t>(n0 + lrow) * kK + j * 8;
    dst0 = swizzle(lrow, j);  // lrow + 32 i keeps the same row % 8
  }

  // K tile kt (channel kt / 4, patch rows 4 (kt % 4)..+3) into a_dst [128][64], b_dst [kBN][64].
  __device__ __forceinline__ void load(int kt, __half* a_dst, __half* b_dst) const {
    const int koff = (kt >> 2) * size * size + (kt & 3) * 4 * size;
#pragma unroll
    for (int i = 0; i < kARows; ++i)
      cp_async16(smem_addr(a_dst + dst0 + i * kLoadRows * kBK), a_src[i] + koff, a_ok[i]);
#pragma unroll
    for (int i = 0; i < kBRows; ++i)
      cp_async16(smem_addr(b_dst + dst0 + i * kLoadRows * kBK), b_src + i * kLoadRows * kK + kt * kBK, true);
  }
};

// The epilogue after the fp32 tile is staged in shared memory cs [128][kLd] (kLd = kBN + 8):
// each thread writes whole 16-byte pieces of token rows, acc + conv bias + position embedding
// rounded once to fp16, at row b * tokens + 1 + p. The block holding an image's first patch
// (p = 0) also writes that image's cls row (cls_token + pos_embed[0]) for its columns: every
// cls row is written exactly once per column tile.
//
// A thread handles rows r0, r0 + kRows, ... of the tile. kPosFirst = false reads each row's
// position embedding just before its store, one L2 round trip per row in sequence (v6, v7,
// v8); true reads all of the thread's position-embedding pieces first, so that their round
// trips overlap, then stores (v9).
template <int kBN, bool kPosFirst = false>
__device__ __forceinline__ void store_token_rows(const Params& p, const float* cs, int m0, int n0, int tid) {
  constexpr int kLd = kBN + 8, kRowChunks = kBN / 8, kRows = kThreads / kRowChunks;
  constexpr int kRowsPerThread = (kBM + kRows - 1) / kRows;
  // A 96-wide tile has 12 pieces per row: 21 rows per pass, and the last 4 threads sit out.
  if (tid >= kRows * kRowChunks) return;
  const int c = tid % kRowChunks, n = n0 + 8 * c, r0 = tid / kRowChunks;
  float bias[8];
  {
    Half8 v;
    v.u = __ldg(reinterpret_cast<const uint4*>(p.bias + n));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(v.h[i]);
      bias[2 * i] = f.x;
      bias[2 * i + 1] = f.y;
    }
  }
  // The two float4 reads of a row piece, first the one at 4 s: with s = (c / 4) % 2 the 8
  // lanes of a 128-bit shared-memory phase hit 8 different 4-bank groups.
  const int s = (c >> 2) & 1;
  auto pos_piece = [&](int m) {  // 8 halves of patch m's position-embedding row
    const int pp = m % p.patches;
    return __ldg(reinterpret_cast<const uint4*>(p.pos + static_cast<size_t>(1 + pp) * p.hidden + n));
  };
  auto store_row = [&](int r, uint4 pos_bits) {
    const int m = m0 + r;
    const int b = m / p.patches, pp = m - b * p.patches;
    const float* src = cs + r * kLd + 8 * c;
    const float4 x = *reinterpret_cast<const float4*>(src + 4 * s);
    const float4 y = *reinterpret_cast<const float4*>(src + 4 - 4 * s);
    const float4 lo = s ? y : x, hi = s ? x : y;
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    Half8 pos, o;
    pos.u = pos_bits;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 e = __half22float2(pos.h[i]);
      o.h[i] = __floats2half2_rn(v[2 * i] + bias[2 * i] + e.x, v[2 * i + 1] + bias[2 * i + 1] + e.y);
    }
    // Token row of patch pp of image b: b * tokens + 1 + pp = m + b + 1.
    *reinterpret_cast<uint4*>(p.out + static_cast<size_t>(m + b + 1) * p.hidden + n) = o.u;
    if (pp == 0) {  // this block holds image b's first patch: its cls row b * tokens = m + b
      Half8 cls, pos0, t;
      cls.u = __ldg(reinterpret_cast<const uint4*>(p.cls + n));
      pos0.u = __ldg(reinterpret_cast<const uint4*>(p.pos + n));
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = __half22float2(cls.h[i]), e = __half22float2(pos0.h[i]);
        t.h[i] = __floats2half2_rn(a.x + e.x, a.y + e.y);
      }
      *reinterpret_cast<uint4*>(p.out + static_cast<size_t>(m + b) * p.hidden + n) = t.u;
    }
  };
  if constexpr (kPosFirst) {
    uint4 pos[kRowsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int r = r0 + i * kRows;
      if (r < kBM && m0 + r < p.rows) pos[i] = pos_piece(m0 + r);
    }
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int r = r0 + i * kRows;
      if (r < kBM && m0 + r < p.rows) store_row(r, pos[i]);
    }
  } else {
#pragma unroll 1
    for (int r = r0; r < kBM; r += kRows) {
      if (m0 + r >= p.rows) break;
      store_row(r, pos_piece(m0 + r));
    }
  }
}

// Shapes both kernels take: S a positive multiple of 16, hidden a positive multiple of 64 (the
// narrowest N tile), 32-bit indices inside the kernel.
inline std::string supports(int batch, int image_size, int hidden) {
  if (batch <= 0) return "batch " + std::to_string(batch) + " is not positive";
  if (image_size <= 0 || image_size % kPatch)
    return "image size " + std::to_string(image_size) + " is not a positive multiple of the patch size 16";
  if (hidden <= 0 || hidden % 64)
    return "hidden " + std::to_string(hidden) + " is not a positive multiple of 64 (the kernel's narrowest N tile)";
  const long long side = image_size / kPatch, patches = side * side;
  if (3LL * image_size * image_size > INT_MAX)
    return "image size " + std::to_string(image_size) + " is too large for 32-bit offsets within one image";
  if (static_cast<long long>(batch) * (patches + 1) > INT_MAX)
    return "batch " + std::to_string(batch) + " x " + std::to_string(patches + 1) +
           " tokens exceeds the 32-bit token-row index";
  const long long blocks = (batch * patches + kBM - 1) / kBM * (hidden / 64);
  if (blocks > INT_MAX)
    return "hidden " + std::to_string(hidden) + " x batch " + std::to_string(batch) +
           " needs more blocks than one grid holds";
  return {};
}

// The kernel parameters of one call, after the shape and pointer checks (StudyError(Usage)
// naming the version and what is wrong). n_tiles is left to the caller's tile choice.
inline Params make_params(const char* version, const Problem& pr, const Args& a) {
  if (auto why = supports(pr.batch, pr.image_size, pr.hidden); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, std::string(version) + ": " + why);
  const std::pair<const void*, const char*> ptrs[] = {{a.images, "images"},       {a.conv_w, "conv_w"},
                                                      {a.conv_b, "conv_b"},       {a.cls_token, "cls_token"},
                                                      {a.pos_embed, "pos_embed"}, {a.out, "out"}};
  for (const auto& [ptr, what] : ptrs)
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16)
      throw study::StudyError(study::ErrorKind::Usage, std::string(version) + ": " + what +
                                                           " is not 16-byte aligned (the kernel moves 16-byte vectors)");
  Params p;
  p.images = a.images;
  p.w = a.conv_w;
  p.bias = a.conv_b;
  p.cls = a.cls_token;
  p.pos = a.pos_embed;
  p.out = a.out;
  p.side = pr.image_size / kPatch;
  p.patches = p.side * p.side;
  p.rows = pr.batch * p.patches;
  p.size = pr.image_size;
  p.hidden = pr.hidden;
  p.n_tiles = 0;
  return p;
}

inline long long m_tiles(const Params& p) { return (p.rows + kBM - 1) / kBM; }

// Launches kKernel with one block per 128 x kBN tile of Y (1-D grid, the n tile fastest) and
// kSmemBytes of dynamic shared memory; the attributes that allow more than 48 KB (and the
// largest carveout) are set once per kernel.
using Kernel = void (*)(Params);
template <int kBN, Kernel kKernel, int kSmemBytes>
void launch_tiles(Params p, cudaStream_t stream) {
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  p.n_tiles = p.hidden / kBN;
  kKernel<<<static_cast<unsigned>(m_tiles(p) * p.n_tiles), kThreads, kSmemBytes, stream>>>(p);
  LAUNCH_CHECK();
}

}  // namespace patch_embed::implicit_gemm
