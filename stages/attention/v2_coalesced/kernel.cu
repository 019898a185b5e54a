// v2_coalesced: v1 with the coalesced loader: 16 bytes per thread, 8 threads per 128-byte
// row of Q, K or V.
#include "attention/tiled.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  using namespace tiled;
  tiled::launch<1, Loads::Vector, Scores::Simt, KLayout::Rows>(p, a, stream, "v2_coalesced");
}

}  // namespace

extern const Version v2_coalesced{"v2_coalesced", check_tiled, launch};

}  // namespace attention
