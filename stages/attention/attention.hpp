// Multi-head self-attention family contract: out = softmax(Q K^T / sqrt(head_dim)) V per
// (batch, head), with Q, K and V read in place from timm's packed QKV buffer.
//   qkv [batch*tokens, 3*heads*head_dim] fp16: the q block, then k, then v; head h at columns
//       h*head_dim of each block (so token t of head h has row stride 3*heads*head_dim).
//   out [batch*tokens, heads*head_dim] fp16, ready for the output projection.
// Softmax and accumulation in fp32. Every version implements exactly this; bench, test and
// encoder swap versions by name.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "harness/version.hpp"

namespace attention {

struct Problem {
  int batch = 0;
  int tokens = 0;
  int heads = 0;
  int head_dim = 64;  // every timm ViT
};

struct Args {
  const __half* qkv;
  __half* out;
};

// The shared version record (common/harness/version.hpp). Its bench_max_work is in flops (flops()
// below): above it the bench writes a `skipped` row unless --force, because the version would
// take minutes per call.
struct Version : study::VersionRecord<Problem, Args> {
  // Versions that can also write out in E4M3, as saturate(out * *inv_scale) with a static scale
  // on the device: the input of an FP8 projection GEMM, without a quantizing pass over an fp16
  // copy. Null for the others.
  void (*launch_e4m3)(const Problem&, const __half* qkv, __nv_fp8_e4m3* out, const float* inv_scale,
                      cudaStream_t) = nullptr;
  // Versions that read Q, K and V in E4M3 instead, [batch*tokens, 3*heads*head_dim] as the fp16
  // contract lays them out, each value times qkv_scale (one host scalar: the static scale of an
  // FP8 block's QKV GEMM output), and write E4M3 as launch_e4m3 does: an FP8 block's attention
  // on half the bytes. Null for the others.
  void (*launch_e4m3_qkv)(const Problem&, const __nv_fp8_e4m3* qkv, float qkv_scale, __nv_fp8_e4m3* out,
                          const float* inv_scale, cudaStream_t) = nullptr;
};

// All versions in ladder order; find_version throws StudyError(Usage) for an unknown name.
const std::vector<Version>& versions();
const Version& find_version(const std::string& name);

// Fewest bytes any version must move: read the packed QKV once, write the output once.
double bytes(const Problem& p);
// Q K^T and P V: 2 * 2 * batch * heads * tokens^2 * head_dim (softmax not counted).
double flops(const Problem& p);

// Checks every version shares: positive sizes, and QKV small enough for 32-bit indexing.
std::string check_common(const Problem& p);
// check_common plus what the tiled kernels (v1..v7) need: head_dim 64, which their tiles are
// compiled for, and batch and heads within the grid's y/z limits.
std::string check_tiled(const Problem& p);
// Throws StudyError(Usage) unless qkv and out are aligned to `bytes` (vector and cp.async
// loads need it; cudaMalloc gives 256).
void require_aligned(const void* qkv, const void* out, unsigned bytes, const char* version);

}  // namespace attention
