// What the flash kernels (v7_flash_mma on mma.sync, v7_flash on Hopper's wgmma) share:
// swizzled 128-byte tile rows, cp.async tile loads, and the online softmax on MMA accumulators.
//
// Both keep a 16-row slice of scores in the m16n8 accumulator layout: thread `lane` holds rows
// g = lane / 4 and g + 8, keys n*8 + 2*(lane % 4) + {0, 1} of n-tile n, as s[n][0..1] (row g)
// and s[n][2..3] (row g + 8). mma.sync m16n8 tiles and wgmma's m64nN fragments (per warp) use
// this same layout, so the softmax below serves both.
#pragma once
#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <type_traits>
#include "device/tiles.cuh"

namespace attention::flash {

constexpr int kD = 64;           // head_dim: one 128-byte smem row
constexpr int kKeys = 64;        // keys per K/V tile
constexpr int kChunks = kD / 8;  // 16-byte chunks per row

// Swizzled 128-byte tile rows and their cp.async fills (common/device/tiles.cuh); a K/V or Q row of
// head_dim 64 is exactly one such row.
static_assert(kD == study::tiles::kRowHalves, "one 128-byte smem row per head_dim row");
using study::tiles::cp_async16;
using study::tiles::cp_async_commit;
using study::tiles::cp_async_wait;
using study::tiles::smem_addr;
using study::tiles::swizzle;

__device__ __forceinline__ float exp2_approx(float x) {  // MUFU.EX2; exp2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Both flash kernels' launch: one block per `rows` query rows of one (head, batch) pair, and
// the softmax scale 1 / sqrt(kD) folded with log2(e) for exp2.
inline dim3 head_grid(int tokens, int heads, int batch, int rows) {
  return dim3((tokens + rows - 1) / rows, heads, batch);
}
inline float scale_log2() { return 1.4426950408889634f / std::sqrt(static_cast<float>(kD)); }

// Where this block's head (blockIdx.y = head, blockIdx.z = batch) lives: its Q, K and V columns
// in the packed [batch*tokens, 3 * heads * kD] QKV buffer (row stride `stride`), and its output
// columns in the [batch*tokens, heads * kD] output (row stride `width`; fp16, or E4M3 for an
// FP8 projection; the input fp16, or E4M3 for an attention that reads the QKV GEMM's E4M3 output).
template <class OutT = __half, class InT = __half>
struct HeadView {
  const InT *q, *k, *v;
  OutT* out;
  int width, stride;
  __device__ __forceinline__ HeadView(const InT* qkv, OutT* o, int tokens, int heads)
      : width(heads * kD), stride(3 * heads * kD) {
    const int h = blockIdx.y, b = blockIdx.z;
    q = qkv + b * tokens * stride + h * kD;
    k = q + width;
    v = k + width;
    out = o + b * tokens * width + h * kD;
  }
};

// Rows row0..row0+kTileRows-1 of one q/k/v block of the head into a swizzled tile, by
// kThreads threads; rows past the sequence end are zero-filled (zero keys score 0 and are
// masked; zero values keep 0 * garbage out of O).
template <int kTileRows, int kThreads>
__device__ __forceinline__ void load_tile(__half* dst, const __half* src, int stride, int row0, int tokens) {
  static_assert(kTileRows * kChunks % kThreads == 0, "every thread moves the same number of chunks");
#pragma unroll
  for (int k = 0; k < kTileRows * kChunks / kThreads; ++k) {
    const int i = threadIdx.x + k * kThreads;
    const int r = i / kChunks, c = i % kChunks, t = row0 + r;
    const bool valid = t < tokens;
    cp_async16(smem_addr(dst + swizzle(r, c)), src + (valid ? t : 0) * stride + c * 8, valid);
  }
}

// A warp's running softmax state for kMTiles slices of 16 rows.
template <int kMTiles>
struct Rows {
  float o[kMTiles][8][4];  // O accumulators: 8 n-tiles of 8 dims
  float m[kMTiles][2];     // reference max of rows g and g + 8 (raw score units)
  float l[kMTiles][2];     // this lane's partial sum of exp2((s - m) * scale_log2)

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int n = 0; n < 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
      m[mt][0] = m[mt][1] = -INFINITY;
      l[mt][0] = l[mt][1] = 0.f;
    }
  }
};

// Lazy rescaling: O is rescaled only when a row max grows by more than kLazyLog2 (log2 units)
// over the row's reference max: until then P <= 2^kLazyLog2, exact enough in fp16 and far
// from overflow, and O and l share the stale reference, so the final O / l is unchanged.
constexpr float kLazyLog2 = 8.f;

