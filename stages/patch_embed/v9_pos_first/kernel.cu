// v9_pos_first: v8_balanced_tiles (implicit_wgmma.cuh, N tile per shape by n_tile.hpp) with
// the epilogue's position-embedding reads issued together before its stores, so that a block
// waits for one L2 round trip there instead of one per row it writes.
#include "patch_embed/implicit_wgmma.cuh"
#include "patch_embed/v8_balanced_tiles/n_tile.hpp"

namespace patch_embed {
namespace {

constexpr const char* kName = "v9_pos_first";

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  const implicit_gemm::Params p = implicit_wgmma::checked_params(kName, pr, a);
  const int n_tile = balanced_tiles::pick(implicit_gemm::m_tiles(p), p.hidden, implicit_wgmma::sm_count());
  implicit_wgmma::launch_n_tile<true>(kName, n_tile, p, stream);
}

}  // namespace

void balanced_tiles::launch_v9_with_n_tile(int n_tile, const Problem& pr, const Args& a, cudaStream_t stream) {
  implicit_wgmma::launch_n_tile<true>(kName, n_tile, implicit_wgmma::checked_params(kName, pr, a), stream);
}

extern const Version v9_pos_first = [] {
  Version v{};
  v.name = kName;
  v.supports = implicit_wgmma::supports;
  v.launch = launch;
  v.unavailable = sm90::wgmma_unavailable;
  return v;
}();

}  // namespace patch_embed
