// What the persistent forwards (persistent.cu: e13's grid-barrier kernel; tiled.cu: the
// tile-scheduled one) share on the device: a GEMM task's 64-row A panel as 64-column swizzled
// tiles filled by cp.async, the LayerNorm of that panel in shared memory, the mma.sync product of
// a 64 x kBN tile against streamed weight chunks, its epilogues (bias, residual, GELU, fc2's
// split-K partial sums and their reduction), and the attention of one warp's 16 query rows with
// every key in shared memory. Both run 256 threads a CTA; the tile width is a template argument
// (e13: 96, tiled: 64).
#pragma once
#include <cuda_fp16.h>
#include <algorithm>
#include <string>
#include "attention/flash_mma.cuh"
#include "device/reduce.cuh"
#include "device/tiles.cuh"
#include "encoder/encoder.hpp"
#include "layernorm/layernorm.hpp"

namespace encoder::panel {

using study::tiles::cp_async16;
using study::tiles::cp_async_commit;
using study::tiles::cp_async_wait;
using study::tiles::ldmatrix_x4;
using study::tiles::mma;
using study::tiles::smem_addr;
using study::tiles::swizzle;

constexpr int kThreads = 256;
constexpr int kBM = 64, kBK = 64;        // a panel's rows; K chunk = one 128-byte smem row
constexpr int kTileHalves = kBM * kBK;   // one [64][64] swizzled tile
constexpr int kMaxHidden = 1024;

// Each thread moves 16-byte chunk (threadIdx % 8) of rows threadIdx / 8 + 32 j of a 64-column
// slab: row pointers and shared-memory offsets are computed once per item, not per copy.
constexpr int kRowStep = kThreads / 8;
static_assert(kBM % kRowStep == 0, "whole rows per thread");

// Rows r0.. of a row-major fp16 matrix (row stride ld) from column col0, kRows of them, as
// 64-column chunks into swizzled [kRows][64] tiles; rows at or past `end` land as zeros.
template <int kRows>
struct RowSlab {
  static constexpr int kPerThread = kRows / kRowStep;
  const __half* row[kPerThread];
  bool valid[kPerThread];
  __device__ __forceinline__ RowSlab(const __half* base, long long ld, int r0, int end, int col0) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int r = r0 + threadIdx.x / 8 + kRowStep * j;
      valid[j] = r < end;
      row[j] = base + (valid[j] ? r : 0) * ld + col0 + threadIdx.x % 8 * 8;
    }
  }
  __device__ __forceinline__ void copy(__half* dst, int chunk) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      cp_async16(smem_addr(dst + swizzle(threadIdx.x / 8 + kRowStep * j, threadIdx.x % 8)), row[j] + chunk * kBK,
                 valid[j]);
  }
};

// y = (v - mean) rstd gamma + beta for the chunks of a row a warp holds (warp_row_stats' v and
// stats), each 8-wide chunk i stored at at(i).
template <int kChunks, class At>
__device__ __forceinline__ void normalize_row(const float (&v)[kChunks][8], float2 stats, const __half* gamma,
                                              const __half* beta, int chunks, At&& at) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int i = lane + 32 * c;
    if (i >= chunks) continue;
    const auto gm = study::HalfVec<8>::load(gamma + 8 * i), bt = study::HalfVec<8>::load(beta + 8 * i);
    study::HalfVec<8> y;
#pragma unroll
    for (int j = 0; j < 8; ++j) y.set(j, (v[c][j] - stats.x) * stats.y * gm.get(j) + bt.get(j));
    y.store(at(i));
  }
}

