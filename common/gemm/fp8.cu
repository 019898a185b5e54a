// The FP8 kernels of common/gemm/fp8.hpp: amax, quantization of activations and weights, and the
// LayerNorm that writes E4M3. Memory-bound passes: 16-byte loads of 8 halves, 8-byte stores of
// 8 E4M3 values.
#include <stdexcept>
#include "device/reduce.cuh"
#include "gemm/fp8.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/test_hooks.hpp"

namespace study {
namespace fp8 {

const char* scaling_name(Scaling s) { return s == Scaling::Channel ? "per-channel" : "per-tensor"; }

float to_float(e4m3 v) { return static_cast<float>(v); }

std::string unavailable() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return "no CUDA device";
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major * 10 + minor < 89)
    return "FP8 tensor cores need compute capability 8.9 or newer (this GPU: " + std::to_string(major) + "." +
           std::to_string(minor) + ")";
  return {};
}

namespace {

constexpr int kThreads = 256;

#ifdef STUDY_TEST_HOOKS
// The planted bugs e4m3_no_saturation and e4m3_clamp_low (common/harness/test_hooks.cpp), set
// from the host.
__device__ bool planted_no_saturation = false;
__device__ bool planted_clamp_low = false;
#endif

// Two floats -> two saturated E4M3 values, the first in the low byte (memory order).
__device__ __forceinline__ unsigned short pack2(float a, float b) {
#ifdef STUDY_TEST_HOOKS
  if (planted_no_saturation) return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_NOSAT, __NV_E4M3);
  if (planted_clamp_low) {  // the E4M3 value below 448
    a = fminf(fmaxf(a, -416.f), 416.f);
    b = fminf(fmaxf(b, -416.f), 416.f);
  }
#endif
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// Hands the planted bug to the device once, on the first quantizing call (an eager one: every
// FP8 forward runs eagerly before it is captured).
void set_plants() {
#ifdef STUDY_TEST_HOOKS
  static const bool once = [] {
    const bool no_saturation = planted("e4m3_no_saturation"), clamp_low = planted("e4m3_clamp_low");
    CUDA_CHECK(cudaMemcpyToSymbol(planted_no_saturation, &no_saturation, sizeof no_saturation));
    CUDA_CHECK(cudaMemcpyToSymbol(planted_clamp_low, &clamp_low, sizeof clamp_low));
    return true;
  }();
  (void)once;
#endif
}

// 8 fp16 values from one 16-byte load, as floats.
__device__ __forceinline__ void load8(const __half* p, float (&f)[8]) {
  const HalfVec<8> u = HalfVec<8>::load(p);
#pragma unroll
  for (int j = 0; j < 8; ++j) f[j] = u.get(j);
}

__device__ __forceinline__ uint2 pack8(const float (&f)[8], float s) {
  uint2 out;
  unsigned short* o = reinterpret_cast<unsigned short*>(&out);
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] = pack2(f[2 * j] * s, f[2 * j + 1] * s);
  return out;
}

// Non-negative floats order as their bit patterns do, so an integer atomicMax is a float max.
__device__ __forceinline__ void atomic_max_nonneg(float* where, float v) {
  atomicMax(reinterpret_cast<int*>(where), __float_as_int(v));
}

__global__ void amax_kernel(const __half* __restrict__ x, long long chunks, float* __restrict__ out) {
  float m = 0.f;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float f[8];
    load8(x + 8 * i, f);
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(f[j]));
  }
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) atomic_max_nonneg(out, m);
}

__global__ void broadcast_kernel(const float* __restrict__ value, float* __restrict__ out, int n) {
  const float v = *value;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = v;
}

__global__ void quantize_kernel(const __half* __restrict__ x, long long chunks, const float* __restrict__ inv_scale,
                                uint2* __restrict__ q) {
  const float s = *inv_scale;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float f[8];
    load8(x + 8 * i, f);
    q[i] = pack8(f, s);
  }
}

// One block per row of W: its amax.
__global__ void row_amax_kernel(const __half* __restrict__ w, int k, float* __restrict__ row_amax) {
  __shared__ float scratch[32];
  const __half* r = w + static_cast<long long>(blockIdx.x) * k;
  float m = 0.f;
  for (int i = threadIdx.x; i < k; i += blockDim.x) m = fmaxf(m, fabsf(__half2float(r[i])));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_amax[blockIdx.x] = m;
}

__device__ __forceinline__ float scale_of(float amax) { return amax > 0.f ? amax / kE4M3Max : 1.f; }

// One block: the weight's scales from its row amaxes (one per row, or their maximum).
__global__ void weight_scales_kernel(const float* __restrict__ row_amax, int n, bool per_channel,
                                     float* __restrict__ scale) {
  __shared__ float scratch[32];
  if (per_channel) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) scale[i] = scale_of(row_amax[i]);
    return;
  }
  float m = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, row_amax[i]);
  m = block_max(m, scratch);
  if (threadIdx.x == 0) scale[0] = scale_of(m);
}

__global__ void quantize_rows_kernel(const __half* __restrict__ w, int k, const float* __restrict__ scale,
                                     bool per_channel, e4m3* __restrict__ q) {
  const long long row = blockIdx.x;
  const float s = 1.f / scale[per_channel ? row : 0];
  for (int i = threadIdx.x; i < k; i += blockDim.x)
    q[row * k + i] = e4m3(__half2float(w[row * k + i]) * s);  // the conversion saturates
}

