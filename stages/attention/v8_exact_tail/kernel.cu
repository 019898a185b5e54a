// v8_exact_tail: v7_flash with the ragged last key tile computed at the width of the keys it
// holds, rounded up to 16 (5 keys of 64 at 197 tokens, 1 at 577 and 1025): S on a narrower
// m64nN wgmma (N = 16, 32 or 48) and P V over only that tile's 16-key steps. The kernel is
// v7_flash's (flash_wgmma.cuh), one instantiation per width, picked on the host.
#include "attention/flash_wgmma.cuh"

namespace attention {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  flash_wgmma::launch<flash_wgmma::Variant::exact_tail>(p, a, stream, "v8_exact_tail");
}

}  // namespace

extern const Version v8_exact_tail{"v8_exact_tail", flash_wgmma::supports, launch, flash_wgmma::unavailable};

}  // namespace attention
