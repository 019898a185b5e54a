#include "harness/check.hpp"
#include "patch_embed/kernels.cuh"

namespace patch_embed {
namespace {

constexpr int kThreads = 256;

// One thread per 8 consecutive elements of a patch row: they are 8 consecutive pixels of one
// image row (16 bytes), so both the load and the store are single 16-byte accesses. The
// offsets are multiples of 8 elements because S and 16 are, and buffers are 256-byte aligned.
__global__ void patchify_kernel(const __half* __restrict__ images, __half* __restrict__ dst,
                                int batch, int S, int side) {
  const int P = side * side;
  const std::size_t chunks = static_cast<std::size_t>(batch) * P * (kPatchElems / 8);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int k8 = static_cast<int>(i % (kPatchElems / 8));  // chunk within the patch row
    const std::size_t row = i / (kPatchElems / 8);           // b * P + patch
    const int patch = static_cast<int>(row % P);
    const int b = static_cast<int>(row / P);
    const int c = k8 / 32, ky = (k8 / 2) % 16, kx0 = (k8 % 2) * 8;
    const int py = patch / side, px = patch % side;
    const std::size_t src = ((static_cast<std::size_t>(b) * kChannels + c) * S + py * kPatch + ky) * S +
                            px * kPatch + kx0;
    reinterpret_cast<uint4*>(dst)[i] = *reinterpret_cast<const uint4*>(images + src);
  }
}

__global__ void cls_rows_kernel(const __half* __restrict__ cls, const __half* __restrict__ pos,
                                __half* __restrict__ out, int batch, int tokens, int hidden) {
  const std::size_t n = static_cast<std::size_t>(batch) * hidden;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int o = static_cast<int>(i % hidden);
    const std::size_t b = i / hidden;
    out[b * tokens * hidden + o] = __float2half(__half2float(cls[o]) + __half2float(pos[o]));
  }
}

// 768 products in fp32, three per thread, then a warp-shuffle and shared-memory reduction.
__global__ void patch_dot_kernel(const __half* __restrict__ row, const __half* __restrict__ w,
                                 const __half* __restrict__ bias, const __half* __restrict__ pos,
                                 __half* __restrict__ out) {
  __shared__ float warp_sums[kThreads / 32];
  float acc = 0.f;
  for (int k = threadIdx.x; k < kPatchElems; k += kThreads)
    acc += __half2float(row[k]) * __half2float(w[k]);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int i = 0; i < kThreads / 32; ++i) sum += warp_sums[i];
    *out = __float2half(sum + __half2float(*bias) + __half2float(*pos));
  }
}

int grid_for(std::size_t work) {
  // Grid-stride loops: enough blocks to fill any current GPU several times over.
  const std::size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

void launch_patchify(const Problem& p, const __half* images, __half* dst, cudaStream_t stream) {
  const int side = p.image_size / kPatch;
  const std::size_t chunks = static_cast<std::size_t>(p.batch) * side * side * (kPatchElems / 8);
  patchify_kernel<<<grid_for(chunks), kThreads, 0, stream>>>(images, dst, p.batch, p.image_size, side);
  LAUNCH_CHECK();
}

namespace {

// Two features per thread (hidden is even in every ViT; supports() of the callers checks it).
__global__ void token_rows_kernel(const __half* __restrict__ prod, const __half* __restrict__ bias,
                                  const __half* __restrict__ cls, const __half* __restrict__ pos,
                                  __half* __restrict__ out, int batch, int tokens, int hidden, bool channels_last) {
  const int patches = tokens - 1, h2 = hidden / 2;
  const std::size_t n = static_cast<std::size_t>(batch) * tokens * h2;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int o = 2 * static_cast<int>(i % h2);
    const std::size_t row = i / h2;
    const int token = static_cast<int>(row % tokens);
    const std::size_t image = row / tokens;
    float2 x;
    if (token == 0) {
      x = __half22float2(*reinterpret_cast<const __half2*>(cls + o));
    } else if (channels_last) {
      x = __half22float2(*reinterpret_cast<const __half2*>(prod + (image * patches + token - 1) * hidden + o));
    } else {
      const std::size_t src = (image * hidden + o) * patches + token - 1;
      x = make_float2(__half2float(prod[src]), __half2float(prod[src + patches]));
    }
    if (token != 0 && bias) {
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(bias + o));
      x.x += b.x;
      x.y += b.y;
    }
    const float2 pe = __half22float2(*reinterpret_cast<const __half2*>(pos + static_cast<std::size_t>(token) * hidden + o));
    reinterpret_cast<__half2*>(out)[i] = __floats2half2_rn(x.x + pe.x, x.y + pe.y);
  }
}

}  // namespace

void launch_token_rows(const Problem& p, const Args& a, const __half* prod, bool add_bias, bool channels_last,
                       cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(p.batch) * tokens(p) * (p.hidden / 2);
  token_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(prod, add_bias ? a.conv_b : nullptr, a.cls_token,
                                                          a.pos_embed, a.out, p.batch, tokens(p), p.hidden,
                                                          channels_last);
  LAUNCH_CHECK();
}

void launch_cls_rows(const Problem& p, const Args& a, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(p.batch) * p.hidden;
  cls_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(a.cls_token, a.pos_embed, a.out, p.batch, tokens(p),
                                                        p.hidden);
  LAUNCH_CHECK();
}

void launch_patch_dot(const Problem& p, const Args& a, const __half* patches, int image, int out_channel,
                      int patch, cudaStream_t stream) {
  const int P = patches_per_image(p);
  const std::size_t row = static_cast<std::size_t>(image) * P + patch;
  const std::size_t token = 1 + static_cast<std::size_t>(patch);
  const std::size_t out = (static_cast<std::size_t>(image) * tokens(p) + token) * p.hidden + out_channel;
  patch_dot_kernel<<<1, kThreads, 0, stream>>>(patches + row * kPatchElems,
                                               a.conv_w + static_cast<std::size_t>(out_channel) * kPatchElems,
                                               a.conv_b + out_channel, a.pos_embed + token * p.hidden + out_channel,
                                               a.out + out);
  LAUNCH_CHECK();
}

}  // namespace patch_embed
