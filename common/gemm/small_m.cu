// The few-rows GEMM: candidates of the CUTLASS layer's search (cutlass_gemm.hpp, RunOptions::small_m)
// for the 197-row GEMMs of a batch-1 forward, where every library kernel leaves most SMs idle or
// streams a long K loop through few of them (the encoder NOTES' kernel table).
//
// Each CTA computes a 256 x kBN tile of Y (all the rows of a batch-1 forward at once, so each
// weight is read once) over one K slice of K / slices; the slices of a tile are one thread-block
// cluster, and their fp32 partial tiles are added through distributed shared memory, each CTA of
// the cluster a share of the rows, with the epilogue (bias, GELU or the residual) there: no
// workspace, no reduction kernel, no atomics. 512 threads: four warpgroups, each 64 rows on wgmma
// m64nkBNk16 from 128-byte-swizzled tiles that cp.async fills through a 4-stage ring. Launched
// with programmatic dependent launch, a CTA requests its first weight stages before it waits for
// the previous kernel (weights depend on nothing), so their DRAM latency hides under that
// kernel's tail.
//
// Entries per (kBN, slices): kBN 64 or 128 and slices 1, 2, 3, 4, 6 or 8; a shape runs on one
// when n % kBN == 0 and k % (64 slices) == 0. Rows past m are loaded as zeros and never stored.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <string>
#include <vector>
#include "device/gelu.cuh"
#include "device/sm90.cuh"
#include "device/tiles.cuh"
#include "gemm/cutlass_gemm_entry.hpp"
#include "harness/test_hooks.hpp"

namespace study::cutlass_gemm::detail {

namespace {

constexpr int kThreads = 512;
constexpr int kWarpgroups = kThreads / 128;
constexpr int kBM = 64 * kWarpgroups;  // a tile's rows: every row of a 224 px image's tokens
constexpr int kBK = 64;                // one 128-byte swizzled row of fp16
constexpr int kStages = 4;
constexpr int kTileHalves = 64 * kBK;  // one [64][64] swizzled tile

template <int kBN>
constexpr int stage_halves() {
  return kBM * kBK + kBN * kBK;  // A's four 64-row tiles, then W's kBN rows
}
// The fp32 partial tile, each row padded by 8 floats so that a warp's float2 stores of 8 rows
// land in distinct banks.
template <int kBN>
constexpr int partial_stride() {
  return kBN + 8;
}
template <int kBN>
constexpr int smem_bytes() {
  constexpr int stages = kStages * stage_halves<kBN>() * 2, partial = kBM * partial_stride<kBN>() * 4;
  return (stages > partial ? stages : partial) + 1024;  // + the 1024-byte alignment of the tiles
}

struct Params {
  const __half *x, *w, *bias, *residual;
  __half* y;
  int m, n, k;
  int reduced_slices;  // slices the epilogue adds: all but in the planted bug
};

template <Activation kAct>
__device__ __forceinline__ float activate(float v) {
  if constexpr (kAct == Activation::GeluErfFit) return gelu_erf_fit(v);
  else if constexpr (kAct == Activation::GeluErf) return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  else return v;
}

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

template <int kBN, int kSlices, Activation kAct, bool kResidual>
__global__ void __launch_bounds__(kThreads, 1) small_m_kernel(const Params p) {
#ifdef STUDY_WGMMA
  namespace cg = cooperative_groups;
  using tiles::cp_async16;
  using tiles::smem_addr;
  using tiles::swizzle;
  extern __shared__ unsigned char smem_raw[];
  __half* stages = reinterpret_cast<__half*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  const int slice = blockIdx.x, n0 = blockIdx.y * kBN, m0 = blockIdx.z * kBM;
  const int k_slice = p.k / kSlices, k0 = slice * k_slice, k_blocks = k_slice / kBK;
  const int t = threadIdx.x, chunk = t % 8;

  // Stage s of k-block kb: A's rows m0.. (zeros past m) and W's rows n0.., 64 columns from k0 + 64 kb.
  auto load_w = [&](int kb) {
    __half* w_s = stages + (kb % kStages) * stage_halves<kBN>() + kBM * kBK;
#pragma unroll
    for (int j = 0; j < kBN * 8 / kThreads; ++j) {
      const int r = t / 8 + j * (kThreads / 8);
      cp_async16(smem_addr(w_s + r / 64 * kTileHalves + swizzle(r % 64, chunk)),
                 p.w + static_cast<long long>(n0 + r) * p.k + k0 + kb * kBK + chunk * 8, true);
    }
  };
  auto load_a = [&](int kb) {
    __half* a_s = stages + (kb % kStages) * stage_halves<kBN>();
#pragma unroll
    for (int j = 0; j < kBM * 8 / kThreads; ++j) {
      const int r = t / 8 + j * (kThreads / 8);
      const bool valid = m0 + r < p.m;
      cp_async16(smem_addr(a_s + r / 64 * kTileHalves + swizzle(r % 64, chunk)),
                 p.x + static_cast<long long>(valid ? m0 + r : 0) * p.k + k0 + kb * kBK + chunk * 8, valid);
    }
  };

  // The weights of the first stages before the wait for the previous kernel; then A's. Exactly
  // kStages - 1 groups are committed here (some empty), so that the loop's wait counts hold.
  for (int s = 0; s < kStages - 1; ++s)
    if (s < k_blocks) load_w(s);
  griddep_wait();
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_blocks) load_a(s);
    tiles::cp_async_commit();
  }

