// Minimal program for compute-sanitizer's initcheck: does it see global memory written by the
// asynchronous (TMA) proxy? Each case writes one buffer in one way, then the same reader kernel
// reads all of it with 16-byte cp.async loads, the way the flash attention kernels read the
// packed QKV buffer. Run it under the tool, one case at a time:
//   compute-sanitizer --tool initcheck build/tests/sanitizer/initcheck_repro --case bulk_store
// and count the "Uninitialized __global__ memory read" reports (tests/sanitizer/initcheck.sh
// does that for every case). Without the tool the program checks that the reader saw exactly
// what the writer wrote, so a case that reports reads is a read of written memory.
//
// Cases:
//   plain_store  a kernel writes the buffer with ordinary stores          (expected: 0 reports)
//   bulk_store   a kernel stages it in shared memory and writes it with the bulk copy engine
//                (cp.async.bulk global <- shared, the store path of TMA)
//   cublaslt     the encoder's QKV GEMM (study::Gemm, bias epilogue) writes it, at the shape
//                initcheck flagged (vit_ti, batch 2, 64 px: 34 rows, 576 features, k 192)
//   unwritten    nothing writes it: the positive control (every read should be reported)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <cuda_fp16.h>
#include "device/tiles.cuh"
#include "gemm/gemm.hpp"
#include "harness/buffer.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"

namespace {

constexpr int kRows = 34, kCols = 576, kK = 192;  // the QKV output of the flagged run
constexpr int kElems = kRows * kCols;
constexpr int kChunks = kElems / 8;                // 16-byte chunks
constexpr int kThreads = 256;
static_assert(kElems % 8 == 0, "whole 16-byte chunks");

__device__ __half pattern(int i) { return __float2half(static_cast<float>(i % 1021) * 0.125f); }

__global__ void plain_store(__half* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kElems; i += gridDim.x * blockDim.x)
    y[i] = pattern(i);
}

// One block per 4 KB piece: shared memory filled by ordinary stores, made visible to the async
// proxy, then one bulk copy to global memory, waited on before the block exits.
constexpr int kPieceElems = 2048;
__global__ void bulk_store(__half* y) {
  __shared__ alignas(128) __half piece[kPieceElems];
  const int base = blockIdx.x * kPieceElems;
  const int n = min(kPieceElems, kElems - base);
  for (int i = threadIdx.x; i < n; i += blockDim.x) piece[i] = pattern(base + i);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(y + base),
                 "r"(study::tiles::smem_addr(piece)), "r"(n * 2)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  }
}

// Reads every chunk once with cp.async into shared memory (as flash.cuh's load_tile does) and
// copies it out with ordinary loads and stores.
__global__ void read_cp_async(const __half* x, __half* out) {
  __shared__ alignas(16) __half stage[kThreads * 8];
  for (int c0 = blockIdx.x * kThreads; c0 < kChunks; c0 += gridDim.x * kThreads) {
    const int c = c0 + threadIdx.x;
    const bool valid = c < kChunks;
    study::tiles::cp_async16(study::tiles::smem_addr(stage + threadIdx.x * 8), x + (valid ? c : 0) * 8, valid);
    study::tiles::cp_async_commit();
    study::tiles::cp_async_wait<0>();
    if (valid)
      *reinterpret_cast<uint4*>(out + c * 8) = *reinterpret_cast<const uint4*>(stage + threadIdx.x * 8);
    __syncthreads();
  }
}

int usage() {
  std::fprintf(stderr, "usage: initcheck_repro --case plain_store|bulk_store|cublaslt|unwritten\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--case") != 0) return usage();
  const std::string which = argv[2];
  if (which != "plain_store" && which != "bulk_store" && which != "cublaslt" && which != "unwritten")
    return usage();
  try {
    if (study::gpu_count() == 0) {
      std::fprintf(stderr, "error: no CUDA device\n");
      return 77;
    }
    // Plain allocations (no pool), so the tool sees a fresh, never-written buffer.
    __half *y = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&y, kElems * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&out, kElems * sizeof(__half)));
    CUDA_CHECK(cudaMemset(out, 0, kElems * sizeof(__half)));

    if (which == "plain_store") {
      plain_store<<<64, kThreads>>>(y);
      LAUNCH_CHECK();
    } else if (which == "bulk_store") {
      bulk_store<<<(kElems + kPieceElems - 1) / kPieceElems, kThreads>>>(y);
      LAUNCH_CHECK();
    } else if (which == "cublaslt") {
      std::vector<__half> host_x(kRows * kK), host_w(kCols * kK), host_b(kCols);
      for (std::size_t i = 0; i < host_x.size(); ++i) host_x[i] = __float2half(((i * 7) % 13) * 0.0625f - 0.375f);
      for (std::size_t i = 0; i < host_w.size(); ++i) host_w[i] = __float2half(((i * 5) % 11) * 0.0625f - 0.3125f);
      for (std::size_t i = 0; i < host_b.size(); ++i) host_b[i] = __float2half((i % 7) * 0.125f);
      __half *x = nullptr, *w = nullptr, *b = nullptr;
      CUDA_CHECK(cudaMalloc(&x, host_x.size() * sizeof(__half)));
      CUDA_CHECK(cudaMalloc(&w, host_w.size() * sizeof(__half)));
      CUDA_CHECK(cudaMalloc(&b, host_b.size() * sizeof(__half)));
      CUDA_CHECK(cudaMemcpy(x, host_x.data(), host_x.size() * sizeof(__half), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(w, host_w.data(), host_w.size() * sizeof(__half), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(b, host_b.data(), host_b.size() * sizeof(__half), cudaMemcpyHostToDevice));
      study::Gemm gemm;
      study::GemmOperands op;
      op.x = x;
      op.w = w;
      op.y = y;
      op.bias = b;
      gemm.run({kRows, kCols, kK}, study::Epilogue::Bias, op, nullptr);
      for (const auto& c : gemm.choices()) std::printf("cuBLASLt: %s\n", c.c_str());
    }
    read_cp_async<<<4, kThreads>>>(y, out);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());

    // The reader must have seen what the writer wrote (meaningless for `unwritten`).
    std::vector<__half> written(kElems), seen(kElems);
    CUDA_CHECK(cudaMemcpy(seen.data(), out, kElems * sizeof(__half), cudaMemcpyDeviceToHost));
    if (which != "unwritten") {
      CUDA_CHECK(cudaMemcpy(written.data(), y, kElems * sizeof(__half), cudaMemcpyDeviceToHost));
      if (std::memcmp(written.data(), seen.data(), kElems * sizeof(__half)) != 0) {
        std::fprintf(stderr, "error: %s: the reader saw other values than the buffer holds\n", which.c_str());
        return 1;
      }
    }
    std::printf("%s: %d chunks of 16 bytes read by cp.async; reader matches the buffer\n", which.c_str(), kChunks);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
