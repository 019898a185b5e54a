// v5_im2col_gemm: tensor cores through the study's cuBLASLt layer. Because stride = kernel,
// im2col is a permutation (launch_patchify, the preprocessing): patches [B*P, 768] times the
// conv weight read as a Linear weight [hidden, 768] is exactly the convolution, with the bias
// in cuBLASLt's epilogue. The product lands in scratch [B*P, hidden]; a last kernel adds the
// position embedding while moving each image's rows to token rows 1..P, and writes the cls
// rows. (The layer's residual operand cannot add the position embedding in the GEMM: it is a
// [B*P, hidden] matrix laid out like the output, while the position embedding repeats per
// image and the token rows of consecutive images are one cls row apart.)
#include "gemm/gemm.hpp"
#include "harness/check.hpp"
#include "patch_embed/kernels.cuh"

namespace patch_embed {
namespace {


std::size_t patch_bytes(const Problem& p) {
  return static_cast<std::size_t>(p.batch) * patches_per_image(p) * kPatchElems * sizeof(__half);
}

std::size_t scratch(const Problem& p) {
  // The GEMM output starts 256-byte aligned, as cuBLASLt's fastest kernels like.
  const std::size_t patches = (patch_bytes(p) + 255) / 256 * 256;
  return patches + static_cast<std::size_t>(p.batch) * patches_per_image(p) * p.hidden * sizeof(__half);
}

__half* product(const Problem& p, const Args& a) {
  return reinterpret_cast<__half*>(static_cast<char*>(a.scratch) + (patch_bytes(p) + 255) / 256 * 256);
}

// One thread per two channels of one token row: cls + pos[0] for row 0 of each image,
// product + pos for the patch rows. half2 accesses need an even hidden size (supports()).
std::string supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  // cuBLASLt's fp16 tensor-core kernels want 16-byte rows; the tokens kernel moves half2.
  if (p.hidden % 8) return "hidden " + std::to_string(p.hidden) + " is not a multiple of 8";
  return {};
}

void preprocess(const Problem& p, const Args& a, cudaStream_t stream) {
  launch_patchify(p, a.images, static_cast<__half*>(a.scratch), stream);
}

void compute(const Problem& p, const Args& a, cudaStream_t stream) {
  if (!a.gemm) throw study::StudyError(study::ErrorKind::Usage, "v5_im2col_gemm needs Args::gemm");
  const int rows = p.batch * patches_per_image(p);
  study::GemmOperands op;
  op.x = static_cast<const __half*>(a.scratch);
  op.w = a.conv_w;
  op.bias = a.conv_b;
  op.y = product(p, a);
  a.gemm->run({rows, p.hidden, kPatchElems}, study::Epilogue::Bias, op, stream);
  launch_token_rows(p, a, op.y, /*add_bias=*/false, /*channels_last=*/true, stream);
}

}  // namespace

extern const Version v5_im2col_gemm = [] {
  Version v = staged_version<preprocess, compute>("v5_im2col_gemm", supports, scratch);
  v.uses_gemm = true;
  return v;
}();

}  // namespace patch_embed