  const int wg = t / 128;
  const bool wg_rows = m0 + 64 * wg < p.m;  // a warpgroup whose 64 rows are all past m computes nothing
  float acc[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.f;

  for (int kb = 0; kb < k_blocks; ++kb) {
    tiles::cp_async_wait<kStages - 2>();
    sm90::fence_proxy_async();  // the copies' writes, before wgmma reads them
    __syncthreads();
    // Refill the stage the previous iteration read (its wgmma waited before that barrier).
    if (kb + kStages - 1 < k_blocks) {
      load_w(kb + kStages - 1);
      load_a(kb + kStages - 1);
    }
    tiles::cp_async_commit();
    if (wg_rows) {
      const __half* stage = stages + (kb % kStages) * stage_halves<kBN>();
      const uint64_t a_desc = sm90::tile_desc(smem_addr(stage + wg * kTileHalves));
      const uint64_t b_desc = sm90::tile_desc(smem_addr(stage + kBM * kBK));
      sm90::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {
        if constexpr (kBN == 128) sm90::wgmma_ss_n128(acc, a_desc + 2 * ks, b_desc + 2 * ks, 1);
        else sm90::wgmma_ss<kBN>(acc, a_desc + 2 * ks, b_desc + 2 * ks, 1);
      }
      sm90::wgmma_commit();
      sm90::wgmma_wait_all();
      sm90::reg_fence(acc);
    }
  }
  tiles::cp_async_wait<0>();
  __syncthreads();  // every product done: the stages become the partial tile
  griddep_launch_dependents();

  // The accumulators (wgmma's m64nN layout: row 16 warp + lane / 4 (+ 8), columns 8 i + 2 (lane % 4))
  // into the partial tile.
  float* partial = reinterpret_cast<float*>(stages);
  constexpr int kStride = partial_stride<kBN>();
  {
    const int warp = t % 128 / 32, lane = t % 32;
    const int r = 64 * wg + 16 * warp + lane / 4, c = 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) {
      *reinterpret_cast<float2*>(partial + r * kStride + 8 * i + c) = make_float2(acc[4 * i], acc[4 * i + 1]);
      *reinterpret_cast<float2*>(partial + (r + 8) * kStride + 8 * i + c) = make_float2(acc[4 * i + 2], acc[4 * i + 3]);
    }
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every slice's partial tile written and visible to the cluster

  // This CTA's share of the tile's rows: the slices' partials added, then the epilogue.
  const int rows = min(kBM, p.m - m0), share = (rows + kSlices - 1) / kSlices;
  const int r_begin = slice * share, r_end = min(rows, r_begin + share);
  constexpr int kQuads = kBN / 4;
  for (int e = r_begin * kQuads + t; e < r_end * kQuads; e += kThreads) {
    const int r = e / kQuads, c = e % kQuads * 4;
    // Every slice's load issued before the first add: one round trip through the cluster, not kSlices.
    float4 v[kSlices];
#pragma unroll
    for (int q = 0; q < kSlices; ++q)
      v[q] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(partial + r * kStride + c, q));
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int q = 0; q < kSlices; ++q)
      if (q < p.reduced_slices) {
        sum.x += v[q].x;
        sum.y += v[q].y;
        sum.z += v[q].z;
        sum.w += v[q].w;
      }
    const long long at = static_cast<long long>(m0 + r) * p.n + n0 + c;
    const uint2 b_raw = *reinterpret_cast<const uint2*>(p.bias + n0 + c);
    const float2 b01 = __half22float2(*reinterpret_cast<const __half2*>(&b_raw.x));
    const float2 b23 = __half22float2(*reinterpret_cast<const __half2*>(&b_raw.y));
    float v0 = activate<kAct>(sum.x + b01.x), v1 = activate<kAct>(sum.y + b01.y);
    float v2 = activate<kAct>(sum.z + b23.x), v3 = activate<kAct>(sum.w + b23.y);
    if constexpr (kResidual) {
      const uint2 r_raw = *reinterpret_cast<const uint2*>(p.residual + at);
      const float2 r01 = __half22float2(*reinterpret_cast<const __half2*>(&r_raw.x));
      const float2 r23 = __half22float2(*reinterpret_cast<const __half2*>(&r_raw.y));
      v0 += r01.x;
      v1 += r01.y;
      v2 += r23.x;
      v3 += r23.y;
    }
    const __half2 o01 = __floats2half2_rn(v0, v1), o23 = __floats2half2_rn(v2, v3);
    uint2 out;
    out.x = *reinterpret_cast<const unsigned*>(&o01);
    out.y = *reinterpret_cast<const unsigned*>(&o23);
    *reinterpret_cast<uint2*>(p.y + at) = out;
  }
  cluster.sync();  // no CTA leaves while another still reads its partial tile