// LayerNorm of the panel's 64 rows in place (hidden/64 swizzled [64][64] tiles): a warp per
// row, its statistics by reduce.cuh's warp_row_stats from the row's swizzled chunks.
__device__ inline void layernorm_panel(__half* a_s, const __half* gamma, const __half* beta, int hidden, float eps) {
  constexpr int kChunks = kMaxHidden / 8 / 32;
  const int warp = threadIdx.x / 32, chunks = hidden / 8;
  for (int r = warp; r < kBM; r += kThreads / 32) {
    auto at = [a_s, r](int i) { return a_s + i / 8 * kTileHalves + swizzle(r, i % 8); };
    float v[kChunks][8];
    const float2 stats = study::warp_row_stats<kChunks>(
        [&at](int i) { return *reinterpret_cast<const study::HalfVec<8>*>(at(i)); }, hidden, eps, v);
    normalize_row(v, stats, gamma, beta, chunks, at);
  }
}

// An fp16 pair this kernel wrote earlier (through L2: L1 may hold a stale copy).
__device__ __forceinline__ float2 load_pair(const __half* p) {
  const unsigned raw = __ldcg(reinterpret_cast<const unsigned*>(p));
  return __half22float2(*reinterpret_cast<const __half2*>(&raw));
}

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

enum class Epi { Bias, BiasResidual, BiasGelu, SplitResidual };

// One GEMM's operands: out = epi(A W^T + bias), A [rows, splits * hidden] (row stride lda), W [n,
// splits * hidden]; with gamma, A's rows are LayerNorm'ed (K = hidden) before the product.
struct Gemm {
  const __half* a;
  int lda;
  const __half *w, *bias, *gamma, *beta;
  int n, splits;
  __half* out;
  int ldo;
};

// A GEMM tile's whole A panel: rows m0.. of g.a (those from `rows` on zero) from its K slice,
// into a_s as hidden / 64 swizzled tiles; LayerNorm'ed there when g has a gamma. The CTA waits
// for it (and for every copy it requested before).
__device__ __forceinline__ void load_panel(__half* a_s, const Gemm& g, int m0, int slice, int rows, int hidden,
                                           float eps) {
  const int chunks = hidden / kBK;
  const RowSlab<kBM> a(g.a, g.lda, m0, rows, slice * hidden);
  for (int kc = 0; kc < chunks; ++kc) a.copy(a_s + kc * kTileHalves, kc);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  if (g.gamma) {
    layernorm_panel(a_s, g.gamma, g.beta, hidden, eps);
    __syncthreads();
  }
}

// The first kStages - 1 weight chunks of a tile, one commit group each (empty past K).
template <int kBN, int kStages>
__device__ __forceinline__ void prefetch_w(__half* w_s, const RowSlab<kBN>& w, int chunks) {
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) w.copy(w_s + s * kBN * kBK, s);
    cp_async_commit();
  }
}

// acc += the warp's 16 x kWarpN part (rows wm.., columns wn..) of one 64-wide K chunk: a_t [64][64]
// and w_t [kBN][64], both swizzled, through ldmatrix and mma.sync m16n8k16.
template <int kWarpN>
__device__ __forceinline__ void mma_chunk(float (&acc)[kWarpN / 8][4], const __half* a_t, const __half* w_t, int wm,
                                          int wn, int lane) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    uint32_t af[4];
    ldmatrix_x4(af, smem_addr(a_t + swizzle(wm + (lane & 15), 2 * ks + (lane >> 4))));
#pragma unroll
    for (int np = 0; np < kWarpN / 16; ++np) {
      uint32_t b[4];
      const int n = wn + 16 * np + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, smem_addr(w_t + swizzle(n, 2 * ks + ((lane >> 3) & 1))));
      mma(acc[2 * np], af, b[0], b[1]);
      mma(acc[2 * np + 1], af, b[2], b[3]);
    }
  }
}

// acc += the warp's 16 x kWarpN part (rows wm.., columns wn..) of the panel a_s (chunks swizzled
// [64][64] tiles) times the weight chunks streamed through w_s, kStages deep, its first kStages - 1
// chunks already requested (prefetch_w).
template <int kBN, int kStages, int kWarpN>
__device__ __forceinline__ void mma_panel(float (&acc)[kWarpN / 8][4], const __half* a_s, __half* w_s,
                                          const RowSlab<kBN>& w, int chunks, int wm, int wn, int lane) {
  for (int kc = 0; kc < chunks; ++kc) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // chunk kc landed for every thread; chunk kc-1's stage is free
    if (kc + kStages - 1 < chunks) w.copy(w_s + (kc + kStages - 1) % kStages * kBN * kBK, kc + kStages - 1);
    cp_async_commit();
    mma_chunk<kWarpN>(acc, a_s + kc * kTileHalves, w_s + kc % kStages * kBN * kBK, wm, wn, lane);
  }
}

