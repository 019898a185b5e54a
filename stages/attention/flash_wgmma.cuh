// The flash kernel on Hopper's asynchronous warpgroup MMA (wgmma, sm_90a) that v7_flash,
// v8_exact_tail, v9_softmax_overlap and, on E4M3 Q, K and V, v10_e4m3_qkv launch (Variant below
// says how they differ).
//
// A block owns 128 query rows of one (batch, head): 2 warpgroups (4 warps each) of 64 rows.
// Per 64-key tile and warpgroup, S = Q K^T is 4 wgmma m64n64k16 with both operands read by
// the tensor cores straight from shared memory through descriptors (no ldmatrix, no operand
// registers), the online softmax runs on the accumulators in registers exactly as in v7_flash_mma
// (wgmma's per-warp accumulator layout is mma.sync's m16n8 layout), and O += P V is 4 wgmma
// m64n64k16 with P from registers and V read transposed from shared memory. wgmma is
// asynchronous: P V of tile j and S of tile j+1 are issued back to back and waited on once,
// and the 4 warpgroups an SM holds interleave one's softmax with another's products. K and V
// go through 3 shared-memory stages filled by cp.async, two tiles ahead of the products (on
// E4M3 input through registers, widened to fp16 on the way: E4M3Tiles).
// Tiles are 128-byte rows, 1024-byte aligned, in the 128-byte swizzle wgmma's descriptors
// name (the same XOR layout v7_flash_mma uses for ldmatrix).
//
// The last key tile holds tokens - 64 * (tiles - 1) keys (5 of 64 at 197 tokens, 1 at 577 and
// 1025). kTailKeys is the width its products run at: 64 computes it like every other tile
// (v7_flash), 16/32/48 only the 16-key groups that hold a key (v8_exact_tail): S on a narrower
// m64nN wgmma, and P V over fewer 16-key steps. Each width is its own instantiation, picked on
// the host, so that no wgmma sits under a branch or leaves accumulators that only some paths
// define (either makes ptxas serialize every wgmma of the kernel).
#pragma once
#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include "attention/attention.hpp"
#include "attention/flash.cuh"
#include "device/sm90.cuh"
#include "harness/check.hpp"
#include "harness/test_hooks.hpp"

namespace attention::flash_wgmma {

using namespace flash;

constexpr int kGroups = 2;                 // warpgroups per block
constexpr int kGroupRows = 64;             // query rows per warpgroup: wgmma's M
constexpr int kThreads = kGroups * 128, kRows = kGroups * kGroupRows;
constexpr int kStages = 3;                 // K/V tiles in flight: j (P V), j+1 (S), j+2 (loading)
constexpr int kTileBytes = kKeys * kD * 2;  // one 64 x 64 fp16 tile: 8 KB
constexpr int kSmemBytes = (kGroups + 2 * kStages) * kTileBytes + 1024;  // +1024: alignment slack

#ifdef STUDY_WGMMA
// S = Q K^T for a tile of kN keys: 4 k-steps of 16 over head_dim (32 bytes along the swizzled
// rows), one m64nN wgmma each.
template <int kN>
__device__ __forceinline__ void issue_scores(float (&s)[kN / 2], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) sm90::wgmma_ss<kN>(s, q_desc + 2 * ks, k_desc + 2 * ks, ks > 0);
}

// O += P V for a tile of kN keys: kN / 16 k-steps of 16 keys (2048 bytes of V rows each). Keys
// of a ragged tile past the sequence end have P = 0 and zero-filled V rows. P's fragments are
// packed before the caller's wgmma.fence.
template <int kN>
__device__ __forceinline__ void issue_values(float (&o)[32], const uint32_t (&p)[kN / 16][4], uint64_t v_desc) {
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk) sm90::wgmma_rs_n64_tb(o, p[kk], v_desc + kk * (2048 >> 4));
}
#endif  // STUDY_WGMMA

