// The mma.sync part of the flash-style attention (v7_flash_mma, and the attention phase of
// the encoder's persistent kernel): Q fragments, and one 64-key tile of S = Q K^T, online
// softmax and O += P V for a warp of kMTiles x 16 query rows.
#pragma once
#include <cstdint>
#include "attention/flash.cuh"

namespace attention::flash {

using study::tiles::ldmatrix_x4;
using study::tiles::ldmatrix_x4_trans;
using study::tiles::mma;

// Q fragments of a warp's kMTiles x 16 rows (from row `wrow` of a swizzled Q tile) for the 4
// k-steps over d: matrices (rows +0..7, chunk 2ks), (+8..15, 2ks), (+0..7, 2ks+1), (+8..15, 2ks+1).
template <int kMTiles>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[kMTiles][4][4], const __half* q_s, int wrow,
                                                 int lane) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      ldmatrix_x4(qf[mt][ks], smem_addr(q_s + swizzle(wrow + 16 * mt + (lane & 15), 2 * ks + (lane >> 4))));
}

// One 64-key tile for one warp of kMTiles x 16 query rows. kRagged: the sequence ends inside
// this tile after `valid` keys; whole 16-key groups past it are skipped (online_softmax masks
// the rest to -inf).
template <int kMTiles, bool kRagged>
__device__ __forceinline__ void mma_tile(const uint32_t (&qf)[kMTiles][4][4], const __half* k_s,
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

}  // namespace attention::flash
