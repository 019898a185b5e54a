// v5_unrolled: hidden size fixed at compile time (ViT's 192/384/768/1024), one warp per row,
// every loop fully unrolled, the row in registers, widest vector access the size allows
// (16 bytes for 768/1024). No shared memory and no block barrier: a warp's row is
// independent, so many rows' loads are in flight per SM.
#include "device/reduce.cuh"
#include "device/vec.cuh"
#include "harness/check.hpp"
#include "harness/test_hooks.hpp"
#include "layernorm/layernorm.hpp"

namespace layernorm {
namespace {

constexpr int kWarpsPerBlock = 4;

template <int HIDDEN, int VEC>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
kernel(const __half* __restrict__ x, const __half* __restrict__ gamma,
       const __half* __restrict__ beta, __half* __restrict__ y, int rows, float eps,
       study::ByteRange prefetch) {
  study::request_into_l2(prefetch);  // before the row check: every thread of the grid may carry a chunk
  using Vec = study::HalfVec<VEC>;
  constexpr int kChunks = HIDDEN / (32 * VEC);  // vector accesses per lane
  static_assert(HIDDEN % (32 * VEC) == 0, "a row must split evenly over the warp");
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps exit together: shuffles below stay full-warp
  const int lane = threadIdx.x & 31;
  const __half* xr = x + static_cast<size_t>(row) * HIDDEN;
  __half* yr = y + static_cast<size_t>(row) * HIDDEN;

  Vec in[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) in[c] = Vec::load(xr + (c * 32 + lane) * VEC);
  float v[kChunks][VEC];
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      v[c][i] = in[c].get(i);
      sum += v[c][i];
    }
  constexpr float kInv = 1.f / HIDDEN;
  const float mean = study::warp_sum(sum) * kInv;
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int i = 0; i < VEC; ++i) sq += (v[c][i] - mean) * (v[c][i] - mean);
  const float rstd = rsqrtf(study::warp_sum(sq) * kInv + eps);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int col = (c * 32 + lane) * VEC;
    const Vec g = Vec::load(gamma + col), b = Vec::load(beta + col);
    Vec out;
#pragma unroll
    for (int i = 0; i < VEC; ++i) out.set(i, (v[c][i] - mean) * rstd * g.get(i) + b.get(i));
    out.store(yr + col);
  }
}

template <int HIDDEN, int VEC>
void launch_with(const Problem& p, const Args& a, cudaStream_t stream) {
  const int blocks = (p.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  study::ByteRange prefetch = a.prefetch;
  if (study::planted("prefetch_noop")) prefetch.bytes = 0;
  kernel<HIDDEN, VEC><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(a.x, a.gamma, a.beta, a.y, p.rows, p.eps, prefetch);
  LAUNCH_CHECK();
}

std::string supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  switch (p.hidden) {
    case 192: case 384: case 768: case 1024: return {};
    default:
      return "hidden " + std::to_string(p.hidden) +
             " is not specialized (compiled for 192, 384, 768, 1024)";
  }
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  switch (p.hidden) {
    case 192: return launch_with<192, 2>(p, a, stream);
    case 384: return launch_with<384, 4>(p, a, stream);
    case 768: return launch_with<768, 8>(p, a, stream);
    case 1024: return launch_with<1024, 8>(p, a, stream);
    default: throw study::StudyError(study::ErrorKind::Usage, supports(p));
  }
}

}  // namespace

extern const Version v5_unrolled{"v5_unrolled", supports, launch};

}  // namespace layernorm
