// v7_flash: flash attention on Hopper's asynchronous warpgroup MMA (wgmma, sm_90a); the same
// algorithm as v7_flash_mma, which runs it on mma.sync.
//
// A block owns 128 query rows of one (batch, head): 2 warpgroups (4 warps each) of 64 rows.
// Per 64-key tile and warpgroup, S = Q K^T is 4 wgmma m64n64k16 with both operands read by
// the tensor cores straight from shared memory through descriptors (no ldmatrix, no operand
// registers), the online softmax runs on the accumulators in registers exactly as in v7_flash_mma
// (wgmma's per-warp accumulator layout is mma.sync's m16n8 layout), and O += P V is 4 wgmma
// m64n64k16 with P from registers and V read transposed from shared memory. wgmma is
// asynchronous: P V of tile j and S of tile j+1 are issued back to back and waited on once,
// and the 4 warpgroups an SM holds interleave one's softmax with another's products. K and V
// go through 3 shared-memory stages filled by cp.async, two tiles ahead of the products.
// Tiles are 128-byte rows, 1024-byte aligned, in the 128-byte swizzle wgmma's descriptors
// name (the same XOR layout v7_flash_mma uses for ldmatrix).
#include <cstdint>
#include <type_traits>
#include "attention/attention.hpp"
#include "check.hpp"
#include "attention/flash.cuh"
#include "sm90.cuh"

