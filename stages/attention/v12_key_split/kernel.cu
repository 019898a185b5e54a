// v12_key_split: v9_softmax_overlap with the keys split between the blocks of a thread-block
// cluster when the grid would leave most SMs idle (batch 1: 12 heads x 2 query tiles = 24 blocks
// for 132 SMs). Each block of a cluster runs v9's pipeline for the same 128 query rows over its
// own slice of the key tiles and leaves its unnormalized O, row maxima and sums in shared memory
// (flash_wgmma.cuh, Partial); after a cluster barrier each block combines a share of the rows
// from every slice, read through distributed shared memory, and writes them: no workspace in
// global memory and no second kernel. Where the grid already fills the GPU it is v9's kernel.
#include <algorithm>
#include <cooperative_groups.h>
#include "attention/flash_wgmma.cuh"
#include "harness/gpu.hpp"

namespace attention {
namespace {

namespace cg = cooperative_groups;
using namespace flash_wgmma;

constexpr auto kVariant = Variant::key_split;
constexpr int kMaxSplits = 8;  // the portable cluster size
constexpr int kSplitSmemBytes = kSmemBytes + Partial::kBytes;
constexpr int kColumnChunks = kD / 8;  // 8 output columns per combining thread

// Key tiles [first, last) of `tiles` for slice `split` of `splits`: as equal as they divide, the
// ragged last tile in the last slice.
struct Slice {
  int first, last;
};
__device__ __forceinline__ Slice slice_of(int split, int splits, int tiles) {
  return {split * tiles / splits, (split + 1) * tiles / splits};
}

#ifdef STUDY_WGMMA
// Rows row0.. of every slice's Partial combined: O = sum_s 2^((m_s - M) c) O_s over
// L = sum_s 2^((m_s - M) c) l_s, M the largest m_s and c the log2 softmax scale; this block takes
// rows rank * share.. of the 128.
template <class OutT>
__device__ __forceinline__ void combine(const cg::cluster_group& cluster, float* local, int splits, OutT* out,
                                        int width, int row0, int tokens, float scale_log2, float out_scale) {
  const int share = (kRows + splits - 1) / splits;
  const int first = static_cast<int>(cluster.block_rank()) * share;
  for (int i = threadIdx.x; i < share * kColumnChunks; i += kThreads) {
    const int r = first + i / kColumnChunks, c = i % kColumnChunks * 8;
    if (r >= kRows || row0 + r >= tokens) continue;
    float m_max = -INFINITY;
    for (int s = 0; s < splits; ++s) m_max = fmaxf(m_max, Partial(cluster.map_shared_rank(local, s)).m[r]);
    float o[8] = {}, l = 0.f;
    for (int s = 0; s < splits; ++s) {
      const Partial part(cluster.map_shared_rank(local, s));
      const float w = flash::exp2_approx((part.m[r] - m_max) * scale_log2);
      l += w * part.l[r];
      const float4* src = reinterpret_cast<const float4*>(part.o + r * Partial::kStride + c);
      const float4 a = src[0], b = src[1];
      const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int k = 0; k < 8; ++k) o[k] += w * v[k];
    }
    const float inv = out_scale / l;
    __align__(16) __half h[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) h[k] = __float2half_rn(o[k] * inv);
    OutT* dst = out + (row0 + r) * width + c;
    if constexpr (std::is_same_v<OutT, __nv_fp8_e4m3>) {
      // As store_rows: staged in fp16, then saturated to E4M3.
      const __half2_raw* h2 = reinterpret_cast<const __half2_raw*>(h);
      uint2 q;
      uint16_t* qh = reinterpret_cast<uint16_t*>(&q);
#pragma unroll
      for (int k = 0; k < 4; ++k) qh[k] = __nv_cvt_halfraw2_to_fp8x2(h2[k], __NV_SATFINITE, __NV_E4M3);
      *reinterpret_cast<uint2*>(dst) = q;
    } else {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(h);
    }
  }
}
#endif  // STUDY_WGMMA

// One cluster per (query tile, head, batch): its `splits` blocks (blockIdx.x = query tile *
// splits + rank) each attend over their slice, then combine. kOneTile: every slice is one tile.
// Every tile is computed 64 keys wide, the sequence's ragged last one masked (v7_flash's way): an
// exact-width last tile would be a second copy of the pipeline in the last slice's branch, and two
// make ptxas serialize the wgmmas for want of registers; the slices run side by side, so the
// narrower tile would not shorten the longest of them anyway.
template <bool kOneTile, class OutT>
__global__ void __launch_bounds__(kThreads, 2)
split_kernel(const __half* __restrict__ qkv, OutT* __restrict__ out, int tokens, int heads, float scale_log2,
             const float* __restrict__ out_inv_scale, int splits, float combine_scale_log2) {
#ifdef STUDY_WGMMA
  const cg::cluster_group cluster = cg::this_cluster();  // blockIdx.x % splits: this block's slice
  const int split = static_cast<int>(cluster.block_rank());
  const int row0 = static_cast<int>(blockIdx.x) / splits * kRows;
  const Slice sl = slice_of(split, splits, (tokens + kKeys - 1) / kKeys);
  const Span span{splits, sl.first * kKeys, min(tokens, sl.last * kKeys) - sl.first * kKeys};
  extern __shared__ unsigned char smem_raw[];
  // The tiles (1024-aligned inside the first kSmemBytes), then this block's Partial.
  float* partial = reinterpret_cast<float*>(smem_raw + kSmemBytes);
  attend<kKeys, kOneTile, kVariant, Fp16Tiles>(qkv, out, tokens, heads, scale_log2, nullptr, 1.f, span, partial);
  cluster.sync();  // every slice's Partial written
  const HeadView<OutT> head(qkv, out, tokens, heads);
  combine(cluster, partial, splits, head.out, head.width, row0, tokens, combine_scale_log2,
          out_scale<__half>(out_inv_scale, 1.f));
  cluster.sync();  // no block leaves while another still reads its Partial
#else
  __trap();
#endif
}

// v9's kernel under this version's symbols, for grids that fill the GPU by themselves.
template <int kTailKeys, bool kOneTile, class OutT>
__global__ void __launch_bounds__(kThreads, 2)
whole_kernel(const __half* __restrict__ qkv, OutT* __restrict__ out, int tokens, int heads, float scale_log2,
             const float* __restrict__ out_inv_scale) {
#ifdef STUDY_WGMMA
  attend<kTailKeys, kOneTile, Variant::softmax_overlap, Fp16Tiles>(qkv, out, tokens, heads, scale_log2,
                                                                   out_inv_scale, 1.f, whole_sequence(tokens));
#else
  __trap();
#endif
}

// How many slices: enough blocks for every SM where the grid of query tiles leaves them idle,
// at most kMaxSplits, and either one tile per slice or at least two (kOneTile is the kernel's).
int splits_for(const Problem& p, int tiles) {
  const long blocks = static_cast<long>((p.tokens + kRows - 1) / kRows) * p.heads * p.batch;
  const long want = std::min<long>(kMaxSplits, study::sm_count() / blocks);
  for (long s = std::min<long>(want, tiles); s > 1; --s)
    if (s == tiles || 2 * s <= tiles) return static_cast<int>(s);
  return 1;
}

// v9's launch: the last key tile at its own width (kTailKeys).
template <int kTailKeys, class OutT>
void launch_whole(const Problem& p, const __half* qkv, OutT* out, const float* out_inv_scale, float scale,
                  cudaStream_t stream) {
  const bool one_tile = p.tokens <= kKeys;
  auto k = one_tile ? whole_kernel<kTailKeys, true, OutT> : whole_kernel<kTailKeys, false, OutT>;
  static std::once_flag configured[2];
  std::call_once(configured[one_tile], [k] {
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  k<<<head_grid(p.tokens, p.heads, p.batch, kRows), kThreads, kSmemBytes, stream>>>(qkv, out, p.tokens, p.heads,
                                                                                    scale, out_inv_scale);
}

// The split kernel in clusters of `splits` blocks along x.
template <class OutT>
void launch_clusters(const Problem& p, const __half* qkv, OutT* out, const float* out_inv_scale, int splits,
                     float scale, cudaStream_t stream) {
  const bool one_tile = splits == (p.tokens + kKeys - 1) / kKeys;
  auto k = one_tile ? split_kernel<true, OutT> : split_kernel<false, OutT>;
  static std::once_flag configured[2];
  std::call_once(configured[one_tile], [k] {
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSplitSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  });
  const dim3 grid = head_grid(p.tokens, p.heads, p.batch, kRows);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid.x * splits, grid.y, grid.z);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSplitSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = splits;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  // The slices' weights 2^((m_s - M) c) use the scores' own scale c (0 when planted: unweighted).
  const float combine_scale = study::planted("key_split_unweighted") ? 0.f : scale;
  CUDA_CHECK(cudaLaunchKernelEx(&config, k, qkv, out, p.tokens, p.heads, scale, out_inv_scale, splits, combine_scale));
}

template <class OutT>
void launch_split(const Problem& p, const __half* qkv, OutT* out, const float* out_inv_scale, cudaStream_t stream) {
  constexpr const char* name = "v12_key_split";
  constexpr bool kE4M3 = std::is_same_v<OutT, __nv_fp8_e4m3>;
  require_aligned(qkv, out, kE4M3 ? 8 : 16, name);
  if (kE4M3 != (out_inv_scale != nullptr))
    throw std::invalid_argument(std::string(name) + ": an E4M3 output takes its scale, an fp16 one none");
  if (const auto why = supports(p); !why.empty())
    throw study::StudyError(study::ErrorKind::Usage, std::string(name) + ": " + why);
  const int tiles = (p.tokens + kKeys - 1) / kKeys;
  const int tail = p.tokens - (tiles - 1) * kKeys;  // 1..64 keys
  const int splits = splits_for(p, tiles);
  float scale = scale_log2() * (study::planted("softmax_scale_off") ? 1.01f : 1.f);
  if (study::planted("attention_mean")) scale = 0.f;
  if (splits > 1)
    launch_clusters(p, qkv, out, out_inv_scale, splits, scale, stream);
  else if (tail <= 16)
    launch_whole<16>(p, qkv, out, out_inv_scale, scale, stream);
  else if (tail <= 32)
    launch_whole<32>(p, qkv, out, out_inv_scale, scale, stream);
  else if (tail <= 48)
    launch_whole<48>(p, qkv, out, out_inv_scale, scale, stream);
  else
    launch_whole<kKeys>(p, qkv, out, out_inv_scale, scale, stream);
  LAUNCH_CHECK();
}

void launch_fp16(const Problem& p, const Args& a, cudaStream_t stream) {
  launch_split<__half>(p, a.qkv, a.out, nullptr, stream);
}

void launch_e4m3(const Problem& p, const __half* qkv, __nv_fp8_e4m3* out, const float* inv_scale,
                 cudaStream_t stream) {
  launch_split<__nv_fp8_e4m3>(p, qkv, out, inv_scale, stream);
}

}  // namespace

extern const Version v12_key_split{{"v12_key_split", supports, launch_fp16, unavailable}, launch_e4m3};

}  // namespace attention
