// Shared-memory tiles of 128-byte rows (64 fp16), the cp.async copies that fill them, and the
// ldmatrix / mma.sync m16n8k16 fragment primitives: what the study's mma.sync and wgmma kernels
// share (attention's flash kernels, the implicit-GEMM patch embeddings, the encoder's
// persistent kernel).
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

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// c += a b for one m16n8k16 tile: a 16x16 row-major (4 regs), b 16x8 column-major (2 regs).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace study::tiles