// One key tile of the online softmax, without touching O (kNTiles n-tiles of 8 keys: 64 keys
// unless the tile is a narrower last one): turns the scores s into P = exp2((s - m) * scale) in
// place and updates the row maxima and partial sums. Returns whether a reference max grew, in
// which case O must still be scaled by `corr` (rescale_o) before the next P V adds to it; split
// so that a kernel can run this while the previous tile's P V is still writing O. kRagged: the
// sequence ends inside this tile after `valid` keys, the rest are masked to -inf.
template <int kMTiles, bool kRagged, int kNTiles = 8>
__device__ __forceinline__ bool softmax_scores(float (&s)[kMTiles][kNTiles][4], Rows<kMTiles>& st,
                                               float (&corr)[kMTiles][2], int valid, float scale_log2,
                                               int lane) {
  if (kRagged) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (n * 8 + 2 * (lane & 3) + (i & 1) >= valid) s[mt][n][i] = -INFINITY;
  }

  // Row maxima of the tile; the 4 lanes of a row combine theirs by shuffles.
  float mx[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float v = -INFINITY;
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) v = fmaxf(v, fmaxf(s[mt][n][2 * hr], s[mt][n][2 * hr + 1]));
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
      mx[mt][hr] = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));  // finite: the tile has a valid key
    }

  // New reference maxima; the partial sums (and later O) rescaled by exp2((m_old - m_new) * scale).
  bool grow = false;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) grow |= (mx[mt][hr] - st.m[mt][hr]) * scale_log2 > kLazyLog2;
  const bool grew = __any_sync(0xffffffffu, grow);  // -inf reference on the first tile: always
  if (grew) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float m_new = fmaxf(st.m[mt][hr], mx[mt][hr]);
        corr[mt][hr] = exp2_approx((st.m[mt][hr] - m_new) * scale_log2);
        st.m[mt][hr] = m_new;
        st.l[mt][hr] *= corr[mt][hr];
      }
  }

  // P = exp2(s * scale - m * scale): one FFMA and one MUFU.EX2 per score.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const float shift = st.m[mt][hr] * scale_log2;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        s[mt][n][2 * hr] = exp2_approx(fmaf(s[mt][n][2 * hr], scale_log2, -shift));
        s[mt][n][2 * hr + 1] = exp2_approx(fmaf(s[mt][n][2 * hr + 1], scale_log2, -shift));
        sum += s[mt][n][2 * hr] + s[mt][n][2 * hr + 1];
      }
      st.l[mt][hr] += sum;
    }
  return grew;
}

// O *= corr, row by row: the rescale softmax_scores asked for.
template <int kMTiles>
__device__ __forceinline__ void rescale_o(Rows<kMTiles>& st, const float (&corr)[kMTiles][2]) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) st.o[mt][n][i] *= corr[mt][i / 2];
}

// One key tile of the online softmax: softmax_scores, then O rescaled where a max grew.
template <int kMTiles, bool kRagged, int kNTiles = 8>
__device__ __forceinline__ void online_softmax(float (&s)[kMTiles][kNTiles][4], Rows<kMTiles>& st, int valid,
                                               float scale_log2, int lane) {
  float corr[kMTiles][2];
  if (softmax_scores<kMTiles, kRagged, kNTiles>(s, st, corr, valid, scale_log2, lane)) rescale_o(st, corr);
}

// P's A fragment (m16k16) for keys 16kk..16kk+15 of one m-tile: n-tiles 2kk and 2kk+1 of the
// accumulator layout, packed to fp16.
template <int kNTiles>
__device__ __forceinline__ void p_fragment(uint32_t (&a)[4], const float (&s)[kNTiles][4], int kk) {
  a[0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// Normalizes a warp's 16 x kMTiles rows of O by their sums, stages them in `stage` (a swizzled
// [16 * kMTiles][64] region only this warp uses) and writes them as whole rows to out rows
// row0.. (those past the sequence end are dropped). fp16 out: 128-byte rows of O. E4M3 out (the
// FP8 projection's input): saturate(O * out_scale), staged in fp16 and converted on the way out,
// 64-byte rows; the double rounding (fp32 -> fp16 -> E4M3) can differ from a direct one only for
// a value within fp16's rounding of an E4M3 midpoint, by one E4M3 step.
template <int kMTiles, class OutT>
__device__ __forceinline__ void store_rows(const Rows<kMTiles>& st, __half* stage, OutT* out, int width,
                                           int row0, int tokens, int lane, float out_scale = 1.f) {
  constexpr bool kE4M3 = std::is_same_v<OutT, __nv_fp8_e4m3>;
  static_assert(kE4M3 || std::is_same_v<OutT, __half>, "fp16 or E4M3 output");
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float sum = st.l[mt][hr];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = out_scale / sum;
      const int r = 16 * mt + (lane >> 2) + 8 * hr;
#pragma unroll
      for (int n = 0; n < 8; ++n)
        *reinterpret_cast<uint32_t*>(stage + swizzle(r, n) + 2 * (lane & 3)) =
            pack_half2(st.o[mt][n][2 * hr] * inv, st.o[mt][n][2 * hr + 1] * inv);
    }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * kMTiles * kChunks; i += 32) {
    const int r = i / kChunks, c = i % kChunks, t = row0 + r;
    if (t >= tokens) continue;
    const uint4 chunk = *reinterpret_cast<const uint4*>(stage + swizzle(r, c));
    if constexpr (kE4M3) {
      const __half2_raw* h = reinterpret_cast<const __half2_raw*>(&chunk);
      uint2 q;
      uint16_t* qh = reinterpret_cast<uint16_t*>(&q);
#pragma unroll
      for (int j = 0; j < 4; ++j) qh[j] = __nv_cvt_halfraw2_to_fp8x2(h[j], __NV_SATFINITE, __NV_E4M3);
      *reinterpret_cast<uint2*>(out + t * width + c * 8) = q;
    } else {
      *reinterpret_cast<uint4*>(out + t * width + c * 8) = chunk;
    }
  }
}

}  // namespace attention::flash