// The versions built on this kernel, each a step on the one before.
enum class Variant {
  full_tail,        // v7_flash: every key tile computed 64 wide
  exact_tail,       // v8_exact_tail: the last key tile at its own width
  softmax_overlap,  // v9_softmax_overlap: as v8, and a tile's softmax runs under the previous P V
  e4m3_qkv,         // v10_e4m3_qkv: v9's products and pipeline, Q, K and V read in E4M3 (E4M3Tiles)
  key_split,        // v12_key_split: v9 over one slice of the keys, the slices combined in a cluster
};
constexpr bool exact_tail(Variant v) { return v != Variant::full_tail; }
constexpr bool softmax_overlap(Variant v) {
  return v == Variant::softmax_overlap || v == Variant::e4m3_qkv || v == Variant::key_split;
}

// The keys a block takes: in v7-v10 every key; in v12 one slice of them, its 128 query rows
// shared by `slices` consecutive blocks along x (a cluster).
struct Span {
  int slices;     // blocks per query tile: query rows from blockIdx.x / slices * 128
  int first_key;  // first key of the slice
  int keys;       // keys in the slice, 1 or more
};
inline __device__ Span whole_sequence(int tokens) { return {1, 0, tokens}; }

// What a key-split block leaves in shared memory for its cluster (v12): per query row its
// unnormalized O (fp32, rows padded to 68 floats: a 64-float stride would put the 8 rows a warp
// stores at once on the same banks), its reference max m (raw score units) and its sum l, both
// relative to m.
struct Partial {
  static constexpr int kStride = kD + 4;
  float* o;  // [kRows][kStride]
  float* m;  // [kRows]
  float* l;  // [kRows]
  static constexpr int kBytes = kRows * (kStride + 2) * 4;
  __device__ __forceinline__ explicit Partial(float* base) : o(base), m(base + kRows * kStride), l(m + kRows) {}
};

// How Q, K and V reach their fp16 swizzled tiles. The body below (attend) calls start() once,
// then for each key tile j after the first: land(j) before the barrier after which tile j's
// products may read it, and fetch(j + 1) after that barrier, into tile j - 2's stage (free by
// then). `tokens` is the number of keys k_g and v_g point at (the block's slice of them: all of
// the sequence but in v12), start's q_tokens the number of query rows. Fp16Tiles: cp.async
// straight from the fp16 QKV buffer (v7-v9, v12); E4M3Tiles below.
struct Fp16Tiles {
  __half *q_s, *k_s, *v_s;
  const __half *q_g, *k_g, *v_g;
  int stride, tokens;

  __device__ __forceinline__ void fetch(int j) {
    load_tile<kKeys, kThreads>(k_s + j % kStages * kKeys * kD, k_g, stride, j * kKeys, tokens);
    load_tile<kKeys, kThreads>(v_s + j % kStages * kKeys * kD, v_g, stride, j * kKeys, tokens);
    cp_async_commit();
  }
  // Q's rows row0.. (of q_tokens) and tile 0 landed; tile 1 on its way unless kOneTile.
  template <bool kOneTile>
  __device__ __forceinline__ void start(int row0, int q_tokens) {
    load_tile<kRows, kThreads>(q_s, q_g, stride, row0, q_tokens);
    fetch(0);  // one group with Q
    if constexpr (kOneTile) {
      cp_async_wait<0>();
    } else {
      fetch(1);
      cp_async_wait<1>();
    }
  }
  __device__ __forceinline__ void land(int) { cp_async_wait<0>(); }  // this thread's part of it
};

// E4M3 Q, K and V (the QKV GEMM's E4M3 output: 64-byte rows), widened to the fp16 tiles on the
// way in. A thread loads one 16-byte chunk (16 values) of every 64 rows into registers and stores
// it as two swizzled 16-byte fp16 chunks; the conversion is exact (every E4M3 value is an fp16
// value), so the tiles hold the E4M3 values themselves and the products are v9's. Tile j + 1 is
// loaded into registers (8 of them) right after the barrier that frees a stage and stored at the
// next one, so its latency hides under a whole tile's products and softmax.
// The prologue's source requests tile 1 after Q and tile 0 are widened; ptxas issues its loads
// before that anyway (v11_e4m3_next_first in stages/attention/TRIED.md, which wrote them first).
struct E4M3Tiles {
  __half *q_s, *k_s, *v_s;
  const __nv_fp8_e4m3 *q_g, *k_g, *v_g;
  int stride, tokens;
  uint4 k_next, v_next;

