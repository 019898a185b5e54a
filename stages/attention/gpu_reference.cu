// The attention reference on the GPU, for the (batch, head) pairs the CPU reference does not
// check: one block per query row, mirroring ref::attention (scores q.k in double scaled by
// 1/sqrt(head_dim), the row max subtracted, exp and sum in double, then P V / sum stored as
// fp32), so that it is easy to read and agrees with the CPU reference to fp32 rounding.
// Speed is not its point.
#include <algorithm>
#include <cmath>
#include "attention/harness.hpp"
#include "harness/gpu.hpp"

namespace attention {
namespace {

constexpr int kThreads = 128;

// The block's threads combine their `v` with op (max or sum); every thread gets the result.
template <class Op>
__device__ double block_reduce(double v, double* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const double result = shared[0];
  __syncthreads();  // shared[] is free for the next reduction
  return result;
}

// Query q0 + blockIdx.x, numbered ((b * heads) + h) * tokens + t; its scores go to
// scores[blockIdx.x * tokens ...].
__global__ void attention_reference(const __half* qkv, int tokens, int heads, int head_dim, long long q0,
                                    double* scores, float* out) {
  __shared__ double shared[kThreads];
  const long long q = q0 + blockIdx.x;
  const int t = static_cast<int>(q % tokens);
  const int h = static_cast<int>(q / tokens % heads);
  const long long b = q / tokens / heads;
  const std::size_t width = static_cast<std::size_t>(heads) * head_dim;
  auto at = [&](int token, int block, int d) {  // element d of head h of `block` (q, k, v)
    return static_cast<double>(__half2float(
        qkv[(static_cast<std::size_t>(b) * tokens + token) * 3 * width + block * width +
            static_cast<std::size_t>(h) * head_dim + d]));
  };
  double* s = scores + static_cast<std::size_t>(blockIdx.x) * tokens;
  const double scale = 1.0 / sqrt(static_cast<double>(head_dim));

  double max_s = -INFINITY;
  for (int j = threadIdx.x; j < tokens; j += kThreads) {
    double acc = 0;
    for (int d = 0; d < head_dim; ++d) acc += at(t, 0, d) * at(j, 1, d);
    s[j] = acc * scale;
    max_s = fmax(max_s, s[j]);
  }
  max_s = block_reduce(max_s, shared, [](double a, double c) { return fmax(a, c); });
  double sum = 0;
  for (int j = threadIdx.x; j < tokens; j += kThreads) {
    s[j] = exp(s[j] - max_s);
    sum += s[j];
  }
  sum = block_reduce(sum, shared, [](double a, double c) { return a + c; });  // also orders s[] writes
  for (int d = threadIdx.x; d < head_dim; d += kThreads) {
    double acc = 0;
    for (int j = 0; j < tokens; ++j) acc += s[j] * at(j, 2, d);
    out[(static_cast<std::size_t>(b) * tokens + t) * width + static_cast<std::size_t>(h) * head_dim + d] =
        static_cast<float>(acc / sum);
  }
}

}  // namespace

std::vector<float> gpu_reference(const Problem& p, const DeviceProblem& dev) {
  const long long queries = static_cast<long long>(p.batch) * p.heads * p.tokens;
  const long long chunk = std::min(queries, std::max(1LL, static_cast<long long>(kGpuReferenceScores / p.tokens)));
  study::DeviceBuffer<double> scores(static_cast<std::size_t>(chunk) * p.tokens);
  study::DeviceBuffer<float> out(dev.out.size());
  for (long long q0 = 0; q0 < queries; q0 += chunk) {
    const long long n = std::min(chunk, queries - q0);
    attention_reference<<<static_cast<unsigned>(n), kThreads>>>(dev.qkv.get(), p.tokens, p.heads, p.head_dim, q0,
                                                                scores.get(), out.get());
    LAUNCH_CHECK();
  }
  return study::to_host(out);
}

}  // namespace attention
