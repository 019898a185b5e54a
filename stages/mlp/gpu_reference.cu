// The MLP reference on the GPU, for the rows the CPU reference does not check: plain kernels
// that mirror ref::linear and ref::mlp (one thread per output element, sums in double from the
// bias, fp32 storage, exact erf GELU, the residual added in fp32), so that they are easy to
// read and agree with the CPU reference to fp32 rounding. Speed is not their point.
#include <algorithm>
#include "harness/gpu.hpp"
#include "mlp/harness.hpp"

namespace mlp {
namespace {

constexpr int kThreads = 128;

__device__ double load(__half v) { return static_cast<double>(__half2float(v)); }
__device__ double load(float v) { return static_cast<double>(v); }

// y[r, o] = act(sum_i x[r, i] w[o, i] + b[o]) + residual[r, o] for r < rows (grid y), o < out;
// b and residual may be null.
template <class In>
__global__ void linear_reference(const In* x, int in, const __half* w, const __half* b, int out,
                                 bool gelu, const __half* residual, float* y) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  const std::size_t r = blockIdx.y;
  if (o >= out) return;
  const In* xr = x + r * in;
  const __half* wo = w + static_cast<std::size_t>(o) * in;
  double acc = b ? load(b[o]) : 0.0;
  for (int i = 0; i < in; ++i) acc += load(xr[i]) * load(wo[i]);
  float v = static_cast<float>(acc);
  if (gelu) {
    const double vd = v;
    v = static_cast<float>(0.5 * vd * (1.0 + erf(vd / sqrt(2.0))));
  }
  if (residual) v += __half2float(residual[r * out + o]);
  y[r * out + o] = v;
}

template <class In>
void launch_linear(const In* x, int rows, int in, const __half* w, const __half* b, int out, bool gelu,
                   const __half* residual, float* y) {
  const dim3 grid((out + kThreads - 1) / kThreads, rows);
  linear_reference<In><<<grid, kThreads>>>(x, in, w, b, out, gelu, residual, y);
  LAUNCH_CHECK();
}

}  // namespace

std::vector<float> gpu_reference(const Problem& p, const DeviceProblem& dev, bool mlp) {
  const int chunk = std::min(p.rows, kGpuReferenceRows);
  const std::size_t hd = static_cast<std::size_t>(p.hidden);
  study::DeviceBuffer<float> h(static_cast<std::size_t>(chunk) * p.mlp_hidden), y(chunk * hd);
  const __half* residual = dev.residual.size() ? dev.residual.get() : dev.x.get();
  std::vector<float> out(static_cast<std::size_t>(p.rows) * hd);
  for (int r0 = 0; r0 < p.rows; r0 += chunk) {
    const int n = std::min(chunk, p.rows - r0);
    const std::size_t offset = static_cast<std::size_t>(r0) * hd;
    launch_linear(dev.x.get() + offset, n, p.hidden, dev.fc1_w.get(), mlp ? dev.fc1_b.get() : nullptr,
                  p.mlp_hidden, mlp, nullptr, h.get());
    launch_linear(h.get(), n, p.mlp_hidden, dev.fc2_w.get(), mlp ? dev.fc2_b.get() : nullptr, p.hidden, false,
                  mlp ? residual + offset : nullptr, y.get());
    CUDA_CHECK(cudaMemcpy(out.data() + offset, y.get(), n * hd * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return out;
}

}  // namespace mlp
