// The two device passes a LayerNorm folded into the next GEMM needs (cutlass_gemm.hpp, LnFold):
// folding gamma and beta into the Linear's weights and bias once, and the row statistics of the
// un-normalized input once per forward.
#include <cstdint>
#include <string>
#include <cuda_fp16.h>
#include "device/reduce.cuh"
#include "gemm/cutlass_gemm.hpp"
#include "harness/check.hpp"

namespace study::cutlass_gemm {
namespace {

// One warp per output feature n: w_folded[n, :] = w[n, :] * gamma, its row sum (of the rounded
// fp16 values the GEMM will multiply) and b[n] + w[n, :] . beta, in fp32.
__global__ void fold_kernel(const __half* __restrict__ w, const __half* __restrict__ b,
                            const __half* __restrict__ gamma, const __half* __restrict__ beta, int n, int k,
                            __half* __restrict__ w_folded, float* __restrict__ col_sum,
                            float* __restrict__ col_bias) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n) return;
  float sum = 0.f, dot = 0.f;
  for (int i = lane; i < k; i += 32) {
    const float wv = __half2float(w[static_cast<std::size_t>(row) * k + i]);
    const __half folded = __float2half(wv * __half2float(gamma[i]));
    w_folded[static_cast<std::size_t>(row) * k + i] = folded;
    sum += __half2float(folded);
    dot += wv * __half2float(beta[i]);
  }
  sum = warp_sum(sum);
  dot = warp_sum(dot);
  if (lane == 0) {
    col_sum[row] = sum;
    col_bias[row] = __half2float(b[row]) + dot;
  }
}

// One warp per row, the row in registers (cols <= 32 * 8 * kChunks): reduce.cuh's warp_row_stats.
constexpr int kChunks = 4;  // 16-byte chunks per lane: up to 1024 columns
__global__ void row_stats_kernel(const __half* __restrict__ x, int rows, int cols, float eps,
                                 float* __restrict__ mean, float* __restrict__ rstd) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  float v[kChunks][8];
  const float2 stats = study::warp_row_stats<kChunks>(x + static_cast<std::size_t>(row) * cols, cols, eps, v);
  if (lane == 0) {
    mean[row] = stats.x;
    rstd[row] = stats.y;
  }
}

constexpr int kWarpsPerBlock = 8;

}  // namespace

void fold_layernorm(const __half* w, const __half* b, const __half* gamma, const __half* beta, int n, int k,
                    __half* w_folded, float* col_sum, float* col_bias, cudaStream_t stream) {
  if (n <= 0 || k <= 0) throw StudyError(ErrorKind::Usage, "fold_layernorm: sizes must be positive");
  const int blocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  fold_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(w, b, gamma, beta, n, k, w_folded, col_sum, col_bias);
  LAUNCH_CHECK();
}

void row_stats(const __half* x, int rows, int cols, float eps, float* mean, float* rstd, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || cols % 8 || cols > 32 * 8 * kChunks)
    throw StudyError(ErrorKind::Usage, "row_stats: cols must be a positive multiple of 8, at most " +
                                           std::to_string(32 * 8 * kChunks) + ", got " + std::to_string(cols));
  if (reinterpret_cast<std::uintptr_t>(x) % 16)
    throw StudyError(ErrorKind::Usage, "row_stats: x must be 16-byte aligned");
  const int blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  row_stats_kernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(x, rows, cols, eps, mean, rstd);
  LAUNCH_CHECK();
}

}  // namespace study::cutlass_gemm
