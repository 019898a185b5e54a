// v10_round_tiles: v9_pos_first (implicit_wgmma.cuh, position-embedding reads issued together)
// with the N tile picked by rounds of resident blocks instead of columns of work
// (balanced_tiles::pick_by_rounds): a narrower tile only where every width fits in one round.
#include "patch_embed/implicit_wgmma.cuh"

namespace patch_embed {
namespace {

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_balanced<true>("v10_round_tiles", pr, a, stream, 0, balanced_tiles::pick_by_rounds);
}

}  // namespace

void balanced_tiles::launch_v10_with_n_tile(int n_tile, const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_balanced<true>("v10_round_tiles", pr, a, stream, n_tile);
}

extern const Version v10_round_tiles = implicit_wgmma::version_record("v10_round_tiles", launch);

}  // namespace patch_embed
