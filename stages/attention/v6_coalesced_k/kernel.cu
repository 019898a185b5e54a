// v6_coalesced_k: v5 without the transposing K loader: WMMA reads K [key][d] as a
// column-major B operand, so K is loaded with the coalesced 16-byte loader like Q and V.
#include "attention/tiled.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  using namespace tiled;
  tiled::launch<8, Loads::Vector, Scores::Wmma, KLayout::Rows>(p, a, stream, "v6_coalesced_k");
}

}  // namespace

extern const Version v6_coalesced_k{"v6_coalesced_k", check_tiled, launch};

}  // namespace attention
