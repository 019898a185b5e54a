// Device steps that several patch-embedding versions share, each launched on one stream with
// a launch check. The ladder's versions differ in how they call these, not in copies of them.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include "patch_embed/patch_embed.hpp"

namespace patch_embed {

// Re-sorts the images patch-major: dst[(b*P + p) * 768 + c*256 + ky*16 + kx] is pixel
// (c, py*16 + ky, px*16 + kx) of image b, p = py * side + px. Because the stride equals the
// kernel this is im2col without duplication: a pure permutation, and each row of dst is one
// patch in the order of the conv weight's [3, 16, 16] flattening.
void launch_patchify(const Problem& p, const __half* images, __half* dst, cudaStream_t stream);

// out[b*tokens] = cls_token + pos_embed[0] for every image b.
void launch_cls_rows(const Problem& p, const Args& a, cudaStream_t stream);

// The token rows from a product of the patches with the conv weight that is not written in
// place: out[b*tokens] = cls_token + pos_embed[0], out[b*tokens + 1 + p][o] = prod(b, p, o)
// (+ conv_b[o] when add_bias) + pos_embed[1 + p][o]. prod(b, p, o) is prod[(b*P + p)*hidden + o]
// when channels_last (a GEMM's [B*P, hidden] rows), else prod[(b*hidden + o)*P + p] (NCHW).
void launch_token_rows(const Problem& p, const Args& a, const __half* prod, bool add_bias, bool channels_last,
                       cudaStream_t stream);

// One output element from a patch-major row: out[b*tokens + 1 + patch][o] =
// dot(patch row, w[o]) + conv_b[o] + pos_embed[1 + patch][o], one block of 256 threads over
// the 768 products. `patches` is the patch-major copy launch_patchify wrote.
void launch_patch_dot(const Problem& p, const Args& a, const __half* patches, int image, int out_channel,
                      int patch, cudaStream_t stream);

}  // namespace patch_embed