#endif
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int kBN, int kSlices>
bool implementable(const Launch& l) {
  const GemmShape& s = l.shape;
  return s.m > 0 && s.n % kBN == 0 && s.k % (kBK * kSlices) == 0 && aligned16(l.op.x) && aligned16(l.op.w) &&
         aligned16(l.op.y) && l.op.bias && reinterpret_cast<uintptr_t>(l.op.bias) % 8 == 0 &&
         (!l.op.residual || aligned16(l.op.residual)) && sm90::wgmma_unavailable().empty();
}

template <int kBN, int kSlices, Activation kAct, bool kResidual>
cudaError_t prepare() {
  return cudaFuncSetAttribute(small_m_kernel<kBN, kSlices, kAct, kResidual>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<kBN>());
}

template <int kBN, int kSlices, Activation kAct, bool kResidual>
cudaError_t run(const Launch& l, cudaStream_t stream, bool pdl) {
  const GemmShape& s = l.shape;
  const int slices_added = kSlices - (planted("small_m_slice_dropped") && kSlices > 1 ? 1 : 0);
  const Params p{l.op.x, l.op.w, l.op.bias, l.op.residual, l.op.y, s.m, s.n, s.k, slices_added};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kSlices, s.n / kBN, (s.m + kBM - 1) / kBM);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem_bytes<kBN>();
  config.stream = stream;
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = kSlices;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  config.attrs = attrs;
  config.numAttrs = 2;
  return cudaLaunchKernelEx(&config, small_m_kernel<kBN, kSlices, kAct, kResidual>, p);
}

template <int kBN, int kSlices, Activation kAct, bool kResidual>
KernelEntry entry(const char* name) {
  return {name, implementable<kBN, kSlices>, prepare<kBN, kSlices, kAct, kResidual>,
          run<kBN, kSlices, kAct, kResidual>, /*scheduler_knobs=*/false};
}

template <Activation kAct, bool kResidual>
std::vector<KernelEntry> entries() {
  return {entry<64, 1, kAct, kResidual>("small_m_64_s1"),   entry<64, 2, kAct, kResidual>("small_m_64_s2"),
          entry<64, 3, kAct, kResidual>("small_m_64_s3"),   entry<64, 4, kAct, kResidual>("small_m_64_s4"),
          entry<64, 6, kAct, kResidual>("small_m_64_s6"),   entry<64, 8, kAct, kResidual>("small_m_64_s8"),
          entry<128, 1, kAct, kResidual>("small_m_128_s1"), entry<128, 2, kAct, kResidual>("small_m_128_s2"),
          entry<128, 3, kAct, kResidual>("small_m_128_s3"), entry<128, 4, kAct, kResidual>("small_m_128_s4"),
          entry<128, 6, kAct, kResidual>("small_m_128_s6"), entry<128, 8, kAct, kResidual>("small_m_128_s8")};
}

}  // namespace

const std::vector<KernelEntry>& kernels_small_m(Activation act, bool residual) {
  static const std::vector<KernelEntry> bias = entries<Activation::None, false>(),
                                        bias_residual = entries<Activation::None, true>(),
                                        gelu_erf = entries<Activation::GeluErf, false>(),
                                        gelu_erf_fit = entries<Activation::GeluErfFit, false>(), none{};
  if (residual) return act == Activation::None ? bias_residual : none;
  switch (act) {
    case Activation::None: return bias;
    case Activation::GeluErf: return gelu_erf;
    case Activation::GeluErfFit: return gelu_erf_fit;
    default: return none;  // the tanh forms: cuBLASLt's and CUTLASS's kernels have them
  }
}

}  // namespace study::cutlass_gemm::detail