// The Bias, BiasResidual and BiasGelu epilogues of a warp's tile. Thread `lane` holds rows lane/4
// and lane/4 + 8 of its warp's 16, columns 8j + 2 (lane % 4) + {0, 1}.
template <Epi kEpi, int kWarpN>
__device__ __forceinline__ void store_tile(const Gemm& g, const float (&acc)[kWarpN / 8][4], int rows, int row_base,
                                           int col_base, int lane) {
#pragma unroll
  for (int j = 0; j < kWarpN / 8; ++j)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = row_base + (lane >> 2) + 8 * hr, c = col_base + 8 * j + 2 * (lane & 3);
      if (r >= rows || c >= g.n) continue;
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(g.bias + c));
      float v0 = acc[j][2 * hr] + b.x, v1 = acc[j][2 * hr + 1] + b.y;
      __half* out = g.out + static_cast<long long>(r) * g.ldo + c;
      if constexpr (kEpi == Epi::BiasResidual) {
        const float2 res = load_pair(out);
        v0 += res.x;
        v1 += res.y;
      }
      if constexpr (kEpi == Epi::BiasGelu) {
        v0 = gelu_erf(v0);
        v1 = gelu_erf(v1);
      }
      *reinterpret_cast<__half2*>(out) = __floats2half2_rn(v0, v1);
    }
}

// fc2: a warp's part of one K slice's partial sums, fp32, into part [rows, g.n] (through L2).
template <int kWarpN>
__device__ __forceinline__ void store_partial(float* part, const Gemm& g, const float (&acc)[kWarpN / 8][4], int rows,
                                              int row_base, int col_base, int lane) {
#pragma unroll
  for (int j = 0; j < kWarpN / 8; ++j)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = row_base + (lane >> 2) + 8 * hr, c = col_base + 8 * j + 2 * (lane & 3);
      if (r < rows && c < g.n)
        __stcg(reinterpret_cast<float2*>(part + static_cast<long long>(r) * g.n + c),
               make_float2(acc[j][2 * hr], acc[j][2 * hr + 1]));
    }
}

// fc2, by the CTA that completes a tile's last slice: the slices' partial sums (planes of `plane`
// floats) added in slice order, so that the result does not depend on which CTA that is, with the
// bias and the residual, into the tile (m0, n0) of g.out.
template <int kBN>
__device__ __forceinline__ void add_slices(const float* partial, long long plane, const Gemm& g, int rows, int m0,
                                           int n0) {
  for (int i = threadIdx.x; i < kBM * kBN / 2; i += kThreads) {
    const int r = m0 + i / (kBN / 2), c = n0 + 2 * (i % (kBN / 2));
    if (r >= rows || c >= g.n) continue;
    const long long at = static_cast<long long>(r) * g.n + c;
    float2 s = make_float2(0.f, 0.f);
    for (int k = 0; k < g.splits; ++k) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(partial + k * plane + at));
      s.x += v.x;
      s.y += v.y;
    }
    __half* x = g.out + static_cast<long long>(r) * g.ldo + c;
    const float2 res = load_pair(x);
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(g.bias + c));
    *reinterpret_cast<__half2*>(x) = __floats2half2_rn(res.x + s.x + b.x, res.y + s.y + b.y);
  }
}

