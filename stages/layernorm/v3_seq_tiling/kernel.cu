// v3_seq_tiling: a block of 8 warps owns a tile of 32 rows; gamma and beta are converted to
// fp32 into shared memory once per tile and reused by all its rows; each warp normalizes
// its rows alone (warp-shuffle reductions, no block barrier per row).
#include "device/reduce.cuh"
#include "harness/check.hpp"
#include "layernorm/launch_util.hpp"
#include "layernorm/layernorm.hpp"

namespace layernorm {
namespace {

constexpr int kWarps = 8;
constexpr int kTileRows = 32;
constexpr int kMaxHidden = 6144;  // 2 * 6144 fp32 = 48 KiB of shared memory per block

__global__ void __launch_bounds__(kWarps * 32)
kernel(const __half2* __restrict__ x, const __half2* __restrict__ gamma,
       const __half2* __restrict__ beta, __half2* __restrict__ y, int rows, int pairs,
       float inv_hidden, float eps) {
  extern __shared__ float2 affine[];  // [pairs] gamma, then [pairs] beta
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    affine[i] = __half22float2(gamma[i]);
    affine[pairs + i] = __half22float2(beta[i]);
  }
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int first = blockIdx.x * kTileRows;
  const int last = min(first + kTileRows, rows);
  for (int row = first + warp; row < last; row += kWarps) {
    const __half2* xr = x + static_cast<size_t>(row) * pairs;
    __half2* yr = y + static_cast<size_t>(row) * pairs;
    float sum = 0.f, sq = 0.f;
    for (int i = lane; i < pairs; i += 32) {
      const float2 v = __half22float2(xr[i]);
      sum += v.x + v.y;
      sq += v.x * v.x + v.y * v.y;
    }
    const float mean = study::warp_sum(sum) * inv_hidden;
    const float var = fmaxf(study::warp_sum(sq) * inv_hidden - mean * mean, 0.f);
    const float rstd = rsqrtf(var + eps);
    for (int i = lane; i < pairs; i += 32) {
      const float2 v = __half22float2(xr[i]);
      const float2 g = affine[i], b = affine[pairs + i];
      yr[i] = __floats2half2_rn((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y);
    }
  }
}

std::string supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if (auto r = need_even_hidden(p.hidden); !r.empty()) return r;
  if (p.hidden > kMaxHidden)
    return "hidden " + std::to_string(p.hidden) + " > " + std::to_string(kMaxHidden) +
           ": gamma/beta no longer fit in 48 KiB of shared memory";
  return {};
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  const int pairs = p.hidden / 2;
  const int blocks = (p.rows + kTileRows - 1) / kTileRows;
  kernel<<<blocks, kWarps * 32, 2 * pairs * sizeof(float2), stream>>>(
      reinterpret_cast<const __half2*>(a.x), reinterpret_cast<const __half2*>(a.gamma),
      reinterpret_cast<const __half2*>(a.beta), reinterpret_cast<__half2*>(a.y), p.rows, pairs,
      1.f / p.hidden, p.eps);
  LAUNCH_CHECK();
}

}  // namespace

extern const Version v3_seq_tiling{"v3_seq_tiling", supports, launch};

}  // namespace layernorm
