// v4_multiwarp: v3 with 4 warps per block (64 query rows): each K/V tile loaded
// into shared memory serves 4 warps instead of 1.
#include "attention/tiled.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  using namespace tiled;
  tiled::launch<4, Loads::Vector, Scores::Wmma, KLayout::Transposed>(p, a, stream, "v4_multiwarp");
}

}  // namespace

extern const Version v4_multiwarp{"v4_multiwarp", check_tiled, launch};

}  // namespace attention
