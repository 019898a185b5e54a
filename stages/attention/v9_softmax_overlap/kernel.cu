// v9_softmax_overlap: v8_exact_tail with each key tile's softmax run while the previous tile's
// P V is still on the tensor cores: S(j+1) is issued before P V(j) and only it is waited on, and
// the wait for P V(j) moves after the softmax of tile j+1 (flash_wgmma.cuh, Variant). It can
// also write its output in E4M3 for an FP8 projection (Version::launch_e4m3).
#include "attention/flash_wgmma.cuh"

namespace attention {
namespace {

constexpr auto kVariant = flash_wgmma::Variant::softmax_overlap;

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  flash_wgmma::launch<kVariant>(p, a, stream, "v9_softmax_overlap");
}

void launch_e4m3(const Problem& p, const __half* qkv, __nv_fp8_e4m3* out, const float* inv_scale,
                 cudaStream_t stream) {
  flash_wgmma::launch<kVariant>(p, qkv, 1.f, out, inv_scale, stream, "v9_softmax_overlap");
}

}  // namespace

extern const Version v9_softmax_overlap{
    {"v9_softmax_overlap", flash_wgmma::supports, launch, flash_wgmma::unavailable}, launch_e4m3};

}  // namespace attention
