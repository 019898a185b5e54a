// v8_balanced_tiles: v7_implicit_wgmma's kernel (implicit_wgmma.cuh) with the block's N tile
// picked per shape from 128, 96 and 64 (n_tile.hpp): the width whose busiest SM gets the least
// work, so that the last wave is not a whole extra tile on a few SMs.
#include "patch_embed/implicit_wgmma.cuh"

namespace patch_embed {
namespace {

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_balanced<false>("v8_balanced_tiles", pr, a, stream);
}

}  // namespace

void balanced_tiles::launch_v8_with_n_tile(int n_tile, const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_balanced<false>("v8_balanced_tiles", pr, a, stream, n_tile);
}

extern const Version v8_balanced_tiles = implicit_wgmma::version_record("v8_balanced_tiles", launch);

}  // namespace patch_embed