  static constexpr int kRowChunks = kD / 16;  // 16-byte E4M3 chunks per row
  static_assert(kKeys * kRowChunks == kThreads && kRows * kRowChunks == 2 * kThreads, "one chunk per thread");

  // Chunk i of rows row0..: zeros past the `rows` rows there are, as Fp16Tiles' zero fill.
  __device__ __forceinline__ uint4 load(const __nv_fp8_e4m3* src, int row0, int i, int rows) const {
    const int t = row0 + i / kRowChunks;
    if (t >= rows) return make_uint4(0, 0, 0, 0);
    return __ldg(reinterpret_cast<const uint4*>(src + t * stride + i % kRowChunks * 16));
  }
  static __device__ __forceinline__ void store(__half* tile, const uint4& chunk, int i) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    const uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
    uint32_t h[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[k]), __NV_E4M3);
      const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[k] >> 16), __NV_E4M3);
      h[2 * k] = lo.x | static_cast<uint32_t>(lo.y) << 16;
      h[2 * k + 1] = hi.x | static_cast<uint32_t>(hi.y) << 16;
    }
    *reinterpret_cast<uint4*>(tile + swizzle(r, 2 * c)) = make_uint4(h[0], h[1], h[2], h[3]);
    *reinterpret_cast<uint4*>(tile + swizzle(r, 2 * c + 1)) = make_uint4(h[4], h[5], h[6], h[7]);
  }

  __device__ __forceinline__ void fetch(int j) {
    k_next = load(k_g, j * kKeys, threadIdx.x, tokens);
    v_next = load(v_g, j * kKeys, threadIdx.x, tokens);
  }
  __device__ __forceinline__ void land(int j) {
    store(k_s + j % kStages * kKeys * kD, k_next, threadIdx.x);
    store(v_s + j % kStages * kKeys * kD, v_next, threadIdx.x);
  }
  template <bool kOneTile>
  __device__ __forceinline__ void start(int row0, int q_tokens) {
    const uint4 q0 = load(q_g, row0, threadIdx.x, q_tokens), q1 = load(q_g, row0, threadIdx.x + kThreads, q_tokens);
    fetch(0);
    store(q_s, q0, threadIdx.x);
    store(q_s, q1, threadIdx.x + kThreads);
    land(0);
    if constexpr (!kOneTile) fetch(1);
  }
};

// The factor the normalized output is multiplied by: the E4M3 output's inverse scale (or 1), times
// the input's V scale where the input is E4M3.
template <class InT>
__device__ __forceinline__ float out_scale(const float* out_inv_scale, float v_scale) {
  const float s = out_inv_scale ? *out_inv_scale : 1.f;
  if constexpr (std::is_same_v<InT, __half>)
    return s;
  else
    return s * v_scale;
}

// A warp's 16 rows of softmax state into `part` (rows warp_row0..): O as it stands, the row's
// reference max and its sum over the 4 lanes that share the row.
__device__ __forceinline__ void store_partial(const Rows<1>& st, const Partial& part, int warp_row0, int lane) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = warp_row0 + (lane >> 2) + 8 * hr;
    float sum = st.l[0][hr];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((lane & 3) == 0) {
      part.m[r] = st.m[0][hr];
      part.l[r] = sum;
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<float2*>(part.o + r * Partial::kStride + n * 8 + 2 * (lane & 3)) =
          make_float2(st.o[0][n][2 * hr], st.o[0][n][2 * hr + 1]);
  }
}

