// v10_e4m3_qkv: v9_softmax_overlap reading Q, K and V in E4M3, as an FP8 block's QKV GEMM can
// write them (Version::launch_e4m3_qkv): half the bytes in, widened to v9's fp16 tiles in shared
// memory, v9's products and softmax unchanged (flash_wgmma.cuh, E4M3Tiles). Its fp16 launch, the
// family's contract, is v9's kernel under this version's own symbols.
#include "attention/flash_wgmma.cuh"

namespace attention {
namespace {

constexpr auto kVariant = flash_wgmma::Variant::e4m3_qkv;

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  flash_wgmma::launch<kVariant>(p, a, stream, "v10_e4m3_qkv");
}

void launch_e4m3_qkv(const Problem& p, const __nv_fp8_e4m3* qkv, float qkv_scale, __nv_fp8_e4m3* out,
                     const float* inv_scale, cudaStream_t stream) {
  flash_wgmma::launch<kVariant>(p, qkv, qkv_scale, out, inv_scale, stream, "v10_e4m3_qkv");
}

}  // namespace

extern const Version v10_e4m3_qkv{
    {"v10_e4m3_qkv", flash_wgmma::supports, launch, flash_wgmma::unavailable}, nullptr, launch_e4m3_qkv};

}  // namespace attention
