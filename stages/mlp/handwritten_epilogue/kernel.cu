// handwritten_epilogue: plain cuBLASLt GEMMs plus our own pointwise epilogues, now moving 8
// halves (16 bytes) per thread with the bias column computed once per vector, straight in the
// row-major layout (no transpose, unlike the seed's column-major epilogue path).
#include "device/vec.cuh"
#include "harness/check.hpp"
#include "mlp/gelu.cuh"
#include "mlp/mlp.hpp"

namespace mlp {
namespace {

constexpr int kVec = 8;
constexpr int kThreads = 256;
using Vec = study::HalfVec<kVec>;

// h and y are rewritten in place, so they are read with a plain load: the read-only path
// (__ldg, used by Vec::load) is only for data no thread writes during the kernel.
__device__ __forceinline__ Vec load_rw(const __half* p) {
  Vec r;
  *reinterpret_cast<uint4*>(r.v) = *reinterpret_cast<const uint4*>(p);
  return r;
}

// h = GELU(h + b), one 16-byte vector per thread; cols8 = mlp_hidden / 8.
__global__ void bias_gelu(__half* __restrict__ h, const __half* __restrict__ b, size_t vectors, int cols8) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= vectors) return;
  __half* p = h + i * kVec;
  const Vec v = load_rw(p), bias = Vec::load(b + (i % cols8) * kVec);
  Vec out;
#pragma unroll
  for (int k = 0; k < kVec; ++k) out.set(k, gelu_erf(v.get(k) + bias.get(k)));
  out.store(p);
}

// y = y + b + r, one 16-byte vector per thread; cols8 = hidden / 8; r is the residual.
__global__ void bias_residual(__half* __restrict__ y, const __half* __restrict__ b,
                              const __half* __restrict__ r, size_t vectors, int cols8) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= vectors) return;
  __half* p = y + i * kVec;
  const Vec v = load_rw(p), bias = Vec::load(b + (i % cols8) * kVec), res = Vec::load(r + i * kVec);
  Vec out;
#pragma unroll
  for (int k = 0; k < kVec; ++k) out.set(k, v.get(k) + bias.get(k) + res.get(k));
  out.store(p);
}

unsigned blocks(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

std::string supports(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if (p.hidden % kVec || p.mlp_hidden % kVec)
    return "hidden " + std::to_string(p.hidden) + " / mlp_hidden " + std::to_string(p.mlp_hidden) +
           " not both multiples of 8: 16-byte vectors must not straddle rows";
  return {};
}

void require_aligned(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16)
    throw study::StudyError(study::ErrorKind::Data,
                            std::string("handwritten_epilogue: ") + what + " is not 16-byte aligned");
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  const std::pair<const void*, const char*> ptrs[] = {
      {a.x, "x"}, {a.y, "y"}, {a.h, "h"}, {a.fc1_b, "fc1_b"}, {a.fc2_b, "fc2_b"}, {residual_of(a), "residual"}};
  for (const auto& [ptr, what] : ptrs) require_aligned(ptr, what);
  const size_t vh = static_cast<size_t>(p.rows) * p.mlp_hidden / kVec;
  const size_t vy = static_cast<size_t>(p.rows) * p.hidden / kVec;
  a.gemm->run({p.rows, p.mlp_hidden, p.hidden}, study::Epilogue::None, {a.x, a.fc1_w, a.h}, stream);
  bias_gelu<<<blocks(vh), kThreads, 0, stream>>>(a.h, a.fc1_b, vh, p.mlp_hidden / kVec);
  LAUNCH_CHECK();
  a.gemm->run({p.rows, p.hidden, p.mlp_hidden}, study::Epilogue::None, {a.h, a.fc2_w, a.y}, stream);
  bias_residual<<<blocks(vy), kThreads, 0, stream>>>(a.y, a.fc2_b, residual_of(a), vy, p.hidden / kVec);
  LAUNCH_CHECK();
}

}  // namespace

extern const Version handwritten_epilogue{{"handwritten_epilogue", supports, launch}};

}  // namespace mlp