// The body of every kernel on this file's pipeline, for the tiles' source Tiles (constructed from
// the head's view, the shared-memory tiles and the sequence length). kOneTile: the sequence fits
// in one key tile (tokens <= 64), which is then the last one.
// OutT: fp16, or E4M3 scaled by *out_inv_scale (null for fp16) for an FP8 projection. InT: fp16,
// or E4M3 values whose V is scaled by v_scale (Q's and K's scales the caller folds into
// scale_log2): the output is multiplied by it.
// span: the rows and keys of this block (whole_sequence, or a slice of the keys, whose softmax
// state then goes to `partial` instead of out).
template <int kTailKeys, bool kOneTile, Variant kVariant, class Tiles, class InT, class OutT>
__device__ __forceinline__ void attend(const InT* __restrict__ qkv, OutT* __restrict__ out, int tokens, int heads,
                                       float scale_log2, const float* __restrict__ out_inv_scale, float v_scale,
                                       Span span, float* partial = nullptr) {
  static_assert(kTailKeys % 16 == 0 && kTailKeys >= 16 && kTailKeys <= kKeys, "16..64 keys by 16");
#ifdef STUDY_WGMMA
  using namespace sm90;
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
  const HeadView<OutT, InT> head(qkv, out, tokens, heads);
  const int key_offset = span.first_key * head.stride;
  Tiles io{q_s, k_s, v_s, head.q, head.k + key_offset, head.v + key_offset, head.stride, span.keys};
  const int row0 = blockIdx.x / span.slices * kRows;
  const int tiles = (span.keys + kKeys - 1) / kKeys;
  auto valid_keys = [&](int j) { return min(kKeys, span.keys - j * kKeys); };

  io.template start<kOneTile>(row0, tokens);
  fence_proxy_async();
  __syncthreads();

  // A warpgroup past the sequence end computes nothing but still loads and meets the barriers.
  const int group_row0 = row0 + group * kGroupRows;
  const bool active = group_row0 < tokens;
  const uint64_t q_desc = tile_desc(smem_addr(q_s + group * kGroupRows * kD));
  const uint64_t k_desc = tile_desc(smem_addr(k_s)), v_desc = tile_desc(smem_addr(v_s));
  constexpr uint64_t kStageStep = kTileBytes >> 4;

  float s[1][8][4];             // scores of a full tile
  float s_tail[1][kTailKeys / 8][4];  // scores of the last tile
  Rows<1> st;
  st.init();
  float(&s_flat)[32] = reinterpret_cast<float(&)[32]>(s);
  float(&tail_flat)[kTailKeys / 2] = reinterpret_cast<float(&)[kTailKeys / 2]>(s_tail);
  float(&o_flat)[32] = reinterpret_cast<float(&)[32]>(st.o);

  if (active) {
    wgmma_fence();
    if constexpr (kOneTile)
      issue_scores<kTailKeys>(tail_flat, q_desc, k_desc);
    else
      issue_scores<kKeys>(s_flat, q_desc, k_desc);
    wgmma_commit();
    wgmma_wait_all();
    if constexpr (kOneTile)
      reg_fence(tail_flat);
    else
      reg_fence(s_flat);
  }

  // One tile: softmax of its S `sc` (already complete), then its P V and, unless it is the last
  // tile, the next tile's S. kIsTail: this is the last tile (sc is s_tail, kTailKeys wide);
  // kNextIsTail: the next one is (its S goes to s_tail).
  // v7/v8: the softmax runs with nothing of this warpgroup in flight, then P V(j) and S(j+1) are
  // issued together and both waited on.
  // v9: S(j+1) is issued first and only it is waited on, so P V(j) is still running when the
  // softmax of tile j+1 starts; O's rescale (which P V writes) and P's registers (which P V
  // reads) wait for it, as does the barrier after which tile j's K/V stage is refilled.
  constexpr bool kOverlap = softmax_overlap(kVariant);
  auto step = [&](int j, auto& sc, auto is_tail, auto next_is_tail) {
    constexpr bool kIsTail = decltype(is_tail)::value, kNextIsTail = decltype(next_is_tail)::value;
    constexpr int kN = kIsTail ? kTailKeys : kKeys;
    const int valid = valid_keys(j);
    if (active) {
      float corr[1][2];
      const bool grew = valid < kN ? softmax_scores<1, true, kN / 8>(sc, st, corr, valid, scale_log2, lane)
                                   : softmax_scores<1, false, kN / 8>(sc, st, corr, valid, scale_log2, lane);
      if constexpr (kOverlap) {
        wgmma_wait_all();  // P V(j-1): done writing O and reading P and its V stage
        reg_fence(o_flat);
      }
      if (grew) rescale_o(st, corr);
    }
    if constexpr (!kIsTail) {
      io.land(j + 1);
      fence_proxy_async();
      __syncthreads();  // all of tile j+1 landed; every warpgroup is done with tile j-1
      if (j + 2 < tiles) io.fetch(j + 2);  // into tile j-1's stage
    }
    if (!active) return;
    uint32_t p[kN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) p_fragment(p[kk], sc[0], kk);
    reg_fence(o_flat);
    wgmma_fence();  // P and the rescaled O were written (and S read) by ordinary instructions
    auto issue_next_scores = [&] {
      if constexpr (kNextIsTail)
        issue_scores<kTailKeys>(tail_flat, q_desc, k_desc + (j + 1) % kStages * kStageStep);
      else
        issue_scores<kKeys>(s_flat, q_desc, k_desc + (j + 1) % kStages * kStageStep);
      wgmma_commit();
    };
    if constexpr (kOverlap && !kIsTail) issue_next_scores();
    issue_values<kN>(o_flat, p, v_desc + j % kStages * kStageStep);
    wgmma_commit();
    if constexpr (!kOverlap && !kIsTail) issue_next_scores();
    if constexpr (kOverlap && !kIsTail)
      wgmma_wait<1>();  // S(j+1) only: P V(j) runs on under the next softmax
    else
      wgmma_wait_all();
    if constexpr (kNextIsTail)
      reg_fence(tail_flat);
    else if constexpr (!kIsTail)
      reg_fence(s_flat);
    if constexpr (!kOverlap || kIsTail) reg_fence(o_flat);
  };
  if constexpr (!kOneTile) {
    for (int j = 0; j + 2 < tiles; ++j) step(j, s, std::false_type{}, std::false_type{});
    step(tiles - 2, s, std::false_type{}, std::true_type{});
  }
  step(tiles - 1, s_tail, std::true_type{}, std::false_type{});
  if (!active) return;

  // Every wgmma of this warpgroup is complete; its Q rows become the output staging once all
  // 4 warps are past their last wait.
  if (group == 0)  // named barrier per warpgroup (0 is __syncthreads')
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  const int warp_row0 = group * kGroupRows + 16 * warp;
  if constexpr (kVariant == Variant::key_split)
    store_partial(st, Partial(partial), warp_row0, lane);
  else
    store_rows(st, q_s + warp_row0 * kD, head.out, head.width, row0 + warp_row0, tokens, lane,
               out_scale<InT>(out_inv_scale, v_scale));
#endif
}

