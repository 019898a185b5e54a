// Shared-memory tiles of 128-byte rows (64 fp16) and the cp.async copies that fill them: what
// the study's mma.sync and wgmma kernels share (attention's flash kernels, the implicit-GEMM
// patch embeddings).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace study::tiles {

constexpr int kRowHalves = 64;  // one 128-byte row

// Offset in halves of 16-byte chunk c of row r in a swizzled [rows][64] tile: chunk c ^ (r % 8),
// the 128-byte swizzle of Hopper's wgmma descriptors when the tile starts 1024-byte aligned, and
// bank-conflict free for ldmatrix phases and 16-byte cp.async stores alike.
__device__ __forceinline__ int swizzle(int r, int c) { return r * kRowHalves + ((c ^ (r & 7)) << 3); }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1 and registers; valid = false writes zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace study::tiles
