// The pointwise kernels are written the obvious way, one thread per element with 2-byte
// accesses and a modulo for the bias column: the baseline that handwritten_epilogue improves.
#include "harness/check.hpp"
#include "mlp/gelu.cuh"
#include "mlp/unfused_sequence.hpp"

namespace mlp {
namespace {

constexpr int kThreads = 256;

// h = GELU(h + b): h holds fc1's product without its bias.
__global__ void bias_gelu(__half* __restrict__ h, const __half* __restrict__ b, size_t n, int cols) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[i] = __float2half_rn(gelu_erf(__half2float(h[i]) + __half2float(b[i % cols])));
}

// y = y + b + r: y holds fc2's product without its bias, r is the residual.
__global__ void bias_residual(__half* __restrict__ y, const __half* __restrict__ b,
                              const __half* __restrict__ r, size_t n, int cols) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = __float2half_rn(__half2float(y[i]) + __half2float(b[i % cols]) + __half2float(r[i]));
}

unsigned blocks(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void unfused_sequence(const Problem& p, const Args& a, cudaStream_t stream) {
  const size_t nh = static_cast<size_t>(p.rows) * p.mlp_hidden;
  const size_t ny = static_cast<size_t>(p.rows) * p.hidden;
  a.gemm->run({p.rows, p.mlp_hidden, p.hidden}, study::Epilogue::None, {a.x, a.fc1_w, a.h}, stream);
  bias_gelu<<<blocks(nh), kThreads, 0, stream>>>(a.h, a.fc1_b, nh, p.mlp_hidden);
  LAUNCH_CHECK();
  a.gemm->run({p.rows, p.hidden, p.mlp_hidden}, study::Epilogue::None, {a.h, a.fc2_w, a.y}, stream);
  bias_residual<<<blocks(ny), kThreads, 0, stream>>>(a.y, a.fc2_b, residual_of(a), ny, p.hidden);
  LAUNCH_CHECK();
}

}  // namespace mlp
