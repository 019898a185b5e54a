// v5_large_tile: v4 with 8 warps per block (128 query rows): each K/V tile serves
// 8 warps.
#include "attention/tiled.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  using namespace tiled;
  tiled::launch<8, Loads::Vector, Scores::Wmma, KLayout::Transposed>(p, a, stream, "v5_large_tile");
}

}  // namespace

extern const Version v5_large_tile{"v5_large_tile", check_tiled, launch};

}  // namespace attention