// v7-v9's kernel: fp16 Q, K and V. The variant is a template parameter also so that each
// version's kernels are their own symbols.
template <int kTailKeys, bool kOneTile, Variant kVariant, class OutT>
__global__ void __launch_bounds__(kThreads, 2)
kernel(const __half* __restrict__ qkv, OutT* __restrict__ out, int tokens, int heads, float scale_log2,
       const float* __restrict__ out_inv_scale) {
#ifdef STUDY_WGMMA
  attend<kTailKeys, kOneTile, kVariant, Fp16Tiles>(qkv, out, tokens, heads, scale_log2, out_inv_scale, 1.f,
                                                   whole_sequence(tokens));
#else
  __trap();  // built without sm_90a: launch() refuses before getting here
#endif
}

// v10's kernel: E4M3 Q, K and V, one dequantization scale for all three. Q's and K's scales are
// folded into scale_log2 by the host (S = scale^2 Q8 K8^T), V's is v_scale, applied with the
// output's normalization.
template <int kTailKeys, bool kOneTile, Variant kVariant, class OutT>
__global__ void __launch_bounds__(kThreads, 2)
kernel_e4m3_in(const __nv_fp8_e4m3* __restrict__ qkv, OutT* __restrict__ out, int tokens, int heads,
               float scale_log2, const float* __restrict__ out_inv_scale, float v_scale) {
#ifdef STUDY_WGMMA
  using Tiles = E4M3Tiles;
  attend<kTailKeys, kOneTile, kVariant, Tiles>(qkv, out, tokens, heads, scale_log2, out_inv_scale, v_scale,
                                               whole_sequence(tokens));
#else
  __trap();
#endif
}

