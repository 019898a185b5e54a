// The kernel v1..v6 share; their template arguments are the steps of the ladder.
//
// One warp owns 16 query rows of one (batch, head); the block's warps share tiles of 64 keys
// and their values, staged in shared memory. One sweep over the key tiles with an online
// softmax: the scores S of a tile go through the warp's shared memory, each row keeps its
// running maximum m and sum l, and the fp32 output accumulators in registers are rescaled by
// exp(m_old - m_new) whenever the maximum grows. P V runs on the CUDA cores in fp32.
// (v7_flash_mma and v7_flash keep S and P in registers and runs P V on tensor cores too.)
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <cuda_fp16.h>
#include <mma.h>
#include "attention/attention.hpp"
#include "harness/check.hpp"

namespace attention::tiled {

constexpr int kD = 64;         // head_dim the tiles are compiled for
constexpr int kWarpRows = 16;  // query rows per warp: one WMMA tile high
constexpr int kKeys = 64;      // keys per K/V tile
// Row pitches, padded by 16 bytes so that 8 consecutive rows of one 16-byte column start in 8
// different bank groups (an unpadded 128-byte pitch puts them all in the same banks).
constexpr int kHalfPitch = kD + 8;        // Q and K rows (or K^T rows), halves: 144 bytes
constexpr int kFloatPitch = kD + 4;       // V rows, floats: 272 bytes
// S rows, floats: 288 bytes, so that the softmax's 16-byte reads (lanes 2r and 2r+1 on row r,
// interleaved chunks) put a quarter-warp's 8 requests in 8 different bank groups.
constexpr int kSPitch = kD + 8;
constexpr int kPPitch = kWarpRows + 4;    // P^T rows (one per key), floats: 80 bytes

enum class Loads {
  Scalar,  // v1: one element per thread, consecutive threads on consecutive rows: every
           // load of a warp touches 32 rows 3*heads*64*2 bytes apart (uncoalesced)
  Vector,  // v2+: 16 bytes per thread, 8 consecutive threads cover one 128-byte row
};
enum class Scores { Simt, Wmma };  // Q K^T on CUDA cores, or on tensor cores through WMMA
enum class KLayout {
  Transposed,  // K^T [d][key] in shared memory, the row-major B operand of Q K^T; filled by a
               // loader with one thread per key, so its global loads are strided (v3..v5)
  Rows,        // K [key][d] as stored; v1/v2 read it directly, v6 feeds it to WMMA as a
               // column-major B operand and loads it with the coalesced loader
};

constexpr int kKBytes = kKeys * kHalfPitch * 2;    // K or K^T tile (64 x 72 halves either way)
constexpr int kVBytes = kKeys * kFloatPitch * 4;   // V tile in fp32: P V runs in fp32
// Per warp: S [16][72] floats, reused as P^T [64][20]; 16 floats of per-row statistics; and
// for SIMT scores the warp's Q rows (WMMA stages Q in the S space before the loop instead).
constexpr int kSPFloats = kKeys * kPPitch > kWarpRows * kSPitch ? kKeys * kPPitch : kWarpRows * kSPitch;
constexpr int kQBytes = kWarpRows * kHalfPitch * 2;
template <Scores S>
constexpr int warp_bytes() {
  constexpr int raw = (kSPFloats + kWarpRows) * 4 + (S == Scores::Simt ? kQBytes : 0);
  return (raw + 127) / 128 * 128;  // keeps every warp's region 128-byte aligned (WMMA needs 32)
}
template <int kWarps, Scores S>
constexpr int smem_bytes() { return kKBytes + kVBytes + kWarps * warp_bytes<S>(); }

// Rows row0.. of one q/k block of the head into dst[r][e] (pitch kHalfPitch); rows past the
// sequence are zero.
template <Loads L>
__device__ void load_half_rows(__half* dst, const __half* src, int stride, int row0, int rows,
                               int tokens, int tid, int threads) {
  if constexpr (L == Loads::Scalar) {
    for (int i = tid; i < rows * kD; i += threads) {
      const int r = i % rows, e = i / rows, t = row0 + r;
      dst[r * kHalfPitch + e] = t < tokens ? src[t * stride + e] : __float2half(0.f);
    }
  } else {
    for (int i = tid; i < rows * (kD / 8); i += threads) {
      const int r = i / (kD / 8), c = i % (kD / 8), t = row0 + r;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t < tokens) v = __ldg(reinterpret_cast<const uint4*>(src + t * stride + c * 8));
      *reinterpret_cast<uint4*>(dst + r * kHalfPitch + c * 8) = v;
    }
  }
}

