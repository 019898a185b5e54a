// The tile-scheduled kernel's GEMM mainloops (tile_a, tile_mma): a 64 x 64 output tile's
// products over K into fp32 accumulators, 8 warps each holding rows 16 (warp % 4).. and columns
// 32 (warp / 4).. of the tile in mma.sync's m16n8 accumulator layout, whichever instruction made
// them, so the epilogues are one. The weights' first chunks were requested before the task's
// wait (prefetch_w, one commit group each); the mainloop requests the rest.
//
// A mainloop tells its task's hooks (epilogue.cuh's FoldedStats, or NoHooks) when its first A
// chunks are in flight and when each chunk of A sits in shared memory, so a folded LayerNorm
// combines or gathers its rows' statistics while the products are made.
#pragma once
#include "device/sm90.cuh"
#include "encoder/tiled_task.cuh"

namespace encoder::tiled {

namespace {

// The warp's place in the tile.
struct WarpTile {
  int warp, lane, wm, wn;
  __device__ __forceinline__ WarpTile()
      : warp(threadIdx.x / 32), lane(threadIdx.x % 32), wm(16 * (warp & 3)), wn(32 * (warp >> 2)) {}
};

// Hooks of a task whose LayerNorm, if any, is not folded into it.
struct NoHooks {
  __device__ __forceinline__ void start(const Params&, const GemmTask&, int) {}
  __device__ __forceinline__ void chunk(const Params&, const __half*, int, int) {}
};

// tile_a=resident: the task's whole A panel (64 rows x `hidden`, fc2 a quarter of its K) lands in
// shared memory at once, so a LayerNorm before the GEMM (tile_ln=panel) normalizes it there; the
// weights stream through a kStages-deep cp.async pipeline after it. mma.sync only (e24's e13
// code, panel.cuh).
struct ResidentA {
  static constexpr int kWeightStages = kStages;
  __device__ __forceinline__ static __half* weights(__half* smem, int hidden) {
    return smem + hidden / kBK * kTileHalves;
  }

  template <bool kWgmma, class Hooks>
  __device__ __forceinline__ static void run(float (&acc)[4][4], const WarpTile& at, const Params& p,
                                             const GemmTask& g, __half* a_s, __half* w_s, Hooks&) {
    static_assert(!kWgmma, "wgmma reads its operands from the streamed stages");
    const int hidden = p.hidden, chunks = hidden / kBK;
    const RowSlab<kBN> w = weight_rows(g, hidden);
    load_panel(a_s, g, g.m0, g.slice, p.rows, hidden, p.eps);
    mma_panel<kBN, kStages, 32>(acc, a_s, w_s, w, chunks, at.wm, at.wn, at.lane);
    cp_async_wait<0>();  // the empty groups past K: nothing outstanding when the next task starts
  }
};

// One stage's products on wgmma (tile_mma=wgmma): the warpgroup's 64 x 32 half of the tile,
// K = 64 (4 steps of 16), both operands read from the stages through descriptors (which is why
// the stages are 1024-byte aligned: the hardware's 128-byte swizzle is the XOR layout the copies
// write).
__device__ __forceinline__ void wgmma_chunk(float (&acc)[4][4], const __half* a_t, const __half* w_t, int group,
                                            bool first) {
#ifdef STUDY_WGMMA
  float(&d)[16] = reinterpret_cast<float(&)[16]>(acc);
  const uint64_t a_desc = sm90::tile_desc(smem_addr(a_t));
  const uint64_t b_desc = sm90::tile_desc(smem_addr(w_t + 32 * group * kBK));  // the group's 32 weight rows
  sm90::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) sm90::wgmma_ss_n32(d, a_desc + 2 * ks, b_desc + 2 * ks, first && ks == 0 ? 0 : 1);
  sm90::wgmma_commit();
  sm90::wgmma_wait_all();  // the stage is refilled after the next barrier
  sm90::reg_fence(d);
#else
  (void)acc, (void)a_t, (void)w_t, (void)group, (void)first;
  __trap();
#endif
}

// tile_a=streamed: the A panel streams with the weights, chunk by chunk, kStreamStages deep, so a
// task needs 16 KB a stage and two CTAs fit an SM. A's first chunks follow the weights' as one
// group once the task's inputs exist. kWgmma: the products on wgmma, else mma.sync from ldmatrix
// fragments.
struct StreamedA {
  static constexpr int kWeightStages = kStreamStages;
  __device__ __forceinline__ static __half* weights(__half* smem, int) { return smem + kStreamStages * kTileHalves; }

  template <bool kWgmma, class Hooks>
  __device__ __forceinline__ static void run(float (&acc)[4][4], const WarpTile& at, const Params& p,
                                             const GemmTask& g, __half* a_s, __half* w_s, Hooks& hooks) {
    const int hidden = p.hidden, chunks = hidden / kBK;
    const RowSlab<kBN> w = weight_rows(g, hidden);
    const RowSlab<kBM> a(g.a, g.lda, g.m0, p.rows, g.slice * hidden);
#pragma unroll
    for (int s = 0; s < kStreamStages - 1; ++s)
      if (s < chunks) a.copy(a_s + s * kTileHalves, s);
    cp_async_commit();
    // Warp-uniform by construction (a shuffle from lane 0), so that ptxas can see no wgmma sits
    // under a divergent branch.
    const int group = __shfl_sync(0xffffffffu, at.warp >> 2, 0);
    hooks.start(p, g, hidden);
    for (int kc = 0; kc < chunks; ++kc) {
      // Chunk kc's A and weights landed: at the first chunk everything requested so far; then the
      // groups of the chunks after it may still be in flight.
      if (kc == 0)
        cp_async_wait<0>();
      else
        cp_async_wait<kStreamStages - 2>();
#ifdef STUDY_WGMMA
      if constexpr (kWgmma) sm90::fence_proxy_async();  // the copies' writes, before wgmma reads them
#endif
      __syncthreads();  // for every thread; chunk kc-1's stages are free
      const int next = kc + kStreamStages - 1;
      if (next < chunks) {
        a.copy(a_s + next % kStreamStages * kTileHalves, next);
        w.copy(w_s + next % kStreamStages * kBN * kBK, next);
      }
      cp_async_commit();
      const __half* a_t = a_s + kc % kStreamStages * kTileHalves;
      const __half* w_t = w_s + kc % kStreamStages * kBN * kBK;
      if constexpr (kWgmma)
        wgmma_chunk(acc, a_t, w_t, group, kc == 0);
      else
        mma_chunk<32>(acc, a_t, w_t, at.wm, at.wn, at.lane);
      hooks.chunk(p, a_t, kc, chunks);  // the stage is refilled only after the next barrier
    }
    cp_async_wait<0>();  // the empty groups past K
  }
};

template <class P>
using Mainloop = std::conditional_t<P::kStreamed, StreamedA, ResidentA>;

}  // namespace

}  // namespace encoder::tiled
