// The ping-pong GEMM (pingpong_gemm.hpp). One persistent block per SM, 384 threads:
// - warpgroup 0, the producer: one thread streams 128 x 64 tiles of X and W into a 6-stage ring
//   of shared memory with TMA (128-byte swizzle, the layout wgmma's descriptors read), each
//   stage guarded by a "full" mbarrier (TMA bytes landed) and an "empty" one (consumer done);
// - warpgroups 1 and 2, the consumers: output tiles of 128 x 128 go to them in turn. A consumer
//   runs a tile's main loop (per 64-wide k-block, 2 x 4 wgmma m64n128k16 from shared memory,
//   accumulating in 128 fp32 registers per thread), then its epilogue straight from the
//   accumulators (bias, tanh-form GELU, residual, fp16 store), while the other consumer runs the next
//   tile's main loop. An "order" mbarrier per consumer makes the main loops strictly alternate:
//   a consumer starts tile i only after the other finished tile i - 1's main loop, which keeps
//   the tensor cores busy with one main loop at a time and keeps every mbarrier wait at most one
//   phase ahead (a parity wait cannot tell phase u from u - 2).
#include "mlp/pingpong_gemm.hpp"
#include "device/sm90.cuh"
#include "device/tma_map.hpp"
#include "harness/check.hpp"
#include "mlp/gelu.cuh"

namespace mlp {
namespace {

using namespace sm90;

constexpr int kBM = 128, kBN = 128;  // output tile of one consumer warpgroup
constexpr int kBK = 64;              // k-block: one 128-byte swizzled row of halves
constexpr int kStages = 6;
constexpr int kThreads = 3 * 128;
constexpr int kTileA = kBM * kBK * 2, kTileB = kBN * kBK * 2;  // 16 KB each
constexpr int kStageBytes = kTileA + kTileB;
constexpr int kBarriers = 2 * kStages + 2;                      // full, empty, order
constexpr int kSmemBytes = kStages * kStageBytes + kBarriers * 8 + 1024;  // +1024: alignment
constexpr int kConsumerWarps = 4;

struct Shape {
  int m, n, k;
  int tiles_m, tiles, k_blocks;
};

template <PingpongEpilogue E>
__global__ void __launch_bounds__(kThreads, 1)
kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
       __half* __restrict__ y, const __half* __restrict__ bias, const __half* __restrict__ residual, Shape s) {
#ifdef STUDY_WGMMA
  extern __shared__ unsigned char smem_raw[];
  // TMA's 128-byte swizzle and the descriptors both key on address bits: 1024-aligned tiles.
  unsigned char* smem = smem_raw + ((1024 - (shared_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  uint64_t* order = empty + kStages;  // order[c]: the other consumer finished a main loop

  // Warp-uniform by construction: ptxas serializes every wgmma of a kernel that issues one
  // under a branch it cannot prove uniform.
  const int group = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], kConsumerWarps);
    }
    mbar_init(&order[0], kConsumerWarps);
    mbar_init(&order[1], kConsumerWarps);
    mbar_init_fence();
  }
  __syncthreads();

  if (group == 0) {  // producer
    set_max_registers_dec<40>();
    if (threadIdx.x != 0) return;
    int pos = 0;  // position in the block's sequence of k-blocks, over all its tiles
    for (int t = blockIdx.x; t < s.tiles; t += gridDim.x) {
      const int tm = t % s.tiles_m, tn = t / s.tiles_m;
      for (int kb = 0; kb < s.k_blocks; ++kb, ++pos) {
        const int st = pos % kStages;
        mbar_wait(&empty[st], ((pos / kStages) & 1) ^ 1);  // a fresh barrier passes parity 1
        mbar_arrive_expect_tx(&full[st], kStageBytes);
        unsigned char* a = smem + st * kStageBytes;
        tma_load_2d(a, &map_x, kb * kBK, tm * kBM, &full[st]);
        tma_load_2d(a + kTileA, &map_w, kb * kBK, tn * kBN, &full[st]);
      }
    }
    return;
  }