// The value tile, converted to fp32 on the way in (P V reads each value 16 times).
template <Loads L>
__device__ void load_values(float* dst, const __half* src, int stride, int row0, int tokens, int tid,
                            int threads) {
  if constexpr (L == Loads::Scalar) {
    for (int i = tid; i < kKeys * kD; i += threads) {
      const int r = i % kKeys, e = i / kKeys, t = row0 + r;
      dst[r * kFloatPitch + e] = t < tokens ? __half2float(src[t * stride + e]) : 0.f;
    }
  } else {
    for (int i = tid; i < kKeys * (kD / 8); i += threads) {
      const int r = i / (kD / 8), c = i % (kD / 8), t = row0 + r;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t < tokens) v = __ldg(reinterpret_cast<const uint4*>(src + t * stride + c * 8));
      const __half2* h2 = reinterpret_cast<const __half2*>(&v);
      float f[8];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 x = __half22float2(h2[k]);
        f[2 * k] = x.x;
        f[2 * k + 1] = x.y;
      }
      float4* d4 = reinterpret_cast<float4*>(dst + r * kFloatPitch + c * 8);
      d4[0] = make_float4(f[0], f[1], f[2], f[3]);
      d4[1] = make_float4(f[4], f[5], f[6], f[7]);
    }
  }
}

// K^T [d][key]: consecutive threads take consecutive keys, so the 16-byte loads of a warp come
// from 32 different rows, `stride` elements apart.
__device__ inline void load_keys_transposed(__half* dst, const __half* src, int stride, int row0, int tokens,
                                            int tid, int threads) {
  for (int i = tid; i < kKeys * (kD / 8); i += threads) {
    const int key = i % kKeys, c = i / kKeys, t = row0 + key;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t < tokens) v = __ldg(reinterpret_cast<const uint4*>(src + t * stride + c * 8));
    const __half* e8 = reinterpret_cast<const __half*>(&v);
#pragma unroll
    for (int e = 0; e < 8; ++e) dst[(c * 8 + e) * kHalfPitch + key] = e8[e];
  }
}

// S [16][64] = Q K^T on CUDA cores: lane owns keys lane and lane + 32 for all 16 rows.
__device__ inline void scores_simt(float* s, const __half* q, const __half* k, int lane) {
  float acc[kWarpRows][2] = {};
#pragma unroll
  for (int c = 0; c < kD / 8; ++c) {
    float kv[2][8];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const uint4 raw = *reinterpret_cast<const uint4*>(k + (lane + 32 * n) * kHalfPitch + c * 8);
      const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 x = __half22float2(h2[e]);
        kv[n][2 * e] = x.x;
        kv[n][2 * e + 1] = x.y;
      }
    }
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r) {
      const uint4 raw = *reinterpret_cast<const uint4*>(q + r * kHalfPitch + c * 8);  // broadcast
      const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 x = __half22float2(h2[e]);
#pragma unroll
        for (int n = 0; n < 2; ++n) acc[r][n] += x.x * kv[n][2 * e] + x.y * kv[n][2 * e + 1];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kWarpRows; ++r) {
    s[r * kSPitch + lane] = acc[r][0];
    s[r * kSPitch + lane + 32] = acc[r][1];
  }
}

using QFragment = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major>;

// S [16][64] = Q K^T on tensor cores: 4 blocks of 16 keys, 4 steps of 16 over d each.
template <KLayout KL>
__device__ void scores_wmma(float* s, const QFragment (&q)[kD / 16], const __half* k) {
  namespace wmma = nvcuda::wmma;
  using BLayout = std::conditional_t<KL == KLayout::Rows, wmma::col_major, wmma::row_major>;
#pragma unroll
  for (int nb = 0; nb < kKeys / 16; ++nb) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, BLayout> kf;
      // Element (d, key) of K^T: K[key][d] read column-major, or K^T[d][key] row-major.
      const __half* at = KL == KLayout::Rows ? k + 16 * nb * kHalfPitch + 16 * ks
                                             : k + 16 * ks * kHalfPitch + 16 * nb;
      wmma::load_matrix_sync(kf, at, kHalfPitch);
      wmma::mma_sync(acc, q[ks], kf, acc);
    }
    wmma::store_matrix_sync(s + 16 * nb, acc, kSPitch, wmma::mem_row_major);
  }
}

