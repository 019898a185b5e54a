// v9_pos_first: v8_balanced_tiles (implicit_wgmma.cuh, N tile per shape by n_tile.hpp) with
// the epilogue's position-embedding reads issued together before its stores, so that a block
// waits for one L2 round trip there instead of one per row it writes.
#include "patch_embed/implicit_wgmma.cuh"

namespace patch_embed {
namespace {

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_balanced<true>("v9_pos_first", pr, a, stream);
}

}  // namespace

void balanced_tiles::launch_v9_with_n_tile(int n_tile, const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_balanced<true>("v9_pos_first", pr, a, stream, n_tile);
}

extern const Version v9_pos_first = implicit_wgmma::version_record("v9_pos_first", launch);

}  // namespace patch_embed