  set_max_registers_inc<232>();
  const int c = group - 1;  // consumer 0 takes the block's even tiles, consumer 1 the odd ones
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  float acc[2][64];
  int i = c;  // the tile's index among the block's tiles
  for (int t = blockIdx.x + c * gridDim.x; t < s.tiles; t += 2 * gridDim.x, i += 2) {
    if (i > 0) mbar_wait(&order[c], ((i - 1) / 2) & 1);
    int pos = i * s.k_blocks;
    for (int kb = 0; kb < s.k_blocks; ++kb, ++pos) {
      const int st = pos % kStages;
      mbar_wait(&full[st], (pos / kStages) & 1);
      const uint32_t a = shared_addr(smem + st * kStageBytes);
      const uint64_t a0 = tile_desc(a), a1 = tile_desc(a + kTileA / 2), b = tile_desc(a + kTileA);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {  // +32 bytes along the swizzled rows per k-step
        wgmma_ss_n128(acc[0], a0 + 2 * ks, b + 2 * ks, kb > 0 || ks > 0);
        wgmma_ss_n128(acc[1], a1 + 2 * ks, b + 2 * ks, kb > 0 || ks > 0);
      }
      wgmma_commit();
      if (kb > 0) {  // the previous k-block's wgmmas are done: its stage can be refilled
        wgmma_wait<1>();
        if (lane == 0) mbar_arrive(&empty[(pos - 1) % kStages]);
      }
    }
    wgmma_wait<0>();
    reg_fence(acc[0]);
    reg_fence(acc[1]);
    if (lane == 0) {
      mbar_arrive(&empty[(pos - 1) % kStages]);
      mbar_arrive(&order[1 - c]);
    }

    // Epilogue. Accumulator layout of wgmma m64nN, per warp: rows 16 warp + lane / 4 (+8),
    // columns 8 j + 2 (lane % 4) + {0, 1} in registers 4 j + {0, 1} (+2 for the row + 8).
    // Bias and GELU first, in registers and without a branch between the 128 values, so their
    // dependent chains interleave; then the guarded residual reads and stores.
    const int tm = t % s.tiles_m, tn = t / s.tiles_m;
    const int col0 = tn * kBN + 2 * (lane % 4);
    const bool full_n = (tn + 1) * kBN <= s.n;  // every column of the tile exists
    if constexpr (E != PingpongEpilogue::None) {
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const int col = col0 + 8 * j;
        const float2 b = full_n || col < s.n ? __half22float2(*reinterpret_cast<const __half2*>(bias + col))
                                             : make_float2(0.f, 0.f);
#pragma unroll
        for (int mh = 0; mh < 2; ++mh)
#pragma unroll
          for (int r = 0; r < 4; r += 2) {
            float& v0 = acc[mh][4 * j + r];
            float& v1 = acc[mh][4 * j + r + 1];
            v0 += b.x;
            v1 += b.y;
            if constexpr (E == PingpongEpilogue::BiasGelu) {
              v0 = gelu_tanh(v0);
              v1 = gelu_tanh(v1);
            }
          }
      }
    }
#pragma unroll
    for (int mh = 0; mh < 2; ++mh)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = tm * kBM + mh * 64 + warp * 16 + lane / 4 + half * 8;
        if (row >= s.m) continue;
        const size_t base = static_cast<size_t>(row) * s.n;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          const int col = col0 + 8 * j;
          if (!full_n && col >= s.n) continue;  // n % 8 == 0: col + 1 < n too
          float v0 = acc[mh][4 * j + 2 * half], v1 = acc[mh][4 * j + 2 * half + 1];
          if constexpr (E == PingpongEpilogue::BiasResidual) {
            const float2 r = __half22float2(*reinterpret_cast<const __half2*>(residual + base + col));
            v0 += r.x;
            v1 += r.y;
          }
          *reinterpret_cast<__half2*>(y + base + col) = __floats2half2_rn(v0, v1);
        }
      }
  }
#else
  __trap();  // built without sm_90a: pingpong_supports() refuses before getting here
#endif
}

struct Device {
  int major = 0, sms = 0;
};
const Device& device() {
  static const Device d = [] {
    Device r;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) {
      cudaDeviceGetAttribute(&r.major, cudaDevAttrComputeCapabilityMajor, dev);
      cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, dev);
    }
    return r;
  }();
  return d;
}

template <PingpongEpilogue E>
void launch(const Shape& s, const CUtensorMap& mx, const CUtensorMap& mw, __half* y, const __half* bias,
            const __half* residual, cudaStream_t stream) {
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)configured;
  const int blocks = s.tiles < device().sms ? s.tiles : device().sms;
  kernel<E><<<blocks, kThreads, kSmemBytes, stream>>>(mx, mw, y, bias, residual, s);
  LAUNCH_CHECK();
}

}  // namespace

std::string pingpong_unavailable() {
#ifndef STUDY_SM90A
  return "needs wgmma and TMA: build with -Dgpu_arch=90a (the default)";
#else
  if (device().major != 9) return "needs wgmma and TMA, which only compute capability 9.0 (Hopper) has";
  return {};
#endif
}

std::string pingpong_supports(int m, int n, int k) {
  if (m <= 0 || n <= 0 || k <= 0) return "sizes must be positive";
  if (n % 8 || k % 8)
    return "n " + std::to_string(n) + " and k " + std::to_string(k) +
           " must be multiples of 8 (TMA needs 16-byte row strides)";
  return pingpong_unavailable();
}

std::string pingpong_supports_mlp(const Problem& p) {
  if (auto r = check_common(p); !r.empty()) return r;
  if (auto r = pingpong_supports(p.rows, p.mlp_hidden, p.hidden); !r.empty()) return r;
  return pingpong_supports(p.rows, p.hidden, p.mlp_hidden);
}

void pingpong_gemm(int m, int n, int k, PingpongEpilogue e, const __half* x, const __half* w, __half* y,
                   const __half* bias, const __half* residual, cudaStream_t stream) {
  if (const auto why = pingpong_supports(m, n, k); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, "pingpong GEMM: " + why);
  const bool wants_residual = e == PingpongEpilogue::BiasResidual;
  if ((e != PingpongEpilogue::None && !bias) || (wants_residual && (!residual || residual == y)))
    throw study::StudyError(study::ErrorKind::Usage, "pingpong GEMM: missing bias or residual, or residual is y");
  for (const void* p : {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(y),
                        static_cast<const void*>(bias), static_cast<const void*>(residual)})
    if (reinterpret_cast<std::uintptr_t>(p) % 16)
      throw study::StudyError(study::ErrorKind::Usage, "pingpong GEMM: every operand must be 16-byte aligned");
  Shape s{m, n, k, (m + kBM - 1) / kBM, 0, (k + kBK - 1) / kBK};
  s.tiles = s.tiles_m * ((n + kBN - 1) / kBN);
  const CUtensorMap mx = tile_map(x, m, k, kBM), mw = tile_map(w, n, k, kBN);
  using Launch = void (*)(const Shape&, const CUtensorMap&, const CUtensorMap&, __half*, const __half*,
                          const __half*, cudaStream_t);
  // Indexed by PingpongEpilogue.
  static constexpr Launch kLaunch[] = {launch<PingpongEpilogue::None>, launch<PingpongEpilogue::BiasGelu>,
                                       launch<PingpongEpilogue::BiasResidual>};
  kLaunch[static_cast<int>(e)](s, mx, mw, y, bias, residual, stream);
}

}  // namespace mlp
