// v1_smem_tiling: one warp per 16 query rows; K and V tiles of 64 keys staged in
// shared memory and shared by the warp's rows, scores and P V on CUDA cores (tiled.cuh). The
// tile loader gives consecutive threads consecutive rows, one element each: uncoalesced.
#include "attention/tiled.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  using namespace tiled;
  tiled::launch<1, Loads::Scalar, Scores::Simt, KLayout::Rows>(p, a, stream, "v1_smem_tiling");
}

}  // namespace

extern const Version v1_smem_tiling{"v1_smem_tiling", check_tiled, launch};

}  // namespace attention
