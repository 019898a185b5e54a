// v8_balanced_tiles: v7_implicit_wgmma's kernel (implicit_wgmma.cuh) with the block's N tile
// picked per shape from 128, 96 and 64 (n_tile.hpp): the width whose busiest SM gets the least
// work, so that the last wave is not a whole extra tile on a few SMs.
#include <string>
#include "patch_embed/implicit_wgmma.cuh"
#include "patch_embed/v8_balanced_tiles/n_tile.hpp"

namespace patch_embed {
namespace {

constexpr const char* kName = "v8_balanced_tiles";

void launch_tile(int n_tile, const implicit_gemm::Params& p, cudaStream_t stream) {
  switch (n_tile) {
    case 128: return implicit_wgmma::launch<128>(p, stream);
    case 96: return implicit_wgmma::launch<96>(p, stream);
    case 64: return implicit_wgmma::launch<64>(p, stream);
    default:
      throw study::StudyError(study::ErrorKind::Usage,
                              std::string(kName) + ": no " + std::to_string(n_tile) + "-wide N tile (128, 96 or 64)");
  }
}

int sm_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

void launch(const Problem& pr, const Args& a, cudaStream_t stream) {
  const implicit_gemm::Params p = implicit_wgmma::checked_params(kName, pr, a);
  launch_tile(balanced_tiles::pick(implicit_gemm::m_tiles(p), p.hidden, sm_count()), p, stream);
}

}  // namespace

void balanced_tiles::launch_with_n_tile(int n_tile, const Problem& pr, const Args& a, cudaStream_t stream) {
  const implicit_gemm::Params p = implicit_wgmma::checked_params(kName, pr, a);
  if (p.hidden % n_tile)
    throw study::StudyError(study::ErrorKind::Usage, std::string(kName) + ": hidden " + std::to_string(p.hidden) +
                                                         " is not a multiple of the N tile " + std::to_string(n_tile));
  launch_tile(n_tile, p, stream);
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
