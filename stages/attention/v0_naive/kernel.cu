// v0_naive: one thread per output element (batch, token, head, d). Each thread walks every key
// twice straight from global memory: once for the row maximum, once for the exponentials,
// their sum and its own weighted sum of V. All scores are recomputed by each of the head_dim
// threads of a row, so the kernel does head_dim times the necessary work, on purpose: it is
// the baseline that makes the cost of every later idea visible.
#include <cmath>
#include "attention/attention.hpp"
#include "harness/check.hpp"

namespace attention {
namespace {

constexpr int kThreads = 256;

__global__ void kernel(const __half* __restrict__ qkv, __half* __restrict__ out, int tokens,
                       int heads, int head_dim, float scale, long long elements) {
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= elements) return;
  // d fastest: the 32 threads of a warp share their query and key rows (broadcast loads) and
  // write 32 consecutive outputs.
  const int d = static_cast<int>(idx % head_dim);
  long long rest = idx / head_dim;
  const int h = static_cast<int>(rest % heads);
  rest /= heads;
  const int t = static_cast<int>(rest % tokens);
  const int b = static_cast<int>(rest / tokens);

  const int width = heads * head_dim;
  const int stride = 3 * width;  // between consecutive tokens of one head
  const __half* q = qkv + (b * tokens + t) * stride + h * head_dim;
  const __half* k = qkv + b * tokens * stride + width + h * head_dim;
  const __half* v = k + width;

  float row_max = -INFINITY;
  for (int j = 0; j < tokens; ++j) {
    float s = 0.f;
    for (int e = 0; e < head_dim; ++e) s += __half2float(q[e]) * __half2float(k[j * stride + e]);
    row_max = fmaxf(row_max, s * scale);
  }
  float sum = 0.f, acc = 0.f;
  for (int j = 0; j < tokens; ++j) {
    float s = 0.f;
    for (int e = 0; e < head_dim; ++e) s += __half2float(q[e]) * __half2float(k[j * stride + e]);
    const float p = expf(s * scale - row_max);
    sum += p;
    acc += p * __half2float(v[j * stride + d]);
  }
  out[(b * tokens + t) * width + h * head_dim + d] = __float2half_rn(acc / sum);
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  const long long elements = static_cast<long long>(p.batch) * p.tokens * p.heads * p.head_dim;
  const auto blocks = static_cast<unsigned>((elements + kThreads - 1) / kThreads);
  kernel<<<blocks, kThreads, 0, stream>>>(a.qkv, a.out, p.tokens, p.heads, p.head_dim,
                                          1.f / std::sqrt(static_cast<float>(p.head_dim)), elements);
  LAUNCH_CHECK();
}

}  // namespace

// ~1e11 flops (batch 32 at 1025 tokens) already takes seconds per call: the bench stops there.
extern const Version v0_naive{"v0_naive", check_common, launch, nullptr, 1.1e11};

}  // namespace attention
