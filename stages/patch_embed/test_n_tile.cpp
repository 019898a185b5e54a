// CPU test of v8_balanced_tiles' N-tile choice (patch_embed/n_tile.hpp): the widest tile
// unless a narrower one shortens the last wave, and only widths that divide hidden.
#include <doctest/doctest.h>
#include "patch_embed/n_tile.hpp"

using patch_embed::balanced_tiles::pick;

namespace {
long long m_tiles(int batch, int image_size) {
  const long long side = image_size / 16;
  return (batch * side * side + 127) / 128;
}
}  // namespace

TEST_CASE("vit_b at 224 px on 132 SMs: 96 where 128 leaves a third wave on 30 SMs, else 128") {
  // Batch 32: 49 m tiles. 128 wide: 294 blocks, 3 per busiest SM = 384 columns; 96 wide: 392
  // blocks, 3 per SM = 288 columns; 64 wide: 588 blocks, 5 per SM = 320 columns.
  CHECK(m_tiles(32, 224) == 49);
  CHECK(pick(49, 768, 132) == 96);
  // Batch 256: 392 m tiles; 128 and 96 tie (18 x 128 = 24 x 96 = 36 x 64): the wider tile.
  CHECK(pick(m_tiles(256, 224), 768, 132) == 128);
  // Batch 1: 2 m tiles, every width a single wave: the narrowest, least work per block.
  CHECK(pick(m_tiles(1, 224), 768, 132) == 64);
}

TEST_CASE("only widths that divide hidden are candidates") {
  CHECK(pick(392, 1024, 132) == 128);  // vit_l: 96 does not divide 1024
  CHECK(pick(392, 192, 132) != 128);   // vit_ti: 128 does not divide 192
  CHECK(pick(392, 320, 132) == 64);    // only 64 divides 320
  CHECK(pick(392, 100, 132) == 0);     // none: supports() refuses such a hidden size
}

TEST_CASE("a GPU with enough SMs for one wave gets the narrowest tile, a single SM the widest") {
  CHECK(pick(49, 768, 10000) == 64);
  CHECK(pick(49, 768, 1) == 128);  // all widths do the same work on one SM: the tie goes wide
}

using patch_embed::balanced_tiles::pick_by_rounds;

TEST_CASE("v10's pick counts rounds of 2 blocks per SM: the widest unless all fit in one round") {
  // 132 SMs: 264 blocks per round. vit_b (hidden 768): 6 / 8 / 12 blocks per m tile.
  // Batch 1-4 at 224 px (2-7 m tiles): every width one round: the narrowest.
  CHECK(pick_by_rounds(m_tiles(1, 224), 768, 132) == 64);
  CHECK(pick_by_rounds(m_tiles(4, 224), 768, 132) == 64);
  // 224 px batch 16 (25 m tiles): 150 and 200 blocks are one round, 300 are two: 96.
  CHECK(pick_by_rounds(m_tiles(16, 224), 768, 132) == 96);
  // 224 px batch 32 (49): 294 / 392 / 588 blocks = 2 / 2 / 3 rounds: the widest of the two.
  CHECK(pick_by_rounds(m_tiles(32, 224), 768, 132) == 128);
  // Where v8's column count picked narrow and lost to 128 in the full sweep (v8's NOTES):
  CHECK(pick_by_rounds(m_tiles(16, 384), 768, 132) == 128);   // v8: 64
  CHECK(pick_by_rounds(m_tiles(256, 384), 768, 132) == 128);  // v8: 96 (27 vs 35 rounds)
  CHECK(pick_by_rounds(m_tiles(256, 512), 768, 132) == 128);  // v8: 64 (47 vs 94 rounds)
  CHECK(pick_by_rounds(m_tiles(64, 224), 768, 132) == 128);   // v8: 96 (3 rounds each)
  // Only widths that divide hidden; none: 0.
  CHECK(pick_by_rounds(392, 1024, 132) == 128);
  CHECK(pick_by_rounds(2, 192, 132) == 64);  // vit_ti: 128 does not divide 192, one round: 64
  CHECK(pick_by_rounds(392, 100, 132) == 0);
}
