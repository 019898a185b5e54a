// v8_balanced_tiles: v7_implicit_wgmma's kernel (implicit_wgmma.cuh) with the block's N tile
// picked per shape from 128, 96 and 64 (n_tile.hpp): the width whose busiest SM gets the least
// work, so that the last wave is not a whole extra tile on a few SMs.
#include "patch_embed/implicit_wgmma.cuh"
#include "patch_embed/v8_balanced_tiles/n_tile.hpp"

namespace patch_embed {
namespace {

constexpr const char* kName = "v8_balanced_tiles";

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  const implicit_gemm::Params p = implicit_wgmma::checked_params(kName, pr, a);
  const int n_tile = balanced_tiles::pick(implicit_gemm::m_tiles(p), p.hidden, implicit_wgmma::sm_count());
  implicit_wgmma::launch_n_tile<false>(kName, n_tile, p, stream);
}

}  // namespace

void balanced_tiles::launch_v8_with_n_tile(int n_tile, const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_n_tile<false>(kName, n_tile, implicit_wgmma::checked_params(kName, pr, a), stream);
}

extern const Version v8_balanced_tiles = [] {
  Version v{};
  v.name = kName;
  v.supports = implicit_wgmma::supports;
  v.launch = launch;
  v.unavailable = sm90::wgmma_unavailable;
  return v;
}();

}  // namespace patch_embed
