// v4_one_copy: the whole batch in few launches. After the patch-major copy (which doubles the
// images' device memory), one kernel computes every output: a tiled matrix product on CUDA
// cores, patches [B*P, 768] x weight^T [768, hidden], 64x64 output tiles, each thread 4x4 of
// them, both operands staged through shared memory in 32-wide slices of K. Its epilogue adds
// bias and position embedding and writes the token rows; a third launch writes the cls rows.
#include "harness/check.hpp"
#include "patch_embed/kernels.cuh"

namespace patch_embed {
namespace {

constexpr int kTile = 64;        // output rows (patches) and columns (channels) per block
constexpr int kSlice = 32;       // K per shared-memory stage; 768 is a multiple
constexpr int kThreads = 256;    // 16 x 16 threads, 4 x 4 outputs each
static_assert(kPatchElems % kSlice == 0, "K slices must tile the patch");

// Loads a 64 x 32 slice of a row-major [rows, 768] fp16 matrix (rows from `row0`) into
// shared memory transposed to [32][64] fp32, so the inner loop reads 4 consecutive rows for
// one k. Each thread loads 8 consecutive k of one row with one 16-byte load (row starts are
// 1536-byte aligned); rows past the end load zeros.
__device__ void load_slice(const __half* __restrict__ m, int rows, int row0, int k0, float (*dst)[kTile + 1]) {
  const int r = threadIdx.x / 4, kk = (threadIdx.x % 4) * 8;
  __align__(16) __half v[8];
  if (row0 + r < rows) {
    *reinterpret_cast<uint4*>(v) =
        *reinterpret_cast<const uint4*>(m + static_cast<std::size_t>(row0 + r) * kPatchElems + k0 + kk);
  } else {
    *reinterpret_cast<uint4*>(v) = make_uint4(0, 0, 0, 0);
  }
  for (int i = 0; i < 8; ++i) dst[kk + i][r] = __half2float(v[i]);
}

__global__ void __launch_bounds__(kThreads)
tiled_kernel(const __half* __restrict__ patches, const __half* __restrict__ w, const __half* __restrict__ bias,
             const __half* __restrict__ pos, __half* __restrict__ out, int rows, int hidden, int P, int tokens) {
  // +1 padding: without it the transposed stores of load_slice put the four k groups of a
  // warp (k 0, 8, 16, 24) in the same bank.
  __shared__ float a[kSlice][kTile + 1];
  __shared__ float b[kSlice][kTile + 1];
  const int row0 = blockIdx.x * kTile, col0 = blockIdx.y * kTile;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < kPatchElems; k0 += kSlice) {
    load_slice(patches, rows, row0, k0, a);
    load_slice(w, hidden, col0, k0, b);
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kSlice; ++k) {
      float x[4], y[4];
      for (int i = 0; i < 4; ++i) x[i] = a[k][ty * 4 + i];
      for (int j = 0; j < 4; ++j) y[j] = b[k][tx * 4 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += x[i] * y[j];
    }
    __syncthreads();  // the next slice overwrites a and b
  }
  for (int i = 0; i < 4; ++i) {
    const int r = row0 + ty * 4 + i;
    if (r >= rows) continue;
    const int image = r / P, token = 1 + r % P;
    __half* dst = out + (static_cast<std::size_t>(image) * tokens + token) * hidden;
    const __half* pe = pos + static_cast<std::size_t>(token) * hidden;
    for (int j = 0; j < 4; ++j) {
      const int c = col0 + tx * 4 + j;
      if (c < hidden) dst[c] = __float2half(acc[i][j] + __half2float(bias[c]) + __half2float(pe[c]));
    }
  }
}

std::size_t scratch(const Problem& p) {  // the patch-major copy: as many bytes as the images
  return static_cast<std::size_t>(p.batch) * patches_per_image(p) * kPatchElems * sizeof(__half);
}

std::string supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if ((p.hidden + kTile - 1) / kTile > 65535) return "hidden above 65535 tiles of 64 (grid y limit)";
  return {};
}

void preprocess(const Problem& p, const Args& a, cudaStream_t stream) {
  launch_patchify(p, a.images, static_cast<__half*>(a.scratch), stream);
}

void compute(const Problem& p, const Args& a, cudaStream_t stream) {
  launch_cls_rows(p, a, stream);
  const int P = patches_per_image(p), rows = p.batch * P;
  const dim3 grid((rows + kTile - 1) / kTile, (p.hidden + kTile - 1) / kTile);
  tiled_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(a.scratch), a.conv_w, a.conv_b,
                                              a.pos_embed, a.out, rows, p.hidden, P, tokens(p));
  LAUNCH_CHECK();
}

}  // namespace

extern const Version v4_one_copy = staged_version<preprocess, compute>("v4_one_copy", supports, scratch);

}  // namespace patch_embed
