// v6_implicit_gemm's entry points: ViT patch embedding (Conv2d 3 -> hidden, kernel 16,
// stride 16) + cls token + position embedding as one implicit-GEMM kernel.
//
//   images    [batch, 3, S, S]          fp16, NCHW, S a multiple of 16
//   conv_w    [hidden, 3, 16, 16]       fp16 (= row-major [hidden, 768])
//   conv_b    [hidden], cls_token [hidden], pos_embed [tokens, hidden]   fp16
//   out       [batch * tokens, hidden]  fp16, tokens = (S / 16)^2 + 1
// out row b * tokens is cls_token + pos_embed[0]; row b * tokens + 1 + p is
// conv(images[b], patch p) + conv_b + pos_embed[1 + p], patches in row-major grid order.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>

namespace patch_embed {

// Empty when the kernel runs this shape, otherwise the reason it does not (naming the value).
std::string implicit_gemm_supports(int batch, int image_size, int hidden);

// One kernel launch on `stream`, no host synchronization. Throws study::StudyError (Usage)
// for a shape implicit_gemm_supports refuses or a pointer that is not 16-byte aligned.
void implicit_gemm_launch(const __half* images, const __half* conv_w, const __half* conv_b,
                          const __half* cls_token, const __half* pos_embed, __half* out, int batch,
                          int image_size, int hidden, cudaStream_t stream);

}  // namespace patch_embed