namespace attention {
namespace {

using namespace flash;
using namespace sm90;

constexpr int kGroups = 2;                 // warpgroups per block
constexpr int kGroupRows = 64;             // query rows per warpgroup: wgmma's M
constexpr int kThreads = kGroups * 128, kRows = kGroups * kGroupRows;
constexpr int kStages = 3;                 // K/V tiles in flight: j (P V), j+1 (S), j+2 (loading)
constexpr int kTileBytes = kKeys * kD * 2;  // one 64 x 64 fp16 tile: 8 KB
constexpr int kSmemBytes = (kGroups + 2 * kStages) * kTileBytes + 1024;  // +1024: alignment slack

#ifdef STUDY_WGMMA
// S = Q K^T for one tile: 4 k-steps of 16 over head_dim (32 bytes along the swizzled rows).
// Always all 64 keys: a narrower wgmma for the ragged last tile would leave the other
// accumulators defined by ordinary moves where the paths join, and ptxas then serializes
// every wgmma of the kernel.
__device__ __forceinline__ void issue_scores(float (&s)[32], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_ss_n64(s, q_desc + 2 * ks, k_desc + 2 * ks, ks > 0);
}

// O += P V for one tile: 4 k-steps of 16 keys (2048 bytes of V rows each). Also on the ragged
// last tile: its keys past the sequence end have P = 0 and zero-filled V rows, and skipping
// steps would branch around wgmma. P's fragments are packed before the caller's wgmma.fence.
__device__ __forceinline__ void issue_values(float (&o)[32], const uint32_t (&p)[4][4], uint64_t v_desc) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_rs_n64_tb(o, p[kk], v_desc + kk * (2048 >> 4));
}
#endif  // STUDY_WGMMA

__global__ void __launch_bounds__(kThreads, 2)
kernel(const __half* __restrict__ qkv, __half* __restrict__ out, int tokens, int heads, float scale_log2) {
#ifdef STUDY_WGMMA
  extern __shared__ unsigned char smem_raw[];
  // Descriptors address the swizzle by absolute address bits: tiles must start 1024-aligned.
  __half* smem = reinterpret_cast<__half*>(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
  __half* q_s = smem;                          // [kGroups][64][64], later the output staging
  __half* k_s = smem + kGroups * kKeys * kD;   // [kStages][64][64]
  __half* v_s = k_s + kStages * kKeys * kD;    // [kStages][64][64]

  // Warp-uniform by construction (a shuffle from lane 0): ptxas serializes every wgmma of a
  // kernel that issues one under a branch it cannot prove uniform.
  const int group = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const HeadView head(qkv, out, tokens, heads);
  const int stride = head.stride;
  const __half *q_g = head.q, *k_g = head.k, *v_g = head.v;
  const int row0 = blockIdx.x * kRows;
  const int tiles = (tokens + kKeys - 1) / kKeys;
  auto load_kv = [&](int j) {
    load_tile<kKeys, kThreads>(k_s + j % kStages * kKeys * kD, k_g, stride, j * kKeys, tokens);
    load_tile<kKeys, kThreads>(v_s + j % kStages * kKeys * kD, v_g, stride, j * kKeys, tokens);
    cp_async_commit();
  };
  auto valid_keys = [&](int j) { return min(kKeys, tokens - j * kKeys); };

  load_tile<kRows, kThreads>(q_s, q_g, stride, row0, tokens);
  load_kv(0);  // one group with Q
  if (tiles > 1) {
    load_kv(1);
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  fence_proxy_async();
  __syncthreads();

  // A warpgroup past the sequence end computes nothing but still loads and meets the barriers.
  const int group_row0 = row0 + group * kGroupRows;
  const bool active = group_row0 < tokens;
  const uint64_t q_desc = tile_desc(smem_addr(q_s + group * kGroupRows * kD));
  const uint64_t k_desc = tile_desc(smem_addr(k_s)), v_desc = tile_desc(smem_addr(v_s));
  constexpr uint64_t kStageStep = kTileBytes >> 4;

  float s[1][8][4];
  Rows<1> st;
  st.init();
  float(&s_flat)[32] = reinterpret_cast<float(&)[32]>(s);
  float(&o_flat)[32] = reinterpret_cast<float(&)[32]>(st.o);

  if (active) {
    wgmma_fence();
    issue_scores(s_flat, q_desc, k_desc);
    wgmma_commit();
    wgmma_wait_all();
    reg_fence(s_flat);
  }
  // One tile: softmax of S(j) (already complete), then P V of tile j and, unless it is the
  // last tile, S of tile j+1, issued together and waited on once. The last tile is a separate
  // instantiation so that no wgmma sits under a branch or leaves accumulators that only some
  // paths define (either makes ptxas serialize all of them).
  auto step = [&](int j, auto has_next) {
    const int valid = valid_keys(j);
    if (active) {
      if (valid < kKeys)
        online_softmax<1, true>(s, st, valid, scale_log2, lane);
      else
        online_softmax<1, false>(s, st, valid, scale_log2, lane);
    }
    if constexpr (decltype(has_next)::value) {
      cp_async_wait<0>();  // tile j+1 (this thread's part)
      fence_proxy_async();
      __syncthreads();  // all of tile j+1 landed; every warpgroup is done with tile j-1
      if (j + 2 < tiles) load_kv(j + 2);  // into tile j-1's stage
    }
    if (!active) return;
    uint32_t p[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) p_fragment(p[kk], s[0], kk);
    reg_fence(o_flat);
    wgmma_fence();  // P and the rescaled O were written (and S read) by ordinary instructions
    issue_values(o_flat, p, v_desc + j % kStages * kStageStep);
    wgmma_commit();
    if constexpr (decltype(has_next)::value) {
      issue_scores(s_flat, q_desc, k_desc + (j + 1) % kStages * kStageStep);
      wgmma_commit();
    }
    wgmma_wait_all();
    reg_fence(s_flat);
    reg_fence(o_flat);
  };
  for (int j = 0; j + 1 < tiles; ++j) step(j, std::true_type{});
  step(tiles - 1, std::false_type{});
  if (!active) return;

  // Every wgmma of this warpgroup is complete; its Q rows become the output staging once all
  // 4 warps are past their last wait.
  if (group == 0)  // named barrier per warpgroup (0 is __syncthreads')
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  const int warp_row0 = group * kGroupRows + 16 * warp;
  store_rows(st, q_s + warp_row0 * kD, head.out, head.width, row0 + warp_row0, tokens, lane);
#else
  __trap();  // built without sm_90a: launch() refuses before getting here
#endif
}

std::string unavailable() { return sm90::wgmma_unavailable(); }

std::string supports(const Problem& p) {
  if (auto r = check_tiled(p); !r.empty()) return r;
  return unavailable();
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  require_aligned(a, 16, "v7_flash");
  if (const auto why = supports(p); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, "v7_flash: " + why);
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const dim3 grid = head_grid(p.tokens, p.heads, p.batch, kRows);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(a.qkv, a.out, p.tokens, p.heads, scale_log2());
  LAUNCH_CHECK();
}

}  // namespace

extern const Version v7_flash{"v7_flash", supports, launch, unavailable};

}  // namespace attention
