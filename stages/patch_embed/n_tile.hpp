// The N tile (the block's columns) of v8_balanced_tiles, v9_pos_first and v10_round_tiles, picked per shape:
// host-only, so that the CPU suite checks the choice and the GPU suite can run the kernel at every width it may
// pick.
#pragma once
#include <cuda_runtime.h>
#include <initializer_list>
#include "patch_embed/patch_embed.hpp"

namespace patch_embed::balanced_tiles {

// The widths the kernel is instantiated for, widest first.
constexpr std::initializer_list<int> kWidths = {128, 96, 64};

// Of the widths that divide `hidden`, the one whose busiest SM gets the least work when
// m_tiles x (hidden / n) blocks are spread over `sms` SMs: ceil(blocks / sms) x n columns of
// 128 rows. A wide tile needs fewer L2 bytes per FLOP, so ties go to the wider one. The model
// assumes the SMs' rate does not depend on how many blocks share them (2 blocks per SM for
// every width): it prices the wave tail, which is what separates the widths.
// 0 when no width divides `hidden`.
inline int pick(long long m_tiles, int hidden, int sms) {
  int best = 0;
  long long best_work = 0;
  for (int n : kWidths) {
    if (hidden % n) continue;
    const long long blocks = m_tiles * (hidden / n);
    const long long work = (blocks + sms - 1) / sms * n;
    if (best == 0 || work < best_work) {
      best = n;
      best_work = work;
    }
  }
  return best;
}

// Blocks resident per SM, for every width (shared memory allows 2).
constexpr int kBlocksPerSm = 2;

// v10_round_tiles' choice. The kernel is latency-bound, so a block costs about the same whatever
// its width (v8_balanced_tiles/NOTES.md, measured over the full sweep): count rounds of
// kBlocksPerSm blocks on every SM, not columns. The width with the fewest rounds; among those,
// the narrowest when it is a single round (a narrower block finishes sooner, and nothing waits
// behind it), else the widest (each A tile is gathered fewer times). 0 when no width divides
// `hidden`.
inline int pick_by_rounds(long long m_tiles, int hidden, int sms) {
  int best = 0;
  long long best_rounds = 0;
  const long long slots = static_cast<long long>(sms) * kBlocksPerSm;
  for (int n : kWidths) {  // widest first
    if (hidden % n) continue;
    const long long rounds = (m_tiles * (hidden / n) + slots - 1) / slots;
    if (best == 0 || rounds < best_rounds || (rounds == best_rounds && rounds == 1)) {
      best = n;
      best_rounds = rounds;
    }
  }
  return best;
}

// The launches of v8_balanced_tiles, v9_pos_first and v10_round_tiles with a given N tile (one
// of kWidths dividing the problem's hidden size) instead of their pick's: what the GPU suite
// uses to check every width at small shapes.
void launch_v8_with_n_tile(int n_tile, const Problem& p, const Args& a, cudaStream_t stream);
void launch_v9_with_n_tile(int n_tile, const Problem& p, const Args& a, cudaStream_t stream);
void launch_v10_with_n_tile(int n_tile, const Problem& p, const Args& a, cudaStream_t stream);

}  // namespace patch_embed::balanced_tiles
