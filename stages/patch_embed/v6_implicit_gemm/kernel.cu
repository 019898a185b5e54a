// v6_implicit_gemm: the whole patch embedding in one kernel, as an implicit GEMM on mma.sync
// tensor cores.
//
// Since stride = kernel = 16, the convolution is exactly the GEMM
//   Y[m, n] = sum_k A[m, k] W[n, k],   m = b * P + p (P patches per image), k = c * 256 + ky * 16 + kx,
// with A[m, k] = images[b, c, py * 16 + ky, px * 16 + kx] (p = py * side + px) and W the conv
// weight read as row-major [hidden, 768]. No im2col copy of A exists: the GEMM's loader reads
// it straight from the image. A 64-wide K tile of one A row is 4 consecutive rows ky of one
// channel of one patch, each 16 pixels = 32 contiguous bytes = two 16-byte cp.async chunks;
// consecutive GEMM rows are neighbouring patches, so a warp's chunks cover whole 128-byte image
// row segments.
//
// A block computes a 128 x kBN tile of Y (kBN = 128, or 64 when hidden is not a multiple of
// 128) with 8 warps, each a 64 x 32 (or 32 x 32) sub-tile of m16n8k16 MMAs (fp16 in, fp32
// accumulators) fed by ldmatrix.x4 from 128-byte XOR-swizzled shared-memory rows. K = 768 runs
// as 12 tiles of 64 through a 3-stage cp.async pipeline (one barrier per tile). The epilogue
// stages the fp32 accumulators in shared memory, then each thread writes whole 16-byte pieces
// of token rows: acc + conv bias + position embedding, rounded once to fp16, at row
// b * tokens + 1 + p. The block holding an image's first patch (p = 0) also writes that
// image's cls row (cls_token + pos_embed[0]) for its columns. The n tile index runs fastest
// over the 1-D grid, so the hidden / kBN blocks sharing an A tile run together and the image
// is read from DRAM about once.
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include "check.hpp"
#include "patch_embed/patch_embed.hpp"
#include "vit_config.hpp"

