// The tile-scheduled kernel's tasks other than GEMMs: a row tile's LayerNorm (tile_ln=tasks) and
// 64 rows of one head's attention. Attention tasks hold, for each image among their rows, its Q
// rows and every key and value of the head in shared memory, and 4 warps run v7_flash_mma's tile
// over them.
#pragma once
#include "attention/flash_mma.cuh"
#include "encoder/tiled_task.cuh"
#include "layernorm/layernorm.hpp"

namespace encoder::tiled {

namespace {

// A LayerNorm task of a form whose A panels stream (e26 on): a warp per row, straight from the
// residual stream (through L2: other CTAs wrote it) to ln, no shared memory.
__device__ void layernorm_rows(const Params& p, const DeviceTask& t) {
  constexpr int kChunks = kMaxHidden / 8 / 32;
  const BlockView w = p.layers[t.block];
  const bool second = static_cast<Kind>(t.kind) == Kind::Ln2;
  const __half* gamma = second ? w.ln2_g : w.ln1_g;
  const __half* beta = second ? w.ln2_b : w.ln1_b;
  const int hidden = p.hidden, chunks = hidden / 8, warp = threadIdx.x / 32;
  for (int r = t.row_tile * kBM + warp; r < min((t.row_tile + 1) * kBM, p.rows); r += kThreads / 32) {
    const __half* row = p.x + static_cast<long long>(r) * hidden;
    float v[kChunks][8];
    const float2 stats = study::warp_row_stats<kChunks>(
        [row](int i) {
          const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(row + 8 * i));
          return *reinterpret_cast<const study::HalfVec<8>*>(&raw);
        },
        hidden, p.eps, v);
    __half* out = p.ln + static_cast<long long>(r) * hidden;
    normalize_row(v, stats, gamma, beta, chunks, [out](int i) { return out + 8 * i; });
  }
}

// A LayerNorm task of a form whose A panels are resident (e25): 64 rows of the residual stream
// normalized in shared memory (as a GEMM task's panel) and stored to ln, rows past the batch left
// alone.
__device__ void layernorm_task(const Params& p, const DeviceTask& t, __half* a_s) {
  const BlockView w = p.layers[t.block];
  const bool second = static_cast<Kind>(t.kind) == Kind::Ln2;
  const int hidden = p.hidden, m0 = t.row_tile * kBM;
  Gemm rows{};  // the panel's part of a GEMM: its A and its LayerNorm
  rows.a = p.x;
  rows.lda = hidden;
  rows.gamma = second ? w.ln2_g : w.ln1_g;
  rows.beta = second ? w.ln2_b : w.ln1_b;
  load_panel(a_s, rows, m0, 0, p.rows, hidden, p.eps);
  const int per_row = hidden / 8;  // 16-byte chunks
  for (int i = threadIdx.x; i < kBM * per_row; i += kThreads) {
    const int r = i / per_row, c = i % per_row;
    if (m0 + r >= p.rows) break;
    *reinterpret_cast<uint4*>(p.ln + static_cast<long long>(m0 + r) * hidden + 8 * c) =
        *reinterpret_cast<const uint4*>(a_s + c / 8 * kTileHalves + swizzle(r, c % 8));
  }
}

// Attention of rows [64 row_tile, +64) for one head. The rows may hold the end of one image and
// the start of the next: each image's part is its own pass, with that image's keys and values.
__device__ void attention_task(const Params& p, const __half* qkv, int row_tile, int head, __half* smem) {
  using namespace attention::flash;
  const int T = p.tokens, key_tiles = (T + kKeys - 1) / kKeys, width = p.hidden, stride = 3 * p.hidden;
  const int r0 = row_tile * kBM, r1 = min(r0 + kBM, p.rows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __half* q_s = smem;
  __half* k_s = q_s + kBM * kD;
  __half* v_s = k_s + key_tiles * kKeys * kD;
  for (int image = r0 / T; image * T < r1; ++image) {
    const int t0 = max(r0, image * T) - image * T, t1 = min(r1, (image + 1) * T) - image * T;
    const __half* q = qkv + static_cast<long long>(image) * T * stride + head * kD;
    load_head(q_s, k_s, v_s, q, q + width, q + 2 * width, stride, t0, t1, T, key_tiles);
    const int row0 = t0 + 16 * warp;
    if (warp < 4 && row0 < t1) {
      Rows<1> st;
      attend_rows(st, q_s, k_s, v_s, key_tiles, T, p.scale_log2, warp, lane);
      __syncwarp();  // the warp's Q rows become its output staging once every lane has read them
      store_rows(st, q_s + 16 * warp * kD, p.attn + static_cast<long long>(image) * T * width + head * kD, width,
                 row0, t1, lane);
    }
    __syncthreads();  // the next image's pass reuses the shared memory
  }
}

}  // namespace

}  // namespace encoder::tiled
