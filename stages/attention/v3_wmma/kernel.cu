// v3_wmma: v2 with Q K^T on tensor cores (WMMA 16x16x16, fp32 accumulators). K is
// stored transposed, as the row-major B operand, by a loader with one thread per key: its
// global loads are strided again. P V stays on CUDA cores.
#include "attention/tiled.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  using namespace tiled;
  tiled::launch<1, Loads::Vector, Scores::Wmma, KLayout::Transposed>(p, a, stream, "v3_wmma");
}

}  // namespace

extern const Version v3_wmma{"v3_wmma", check_tiled, launch};

}  // namespace attention