namespace patch_embed {
namespace {

constexpr int kPatch = study::kPatch;                           // 16
constexpr int kK = study::kChannels * kPatch * kPatch;          // 768
constexpr int kBM = 128;                                        // block tile rows (patches)
constexpr int kBK = 64;                                         // K tile: one 128-byte smem row
constexpr int kKTiles = kK / kBK;                               // 12
constexpr int kStages = 3;                                      // cp.async pipeline depth
constexpr int kThreads = 256;                                   // 8 warps
constexpr int kChunks = kBK / 8;                                // 16-byte chunks per tile row
constexpr int kLoadRows = kThreads / kChunks;                   // tile rows one load pass covers
static_assert(kK % kBK == 0 && kBK == 64, "the swizzle assumes 128-byte tile rows");
static_assert(kBM % kLoadRows == 0, "every thread loads the same number of A chunks");

// Per-tile-shape constants. kBN = 128: 2 x 4 warps of 64 x 32; kBN = 64: 4 x 2 warps of 32 x 32.
template <int kBN>
struct Tile {
  static constexpr int kWarpsN = kBN / 32;
  static constexpr int kWarpsM = kThreads / 32 / kWarpsN;
  static constexpr int kWM = kBM / kWarpsM;  // warp tile rows
  static constexpr int kMT = kWM / 16;       // m16 MMA tiles per warp
  static constexpr int kNT = 4;              // n8 MMA tiles per warp (32 columns)
  static constexpr int kStageHalves = (kBM + kBN) * kBK;
  static constexpr int kPipeBytes = kStages * kStageHalves * 2;
  static constexpr int kLd = kBN + 8;  // fp32 staging row stride: 8 (mod 32) words, conflict free
  static constexpr int kStageBytes = kBM * kLd * 4;
  static constexpr int kSmemBytes = kPipeBytes > kStageBytes ? kPipeBytes : kStageBytes;
  static_assert(kBN % kLoadRows == 0, "every thread loads the same number of B chunks");
  static_assert(kWarpsM * kWarpsN * 32 == kThreads && kWM % 16 == 0, "warp grid");
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

// Offset in halves of 16-byte chunk c of row r in a [rows][64] tile: chunk c ^ (r % 8), so the
// 8 rows of an ldmatrix phase and the 8 chunks of a row's cp.async stores hit 8 bank groups.
__device__ __forceinline__ int swizzle(int r, int c) { return r * kBK + ((c ^ (r & 7)) << 3); }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1 and registers; valid = false writes zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a b for one m16n8k16 tile: a 16x16 row-major (4 regs), b 16x8 column-major (2 regs).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 8 halves as one 16-byte vector.
union Half8 {
  uint4 u;
  __half2 h[4];
};

// Two blocks per SM (2 x 96 KB of shared memory), so one block's pipeline fill and epilogue
// overlap the other's main loop: at most 128 registers per thread.
template <int kBN>
__global__ void __launch_bounds__(kThreads, 2) kernel(const Params p) {
  using T = Tile<kBN>;
  extern __shared__ __align__(1024) unsigned char smem[];
  __half* const pipe = reinterpret_cast<__half*>(smem);  // per stage: A [128][64], then B [kBN][64]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int n_tile = blockIdx.x % p.n_tiles;
  const int m0 = (blockIdx.x / p.n_tiles) * kBM, n0 = n_tile * kBN;

  // ---- Loader: thread tid moves chunk j = tid % 8 of tile rows tid / 8 + 32 i. ----
  const int j = tid % kChunks, lrow = tid / kChunks;
  const int S = p.size;
  // Chunk j of a 64-wide K tile: patch row ky = 4 (kt % 4) + j / 2, pixels 8 (j % 2)..+7.
  const int chunk_off = (j >> 1) * S + (j & 1) * 8;
  constexpr int kARows = kBM / kLoadRows, kBRows = kBN / kLoadRows;
  const __half* a_src[kARows];
  bool a_ok[kARows];
#pragma unroll
  for (int i = 0; i < kARows; ++i) {
    const int m = m0 + lrow + i * kLoadRows;
    a_ok[i] = m < p.rows;
    const int mm = a_ok[i] ? m : 0;  // rows past M: a valid address, zero-filled
    const int b = mm / p.patches, pp = mm - b * p.patches;
    const int py = pp / p.side, px = pp - py * p.side;
    a_src[i] = p.images + (static_cast<size_t>(b) * study::kChannels * S + py * kPatch) * S + px * kPatch +
               chunk_off;
  }
  const __half* const b_src = p.w + static_cast<size_t>(n0 + lrow) * kK + j * 8;
  const int dst0 = swizzle(lrow, j);  // lrow + 32 i keeps the same row % 8

  auto load_tile = [&](int kt, int stage) {
    __half* a_dst = pipe + stage * T::kStageHalves;
    __half* b_dst = a_dst + kBM * kBK;
    // K tile kt: channel kt / 4, patch rows 4 (kt % 4)..+3.
    const int koff = (kt >> 2) * S * S + (kt & 3) * 4 * S;
#pragma unroll
    for (int i = 0; i < kARows; ++i)
      cp_async16(smem_addr(a_dst + dst0 + i * kLoadRows * kBK), a_src[i] + koff, a_ok[i]);
#pragma unroll
    for (int i = 0; i < kBRows; ++i)
      cp_async16(smem_addr(b_dst + dst0 + i * kLoadRows * kBK), b_src + i * kLoadRows * kK + kt * kBK, true);
  };

  // ---- Main loop: 12 K tiles, 3 stages, one barrier per tile. ----
  const int wm0 = (warp / T::kWarpsN) * T::kWM, wn0 = (warp % T::kWarpsN) * 32;
  float acc[T::kMT][T::kNT][4];
#pragma unroll
  for (int mt = 0; mt < T::kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::kNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;

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
      uint32_t af[T::kMT][4], bf[T::kNT / 2][4];
#pragma unroll
      for (int mt = 0; mt < T::kMT; ++mt) ldmatrix_x4(af[mt], smem_addr(a_s + swizzle(a_row + 16 * mt, 2 * ks + a_hi)));
#pragma unroll
      for (int np = 0; np < T::kNT / 2; ++np)
        ldmatrix_x4(bf[np], smem_addr(b_s + swizzle(b_row + 16 * np, 2 * ks + b_hi)));
#pragma unroll
      for (int mt = 0; mt < T::kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < T::kNT; ++nt) mma(acc[mt][nt], af[mt], bf[nt / 2][2 * (nt % 2)], bf[nt / 2][2 * (nt % 2) + 1]);
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
    for (int mt = 0; mt < T::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < T::kNT; ++nt) {
        float* c = cs + (wm0 + 16 * mt + g) * T::kLd + wn0 + 8 * nt + 2 * q;
        *reinterpret_cast<float2*>(c) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(c + 8 * T::kLd) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
  }
  __syncthreads();

  // Thread tid writes columns n0 + 8 c..+7 (c = tid % (kBN / 8)) of tile rows tid / (kBN / 8) + kRows i.
  constexpr int kRowChunks = kBN / 8, kRows = kThreads / kRowChunks;
  const int c = tid % kRowChunks, n = n0 + 8 * c;
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
#pragma unroll 1
  for (int r = tid / kRowChunks; r < kBM; r += kRows) {
    const int m = m0 + r;
    if (m >= p.rows) break;
    const int b = m / p.patches, pp = m - b * p.patches;
    const float* src = cs + r * T::kLd + 8 * c;
    const float4 x = *reinterpret_cast<const float4*>(src + 4 * s);
    const float4 y = *reinterpret_cast<const float4*>(src + 4 - 4 * s);
    const float4 lo = s ? y : x, hi = s ? x : y;
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    Half8 pos, o;
    pos.u = __ldg(reinterpret_cast<const uint4*>(p.pos + static_cast<size_t>(1 + pp) * p.hidden + n));
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
  }
}

template <int kBN>
void launch_tile(const Params& p, cudaStream_t stream) {
  using T = Tile<kBN>;
  static const bool configured = [] {  // once per tile shape: > 48 KB dynamic shared memory
    CUDA_CHECK(cudaFuncSetAttribute(kernel<kBN>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(kernel<kBN>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const long long blocks = static_cast<long long>((p.rows + kBM - 1) / kBM) * p.n_tiles;
  kernel<kBN><<<static_cast<unsigned>(blocks), kThreads, T::kSmemBytes, stream>>>(p);
  LAUNCH_CHECK();
}

void require_aligned(const void* ptr, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(ptr) % 16)
    throw study::StudyError(study::ErrorKind::Usage,
                            std::string("v6_implicit_gemm: ") + what +
                                " is not 16-byte aligned (the kernel moves 16-byte vectors)");
}

std::string implicit_gemm_supports(int batch, int image_size, int hidden) {
  if (batch <= 0) return "batch " + std::to_string(batch) + " is not positive";
  if (image_size <= 0 || image_size % kPatch)
    return "image size " + std::to_string(image_size) + " is not a positive multiple of the patch size 16";
  if (hidden <= 0 || hidden % 64)
    return "hidden " + std::to_string(hidden) + " is not a positive multiple of 64 (the kernel's narrowest N tile)";
  // 32-bit indices inside the kernel: image offsets within one image, GEMM rows and token rows.
  const long long side = image_size / kPatch, patches = side * side;
  if (3LL * image_size * image_size > INT_MAX)
    return "image size " + std::to_string(image_size) + " is too large for 32-bit offsets within one image";
  if (static_cast<long long>(batch) * (patches + 1) > INT_MAX)
    return "batch " + std::to_string(batch) + " x " + std::to_string(patches + 1) +
           " tokens exceeds the 32-bit token-row index";
  const long long blocks = (batch * patches + kBM - 1) / kBM * (hidden % 128 ? hidden / 64 : hidden / 128);
  if (blocks > INT_MAX) return "hidden " + std::to_string(hidden) + " x batch " + std::to_string(batch) +
                               " needs more blocks than one grid holds";
  return {};
}

void implicit_gemm_launch(const __half* images, const __half* conv_w, const __half* conv_b,
                          const __half* cls_token, const __half* pos_embed, __half* out, int batch,
                          int image_size, int hidden, cudaStream_t stream) {
  if (auto why = implicit_gemm_supports(batch, image_size, hidden); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, "v6_implicit_gemm: " + why);
  const std::pair<const void*, const char*> ptrs[] = {{images, "images"},       {conv_w, "conv_w"},
                                                      {conv_b, "conv_b"},       {cls_token, "cls_token"},
                                                      {pos_embed, "pos_embed"}, {out, "out"}};
  for (const auto& [ptr, what] : ptrs) require_aligned(ptr, what);

  Params p;
  p.images = images;
  p.w = conv_w;
  p.bias = conv_b;
  p.cls = cls_token;
  p.pos = pos_embed;
  p.out = out;
  p.side = image_size / kPatch;
  p.patches = p.side * p.side;
  p.rows = batch * p.patches;
  p.size = image_size;
  p.hidden = hidden;
  if (hidden % 128 == 0) {
    p.n_tiles = hidden / 128;
    launch_tile<128>(p, stream);
  } else {
    p.n_tiles = hidden / 64;
    launch_tile<64>(p, stream);
  }
}

std::string supports(const Problem& p) {
  if (auto why = check_common(p); !why.empty()) return why;
  return implicit_gemm_supports(p.batch, p.image_size, p.hidden);
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  implicit_gemm_launch(a.images, a.conv_w, a.conv_b, a.cls_token, a.pos_embed, a.out, p.batch, p.image_size,
                       p.hidden, stream);
}

}  // namespace

extern const Version v6_implicit_gemm = [] {
  Version v{};
  v.name = "v6_implicit_gemm";
  v.supports = supports;
  v.launch = launch;
  return v;
}();

}  // namespace patch_embed