// The instantiation for a last tile of kTailKeys keys' width, for an fp16 or E4M3 input.
template <int kTailKeys, Variant kVariant, class InT, class OutT>
auto pick(bool one_tile) {
  if constexpr (std::is_same_v<InT, __half>)
    return one_tile ? kernel<kTailKeys, true, kVariant, OutT> : kernel<kTailKeys, false, kVariant, OutT>;
  else
    return one_tile ? kernel_e4m3_in<kTailKeys, true, kVariant, OutT> : kernel_e4m3_in<kTailKeys, false, kVariant, OutT>;
}

inline std::string unavailable() { return sm90::wgmma_unavailable(); }

inline std::string supports(const Problem& p) {
  if (auto r = check_tiled(p); !r.empty()) return r;
  return unavailable();
}

// Launches the kernel for problem p as version `name`, refusing what supports() refuses: the
// input fp16 (in_scale 1), or E4M3 dequantized by in_scale; the output fp16 (out_inv_scale null)
// or E4M3. With an exact tail the last tile's products run at the width of its keys rounded up to
// 16; otherwise at 64 like every tile. Each version's file instantiates only its own kernels.
template <Variant kVariant, class InT, class OutT>
void launch(const Problem& p, const InT* qkv, float in_scale, OutT* out, const float* out_inv_scale,
            cudaStream_t stream, const char* name) {
  constexpr bool kE4M3In = std::is_same_v<InT, __nv_fp8_e4m3>, kE4M3 = std::is_same_v<OutT, __nv_fp8_e4m3>;
  require_aligned(qkv, out, kE4M3 && !kE4M3In ? 8 : 16, name);
  if (kE4M3 != (out_inv_scale != nullptr))
    throw std::invalid_argument(std::string(name) + ": an E4M3 output takes its scale, an fp16 one none");
  if (!(in_scale > 0.f && std::isfinite(in_scale)) || (!kE4M3In && in_scale != 1.f))
    throw std::invalid_argument(std::string(name) + ": an E4M3 input's scale is positive and finite, an fp16 one 1");
  if (const auto why = supports(p); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, std::string(name) + ": " + why);
  const int tiles = (p.tokens + kKeys - 1) / kKeys;
  const int tail = p.tokens - (tiles - 1) * kKeys;  // 1..64 keys
  const int width = exact_tail(kVariant) ? (tail + 15) / 16 * 16 : kKeys;
  const bool one_tile = tiles == 1;
  auto k = pick<kKeys, kVariant, InT, OutT>(one_tile);
  if constexpr (exact_tail(kVariant)) {
    if (width == 16) k = pick<16, kVariant, InT, OutT>(one_tile);
    if (width == 32) k = pick<32, kVariant, InT, OutT>(one_tile);
    if (width == 48) k = pick<48, kVariant, InT, OutT>(one_tile);
  }
  // Each instantiation is its own kernel: its attributes are set once, on first use.
  static std::once_flag configured[4][2];
  std::call_once(configured[width / 16 - 1][one_tile], [k] {
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  const dim3 grid = head_grid(p.tokens, p.heads, p.batch, kRows);
  float scale = scale_log2() * (study::planted("softmax_scale_off") ? 1.01f : 1.f);
  if (study::planted("attention_mean")) scale = 0.f;  // equal scores: every output the mean of the values
  if constexpr (kE4M3In) {
    // The scores of E4M3 Q and K, each in in_scale's units.
    if (!study::planted("e4m3_scores_unscaled")) scale *= in_scale * in_scale;
    k<<<grid, kThreads, kSmemBytes, stream>>>(qkv, out, p.tokens, p.heads, scale, out_inv_scale, in_scale);
  } else {
    k<<<grid, kThreads, kSmemBytes, stream>>>(qkv, out, p.tokens, p.heads, scale, out_inv_scale);
  }
  LAUNCH_CHECK();
}

// The family's launch (fp16 output).
template <Variant kVariant>
void launch(const Problem& p, const Args& a, cudaStream_t stream, const char* name) {
  launch<kVariant, __half, __half>(p, a.qkv, 1.f, a.out, nullptr, stream, name);
}

}  // namespace attention::flash_wgmma
