// v7_flash: flash attention on Hopper's asynchronous warpgroup MMA (wgmma, sm_90a); the same
// algorithm as v7_flash_mma, which runs it on mma.sync. The kernel (flash_wgmma.cuh) is shared
// with v8_exact_tail; v7_flash computes every key tile, the ragged last one included, at the
// full 64 keys.
#include "attention/flash_wgmma.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  flash_wgmma::launch<flash_wgmma::Variant::full_tail>(p, a, stream, "v7_flash");
}

}  // namespace

extern const Version v7_flash{"v7_flash", flash_wgmma::supports, launch, flash_wgmma::unavailable};

}  // namespace attention