template <int kWarps, Loads L, Scores S, KLayout KL>
__global__ void __launch_bounds__(kWarps * 32)
kernel(const __half* __restrict__ qkv, __half* __restrict__ out, int tokens, int heads, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kThreads = kWarps * 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  __half* k_s = reinterpret_cast<__half*>(smem);
  float* v_s = reinterpret_cast<float*>(smem + kKBytes);
  float* sp = reinterpret_cast<float*>(smem + kKBytes + kVBytes + warp * warp_bytes<S>());
  float* stat = sp + kSPFloats;
  __half* q_s = S == Scores::Simt ? reinterpret_cast<__half*>(stat + kWarpRows) : reinterpret_cast<__half*>(sp);

  const int h = blockIdx.y, b = blockIdx.z;
  const int width = heads * kD, stride = 3 * width;
  const __half* q_g = qkv + b * tokens * stride + h * kD;
  const __half* k_g = q_g + width;
  const __half* v_g = k_g + width;
  const int row0 = (blockIdx.x * kWarps + warp) * kWarpRows;
  // A warp past the sequence end computes nothing but still loads and meets the barriers.
  const bool active = row0 < tokens;

  QFragment qf[kD / 16];
  if (active) {
    load_half_rows<L>(q_s, q_g, stride, row0, kWarpRows, tokens, lane, 32);
    __syncwarp();
    if constexpr (S == Scores::Wmma) {
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) nvcuda::wmma::load_matrix_sync(qf[ks], q_s + 16 * ks, kHalfPitch);
    }
  }

  // Softmax role: lanes 2r and 2r+1 own row r, 32 keys each: lane 2r+h the 16-byte chunks
  // 2i+h (keys 8i+4h..8i+4h+3). P V role: lane owns rows 4*rg..4*rg+3 and dims 4*dg..4*dg+3
  // and 32+4*dg..32+4*dg+3, so the 8 lanes of a row group read 128 contiguous bytes of a value
  // row per 16-byte load.
  const int sr = lane / 2, half = lane % 2, rg = lane / 8, dg = lane % 8;
  float m = -INFINITY, l = 0.f;
  float o[4][8] = {};

  for (int key0 = 0; key0 < tokens; key0 += kKeys) {
    __syncthreads();  // every warp is done with the previous K/V tile
    if constexpr (KL == KLayout::Transposed)
      load_keys_transposed(k_s, k_g, stride, key0, tokens, tid, kThreads);
    else
      load_half_rows<L>(k_s, k_g, stride, key0, kKeys, tokens, tid, kThreads);
    load_values<L>(v_s, v_g, stride, key0, tokens, tid, kThreads);
    __syncthreads();
    if (!active) continue;
    const int valid = min(kKeys, tokens - key0);

    if constexpr (S == Scores::Simt)
      scores_simt(sp, q_s, k_s, lane);
    else
      scores_wmma<KL>(sp, qf, k_s);
    __syncwarp();

    // Online softmax of row sr over this tile; keys past the sequence end weigh nothing.
    float p[32];  // p[4i+e]: key 8i + 4*half + e
    const float* srow = sp + sr * kSPitch + 4 * half;
    float tile_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 c = *reinterpret_cast<const float4*>(srow + 8 * i);
      const float cs[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[4 * i + e] = 8 * i + 4 * half + e < valid ? cs[e] : -INFINITY;
        tile_max = fmaxf(tile_max, p[4 * i + e]);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);  // finite: every tile has a valid key
    const float corr = exp2f((m - m_new) * scale_log2);
    const float shift = m_new * scale_log2;
    m = m_new;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      p[i] = exp2f(fmaf(p[i], scale_log2, -shift));
      sum += p[i];
    }
    l = l * corr + sum + __shfl_xor_sync(0xffffffffu, sum, 1);
    __syncwarp();  // all of S is read before P^T overwrites it
    // Key k's row of P^T: lanes 2r and 2r+1 write keys 4 apart, 80 words apart, so the 32
    // lanes of one store hit 32 different banks.
