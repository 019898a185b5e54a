// The forward's own small kernels and its marks (runner.hpp).
#include <map>
#include "encoder/runner.hpp"
#include "gemm/fp8.hpp"

namespace encoder {

namespace {

// x_mid = x_in + proj, two halves per thread (hidden is even in every ViT; a tail is handled).
__global__ void residual_add_kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                    __half* __restrict__ out, long long n) {
  const long long i = 2 * (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 1 < n) {
    const __half2 s = __hadd2(*reinterpret_cast<const __half2*>(a + i), *reinterpret_cast<const __half2*>(b + i));
    *reinterpret_cast<__half2*>(out + i) = s;
  } else if (i < n) {
    out[i] = __hadd(a[i], b[i]);
  }
}

// cls[b, :] = x[b * tokens, :]: the head only needs each image's cls row.
__global__ void gather_cls_kernel(const __half* __restrict__ x, __half* __restrict__ cls, int tokens, int hidden) {
  const int b = blockIdx.x;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    cls[static_cast<long long>(b) * hidden + i] = x[static_cast<long long>(b) * tokens * hidden + i];
}

}  // namespace

void residual_add(const __half* a, const __half* b, __half* out, long long n, cudaStream_t s) {
  const int threads = 256;
  const long long pairs = (n + 1) / 2;
  residual_add_kernel<<<static_cast<unsigned>((pairs + threads - 1) / threads), threads, 0, s>>>(a, b, out, n);
  LAUNCH_CHECK();
}

void gather_cls(const __half* x, __half* cls, int batch, int tokens, int hidden, cudaStream_t s) {
  gather_cls_kernel<<<batch, 256, 0, s>>>(x, cls, tokens, hidden);
  LAUNCH_CHECK();
}

void Marks::clear() {
  for (auto& e : events_) {
    cudaEventDestroy(e.second.first);
    cudaEventDestroy(e.second.second);
  }
  events_.clear();
}

Breakdown Marks::stop_recording(cudaStream_t s) {
  recording_ = false;
  CUDA_CHECK(cudaStreamSynchronize(s));
  Breakdown out;
  std::map<std::string, std::size_t> slot;
  for (auto& [name, ev] : events_) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev.first, ev.second));
    auto it = slot.find(name);
    if (it == slot.end()) it = slot.emplace(name, out.us.size()).first, out.us.push_back({name, 0.0});
    out.us[it->second].second += 1000.0 * ms;
  }
  clear();
  return out;
}

void Marks::observe_input(int layer, Fp8Calibration::Input which, const __half* x, long long n,
                          cudaStream_t s) const {
  if (observe) study::fp8::amax(x, n, observe + layer * Fp8Calibration::kInputs + which, s);
}

}  // namespace encoder