// One warp per row, kChunks chunks of 8 values per lane held in registers between the
// statistics and the output (hidden <= 256 kChunks).
template <int kChunks>
__global__ void layernorm_quantize_kernel(const __half* __restrict__ x, const __half* __restrict__ gamma,
                                          const __half* __restrict__ beta, int rows, int hidden, float eps,
                                          const float* __restrict__ inv_scale, e4m3* __restrict__ q) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int chunks = hidden / 8;
  float v[kChunks][8];
  const float2 stats = warp_row_stats<kChunks>(x + static_cast<long long>(row) * hidden, hidden, eps, v);
  const float mean = stats.x, rstd = stats.y;
  const float s = *inv_scale;
  uint2* qr = reinterpret_cast<uint2*>(q + static_cast<long long>(row) * hidden);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int idx = lane + 32 * c;
    if (idx >= chunks) continue;
    float g[8], b[8], y[8];
    load8(gamma + 8 * idx, g);
    load8(beta + 8 * idx, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) y[j] = (v[c][j] - mean) * rstd * g[j] + b[j];
    qr[idx] = pack8(y, s);
  }
}

// Grid-stride loops: one block per 256 chunks, capped at 16 blocks per SM of a 132-SM GPU.
unsigned grid_for(long long chunks) {
  const long long blocks = (chunks + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<long long>(std::max<long long>(blocks, 1), 16 * 132));
}

void require_vectors(long long n, const void* a, const void* b, const char* who) {
  if (n <= 0 || n % 8) throw std::invalid_argument(std::string(who) + ": n must be a positive multiple of 8");
  if (reinterpret_cast<std::uintptr_t>(a) % 16 || reinterpret_cast<std::uintptr_t>(b) % 16)
    throw std::invalid_argument(std::string(who) + ": pointers must be 16-byte aligned");
}

}  // namespace

ActivationScale::ActivationScale(float amax, float margin) : values(2) {
  host_scale = amax > 0.f ? margin * amax / kE4M3Max : 1.f;
  const float v[2] = {host_scale, 1.f / host_scale};
  CUDA_CHECK(cudaMemcpy(values.get(), v, sizeof v, cudaMemcpyHostToDevice));
}

Weight quantize_weight(const __half* w, int n, int k, Scaling scaling, cudaStream_t stream) {
  if (n <= 0 || k <= 0) throw std::invalid_argument("quantize_weight: sizes must be positive");
  const bool per_channel = scaling == Scaling::Channel;
  Weight out{DeviceBuffer<e4m3>(static_cast<std::size_t>(n) * k), DeviceBuffer<float>(per_channel ? n : 1), scaling};
  DeviceBuffer<float> row_amax(n);
  row_amax_kernel<<<n, kThreads, 0, stream>>>(w, k, row_amax.get());
  LAUNCH_CHECK();
  weight_scales_kernel<<<1, 1024, 0, stream>>>(row_amax.get(), n, per_channel, out.scale.get());
  LAUNCH_CHECK();
  quantize_rows_kernel<<<n, kThreads, 0, stream>>>(w, k, out.scale.get(), per_channel, out.q.get());
  LAUNCH_CHECK();
  CUDA_CHECK(cudaStreamSynchronize(stream));  // row_amax dies here
  return out;
}

void amax(const __half* x, long long n, float* out, cudaStream_t stream) {
  require_vectors(n, x, x, "fp8::amax");
  amax_kernel<<<grid_for(n / 8), kThreads, 0, stream>>>(x, n / 8, out);
  LAUNCH_CHECK();
}

void broadcast(const float* value, float* out, int n, cudaStream_t stream) {
  broadcast_kernel<<<grid_for(n), kThreads, 0, stream>>>(value, out, n);
  LAUNCH_CHECK();
}

void quantize(const __half* x, long long n, const float* inv_scale, e4m3* q, cudaStream_t stream) {
  require_vectors(n, x, q, "fp8::quantize");
  set_plants();
  quantize_kernel<<<grid_for(n / 8), kThreads, 0, stream>>>(x, n / 8, inv_scale,
                                                            reinterpret_cast<uint2*>(q));
  LAUNCH_CHECK();
}

void layernorm_quantize(const __half* x, const __half* gamma, const __half* beta, int rows, int hidden, float eps,
                        const float* inv_scale, e4m3* q, cudaStream_t stream) {
  if (rows <= 0 || hidden <= 0 || hidden % 8 || hidden > kLayerNormMaxHidden)
    throw std::invalid_argument("fp8::layernorm_quantize: rows positive, hidden a multiple of 8 and <= " +
                                std::to_string(kLayerNormMaxHidden));
  set_plants();
  const int rows_per_block = kThreads / 32;
  const unsigned grid = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  const int chunks_per_lane = (hidden / 8 + 31) / 32;
  switch (chunks_per_lane) {
    case 1: layernorm_quantize_kernel<1><<<grid, kThreads, 0, stream>>>(x, gamma, beta, rows, hidden, eps, inv_scale, q); break;
    case 2: layernorm_quantize_kernel<2><<<grid, kThreads, 0, stream>>>(x, gamma, beta, rows, hidden, eps, inv_scale, q); break;
    case 3: layernorm_quantize_kernel<3><<<grid, kThreads, 0, stream>>>(x, gamma, beta, rows, hidden, eps, inv_scale, q); break;
    default: layernorm_quantize_kernel<4><<<grid, kThreads, 0, stream>>>(x, gamma, beta, rows, hidden, eps, inv_scale, q); break;
  }
  LAUNCH_CHECK();
}

}  // namespace fp8
}  // namespace study
