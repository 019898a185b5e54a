// A byte range that a kernel may ask L2 to fetch while it runs, for a later kernel that will read
// it (the encoder: the weights of the GEMMs ahead): fire-and-forget requests, no data comes back
// to the asking threads, so the kernel that carries them spends about one instruction per chunk.
#pragma once
#include <cstddef>

namespace study {

struct ByteRange {
  const void* data = nullptr;
  std::size_t bytes = 0;
#ifdef STUDY_TEST_HOOKS
  // When set, every chunk requested is added here (device): a test checks the requests were made.
  unsigned long long* requested = nullptr;
#endif
};

#ifdef __CUDACC__
// Every thread of the grid requests its share of r in 16 KB chunks (cp.async.bulk.prefetch.L2 on
// sm_90; line by line before it), dealt out CTA by CTA first: each SM's copy engine streams its
// CTAs' chunks, so the fewer chunks per SM, the sooner the carrying kernel is done with them.
// r.data must be 16-byte aligned; a tail under 16 bytes is left out.
__device__ __forceinline__ void request_into_l2(const ByteRange& r) {
  constexpr std::size_t kChunk = std::size_t(16) << 10;
  const std::size_t ctas = std::size_t(gridDim.x) * gridDim.y * gridDim.z;
  const std::size_t cta = blockIdx.x + std::size_t(gridDim.x) * (blockIdx.y + std::size_t(gridDim.y) * blockIdx.z);
  const std::size_t threads = ctas * blockDim.x * blockDim.y * blockDim.z;
  const std::size_t thread = (threadIdx.x + std::size_t(blockDim.x) * (threadIdx.y + std::size_t(blockDim.y) * threadIdx.z)) * ctas + cta;
  const char* base = static_cast<const char*>(r.data);
  for (std::size_t off = thread * kChunk; off < r.bytes; off += threads * kChunk) {
    const std::size_t n = (r.bytes - off < kChunk ? r.bytes - off : kChunk) & ~std::size_t(15);
#ifdef STUDY_TEST_HOOKS
    if (r.requested && n) atomicAdd(r.requested, static_cast<unsigned long long>(n));
#endif
#if __CUDA_ARCH__ >= 900
    if (n) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(unsigned(n)) : "memory");
#else
    for (std::size_t line = 0; line < n; line += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off + line));
#endif
  }
}
#endif

}  // namespace study