// The queries q0.. (zero from q_end) of one (image, head) at q into the Q tile q_s, and every key
// and value of the head (at k and v, rows `stride` apart) into key_tiles tiles each at k_s and v_s
// (keys past `tokens` zero); the CTA waits for them. e13's attention phase keeps its own copy of
// these lines: calling this from it changes e13's PTX, and e13 is measured.
__device__ __forceinline__ void load_head(__half* q_s, __half* k_s, __half* v_s, const __half* q, const __half* k,
                                          const __half* v, int stride, int q0, int q_end, int tokens, int key_tiles) {
  using namespace attention::flash;
  load_tile<kBM, kThreads>(q_s, q, stride, q0, q_end);
  for (int t = 0; t < key_tiles; ++t) {
    load_tile<kKeys, kThreads>(k_s + t * kKeys * kD, k, stride, t * kKeys, tokens);
    load_tile<kKeys, kThreads>(v_s + t * kKeys * kD, v, stride, t * kKeys, tokens);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// Attention of one warp's 16 query rows (from row 16 warp of the Q tile q_s) against `tokens`
// keys and values, all in shared memory as key_tiles tiles (v7_flash_mma's tile, by 4 warps of a
// CTA): the softmax state the caller stores with store_rows, once a __syncwarp has ordered every
// lane's reads of its Q rows before they become the output's staging.
__device__ __forceinline__ void attend_rows(attention::flash::Rows<1>& st, const __half* q_s, const __half* k_s,
                                            const __half* v_s, int key_tiles, int tokens, float scale_log2, int warp,
                                            int lane) {
  using namespace attention::flash;
  uint32_t qf[1][4][4];
  load_q_fragments<1>(qf, q_s, 16 * warp, lane);
  st.init();
  for (int t = 0; t < key_tiles; ++t) {
    const int valid = tokens - t * kKeys;
    if (valid >= kKeys)
      mma_tile<1, false>(qf, k_s + t * kKeys * kD, v_s + t * kKeys * kD, st, kKeys, scale_log2, lane);
    else
      mma_tile<1, true>(qf, k_s + t * kKeys * kD, v_s + t * kKeys * kD, st, valid, scale_log2, lane);
  }
}

// The parameters both kernels take about the forward (their Params types differ beyond these):
// the blocks' weights, the sizes, LayerNorm's epsilon (timm's), the softmax scale, and the
// residual stream x, the attention output and the MLP hidden.
template <class Params>
void set_forward(Params& prm, const Problem& p, const BlockView* layers, int rows, __half* x, __half* attn,
                 __half* h) {
  prm.layers = layers;
  prm.n_layers = p.model.layers;
  prm.rows = rows;
  prm.tokens = p.tokens();
  prm.hidden = p.model.hidden;
  prm.heads = p.model.heads;
  prm.eps = layernorm::Problem{}.eps;
  prm.scale_log2 = attention::flash::scale_log2();
  prm.x = x;
  prm.attn = attn;
  prm.h = h;
}

// Why the persistent kernels cannot compute p's blocks (head_dim 64, hidden a multiple of 64 up
// to kMaxHidden, MLP 4 x hidden); empty when they can.
inline std::string refuses_shape(const Problem& p) {
  const int D = p.model.hidden;
  if (p.model.head_dim() != attention::flash::kD)
    return "head_dim " + std::to_string(p.model.head_dim()) + " is not 64";
  if (D % kBK || D > kMaxHidden) return "hidden " + std::to_string(D) + " is not a multiple of 64 up to 1024";
  if (p.model.mlp() != 4 * D) return "the MLP is not 4 x hidden";
  return {};
}

// Shared memory of a CTA that runs a 64 x bn GEMM with `stages` weight chunks in flight and the
// A panel whole, or the attention of 64 queries with every key and value of `tokens`.
inline std::size_t smem_bytes(int hidden, int tokens, int bn, int stages) {
  using attention::flash::kD;
  using attention::flash::kKeys;
  const std::size_t gemm = sizeof(__half) * (static_cast<std::size_t>(hidden) * kBM + stages * bn * kBK);
  const std::size_t key_tiles = (tokens + kKeys - 1) / kKeys;
  const std::size_t attn = sizeof(__half) * (kBM * kD + 2 * key_tiles * kKeys * kD);
  return std::max(gemm, attn);
}

}  // namespace encoder::panel