#pragma unroll
    for (int i = 0; i < 32; ++i) sp[(8 * (i / 4) + 4 * half + i % 4) * kPPitch + sr] = p[i];
    if (half == 0) stat[sr] = corr;
    __syncwarp();

    // O = O * corr + P V, fp32 on CUDA cores.
    const float4 c4 = *reinterpret_cast<const float4*>(stat + 4 * rg);
    const float cs[4] = {c4.x, c4.y, c4.z, c4.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int e = 0; e < 8; ++e) o[i][e] *= cs[i];
#pragma unroll 4
    for (int j = 0; j < kKeys; ++j) {
      const float4 p4 = *reinterpret_cast<const float4*>(sp + j * kPPitch + 4 * rg);
      const float4 va = *reinterpret_cast<const float4*>(v_s + j * kFloatPitch + 4 * dg);
      const float4 vb = *reinterpret_cast<const float4*>(v_s + j * kFloatPitch + 32 + 4 * dg);
      const float ps[4] = {p4.x, p4.y, p4.z, p4.w};
      const float vs[8] = {va.x, va.y, va.z, va.w, vb.x, vb.y, vb.z, vb.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) o[i][e] = fmaf(ps[i], vs[e], o[i][e]);
    }
  }
  if (!active) return;

  __syncwarp();
  if (half == 0) stat[sr] = l;
  __syncwarp();
  const float4 l4 = *reinterpret_cast<const float4*>(stat + 4 * rg);
  const float ls[4] = {l4.x, l4.y, l4.z, l4.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = row0 + 4 * rg + i;
    if (t >= tokens) continue;
    const float inv = 1.f / ls[i];
    uint2 lo, hi;  // dims 4dg.. and 32+4dg..
    __half2* l2 = reinterpret_cast<__half2*>(&lo);
    __half2* h2 = reinterpret_cast<__half2*>(&hi);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      l2[e] = __floats2half2_rn(o[i][2 * e] * inv, o[i][2 * e + 1] * inv);
      h2[e] = __floats2half2_rn(o[i][4 + 2 * e] * inv, o[i][4 + 2 * e + 1] * inv);
    }
    __half* row = out + (b * tokens + t) * width + h * kD;
    *reinterpret_cast<uint2*>(row + 4 * dg) = lo;
    *reinterpret_cast<uint2*>(row + 32 + 4 * dg) = hi;
  }
}

// Grid: (query tiles of kWarps * 16 rows, heads, batch).
template <int kWarps, Loads L, Scores S, KLayout KL>
void launch(const Problem& p, const Args& a, cudaStream_t stream, const char* name) {
  require_aligned(a.qkv, a.out, 16, name);
  constexpr int bytes = smem_bytes<kWarps, S>();
  auto* fn = kernel<kWarps, L, S, KL>;
  static const bool opted_in = [&] {  // above 48 KB a kernel must ask for its shared memory
    if (bytes > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)opted_in;
  const dim3 grid((p.tokens + kWarps * kWarpRows - 1) / (kWarps * kWarpRows), p.heads, p.batch);
  const float scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(kD));
  fn<<<grid, kWarps * 32, bytes, stream>>>(a.qkv, a.out, p.tokens, p.heads, scale_log2);
  LAUNCH_CHECK();
}

}  // namespace attention::tiled

// A tiled version is one instantiation of the kernel above, so its kernel.cu is one line:
//   STUDY_TILED_VERSION(v4_multiwarp, 4, Vector, Wmma, Transposed)
#define STUDY_TILED_VERSION(NAME, WARPS, LOADS, SCORES, K_LAYOUT)                                  \
  namespace attention {                                                                          \
  namespace {                                                                                    \
  void launch_##NAME(const Problem& p, const Args& a, cudaStream_t stream) {                    \
    tiled::launch<WARPS, tiled::Loads::LOADS, tiled::Scores::SCORES, tiled::KLayout::K_LAYOUT>(   \
        p, a, stream, #NAME);                                                                    \
  }                                                                                              \
  }                                                                                              \
  extern const Version NAME{#NAME, check_tiled, launch_##NAME};                                  \
  }
