// v7_implicit_wgmma: v6_implicit_gemm with Hopper's warpgroup MMA (wgmma) in place of
// mma.sync. Same loader (implicit_gemm.cuh: tiles read straight from the NCHW image by
// cp.async into 128-byte-swizzled rows), same token-row epilogue; the main loop changes
// (implicit_wgmma.cuh). The block tile is 128 x 128, or 128 x 64 where hidden is not a multiple
// of 128.
#include "patch_embed/implicit_wgmma.cuh"

namespace patch_embed {
namespace {

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  const implicit_gemm::Params p = implicit_wgmma::checked_params("v7_implicit_wgmma", pr, a);
  if (p.hidden % 128 == 0)
    implicit_wgmma::launch<128>(p, stream);
  else
    implicit_wgmma::launch<64>(p, stream);
}

}  // namespace

extern const Version v7_implicit_wgmma = implicit_wgmma::version_record("v7_implicit_wgmma", launch);

}  // namespace patch_embed
