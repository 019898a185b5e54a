// v11_e4m3_next_first: v10_e4m3_qkv with the second key tile requested in the source before the
// first is widened (flash_wgmma.cuh, E4M3Tiles<true>), as v9's cp.async pipeline asks for it.
// Measured: ptxas had already ordered v10 so, and the two kernels are the same instructions
// (NOTES.md). Its fp16 launch, the family's contract, is v9's kernel under this version's own
// symbols.
#include "attention/flash_wgmma.cuh"

namespace attention {
namespace {

constexpr auto kVariant = flash_wgmma::Variant::e4m3_next_first;

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  flash_wgmma::launch<kVariant>(p, a, stream, "v11_e4m3_next_first");
}

void launch_e4m3_qkv(const Problem& p, const __nv_fp8_e4m3* qkv, float qkv_scale, __nv_fp8_e4m3* out,
                     const float* inv_scale, cudaStream_t stream) {
  flash_wgmma::launch<kVariant>(p, qkv, qkv_scale, out, inv_scale, stream, "v11_e4m3_next_first");
}

}  // namespace

extern const Version v11_e4m3_next_first{
    {"v11_e4m3_next_first", flash_wgmma::supports, launch, flash_wgmma::unavailable}, nullptr, launch_e4m3_qkv};

}  // namespace attention
