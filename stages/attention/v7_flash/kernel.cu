// v7_flash: flash-attention-style forward on mma.sync tensor cores.
//
// A block owns 128 query rows of one (batch, head): 4 warps of 32 rows, two m16 MMA tiles per
// warp, so every K/V fragment loaded from shared memory feeds two MMAs. The block streams the
// head's keys and values through shared memory in tiles of 64, double-buffered with cp.async
// (tile j+1 loads while tile j is computed). Per tile and warp: S = Q K^T with m16n8k16 MMAs
// (fp16 in, fp32 accumulators), an online softmax on the accumulators in registers (running
// row max and sum), P converted in registers into the A operand of O += P V (the accumulator
// layout of m16n8 matches the A fragment layout of m16n8k16), and nothing of size tokens^2
// anywhere. Fragments come from shared memory through ldmatrix (.trans for V); the 128-byte
// rows are XOR-swizzled in 16-byte chunks so the 8 rows an ldmatrix phase reads hit 8 bank
// groups. 4 warps x 2 m-tiles and lazy rescaling were the fastest of the variants measured
// (NOTES.md).
#include <cmath>
#include <cstdint>
#include "attention.hpp"
#include "check.hpp"

namespace attention {
namespace {

constexpr int kD = 64;      // head_dim: one 128-byte smem row, 4 MMA k-steps
constexpr int kKeys = 64;   // keys per K/V tile
constexpr int kChunks = kD / 8;  // 16-byte chunks per row
constexpr int kWarps = 4;        // per block
constexpr int kMTiles = 2;       // m16 MMA tiles (16 query rows each) per warp
constexpr int kThreads = kWarps * 32, kWarpRows = 16 * kMTiles, kRows = kWarps * kWarpRows;

// Offset in halves of chunk c of row r in a swizzled [rows][64] tile.
__device__ __forceinline__ int swizzle(int r, int c) { return r * kD + ((c ^ (r & 7)) << 3); }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without passing through registers; src_bytes 0 writes zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

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

__device__ __forceinline__ float exp2_approx(float x) {  // MUFU.EX2; exp2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Rows row0..row0+rows-1 of one q/k/v block of the head into a swizzled tile; rows past the
// sequence end are zero-filled (zero keys score 0, so they are masked; zero values keep
// 0 * garbage out of O).
template <int kTileRows>
__device__ __forceinline__ void load_tile(__half* dst, const __half* src, int stride, int row0, int tokens) {
  static_assert(kTileRows * kChunks % kThreads == 0, "every thread moves the same number of chunks");
#pragma unroll
  for (int k = 0; k < kTileRows * kChunks / kThreads; ++k) {
    const int i = threadIdx.x + k * kThreads;
    const int r = i / kChunks, c = i % kChunks, t = row0 + r;
    const bool valid = t < tokens;
    cp_async16(smem_addr(dst + swizzle(r, c)), src + (valid ? t : 0) * stride + c * 8, valid);
  }
}

// A warp's running softmax state: per m-tile, rows g and g + 8 (g = lane / 4).
struct Rows {
  float o[kMTiles][8][4];  // O accumulators: 8 n-tiles of 8 dims
  float m[kMTiles][2];     // reference max of the row (raw score units)
  float l[kMTiles][2];     // this lane's partial sum of exp2((s - m) * scale_log2)
};

// One 64-key tile for one warp of kMTiles x 16 query rows. kRagged: the sequence ends inside
// this tile after `valid` keys; whole 16-key groups past it are skipped and the rest masked
// to -inf. Lazy rescaling: O is rescaled only when a row max grows by more than kLazyLog2 (log2
// units) over the row's reference max: until then P <= 2^kLazyLog2, exact enough in fp16 and
// far from overflow, and O and l share the stale reference, so the final O / l is unchanged.
constexpr float kLazyLog2 = 8.f;

template <bool kRagged>
__device__ __forceinline__ void tile(const uint32_t (&qf)[kMTiles][4][4], const __half* k_s,
                                     const __half* v_s, Rows& st, int valid, float scale_log2,
                                     int lane) {
  float s[kMTiles][8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;

  // S = Q K^T. ldmatrix.x4 on K rows: matrices (keys +0..7, chunk 2ks), (+0..7, 2ks+1),
  // (+8..15, 2ks), (+8..15, 2ks+1) are the B fragments of two 8-key n-tiles, shared by the
  // warp's m-tiles.
#pragma unroll
  for (int np = 0; np < 4; ++np) {
    if (kRagged && np * 16 >= valid) break;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t b[4];
      const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, smem_addr(k_s + swizzle(key, 2 * ks + ((lane >> 3) & 1))));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma(s[mt][2 * np], qf[mt][ks], b[0], b[1]);
        mma(s[mt][2 * np + 1], qf[mt][ks], b[2], b[3]);
      }
    }
  }

  // Thread holds rows g (s[.][n][0..1]) and g + 8 (s[.][n][2..3]), keys n*8 + 2*(lane%4) + {0,1}.
  if (kRagged) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (n * 8 + 2 * (lane & 3) + (i & 1) >= valid) s[mt][n][i] = -INFINITY;
  }

  // Row maxima of the tile; the 4 lanes of a row combine theirs by shuffles.
  float mx[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float v = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; ++n) v = fmaxf(v, fmaxf(s[mt][n][2 * hr], s[mt][n][2 * hr + 1]));
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
      mx[mt][hr] = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));  // finite: the tile has a valid key
    }

  // New reference maxima; O and the partial sums rescaled by exp2((m_old - m_new) * scale).
  bool grow = false;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) grow |= (mx[mt][hr] - st.m[mt][hr]) * scale_log2 > kLazyLog2;
  if (__any_sync(0xffffffffu, grow)) {  // -inf reference on the first tile: always
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float m_new = fmaxf(st.m[mt][hr], mx[mt][hr]);
        const float corr = exp2_approx((st.m[mt][hr] - m_new) * scale_log2);
        st.m[mt][hr] = m_new;
        st.l[mt][hr] *= corr;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          st.o[mt][n][2 * hr] *= corr;
          st.o[mt][n][2 * hr + 1] *= corr;
        }
      }
  }

  // P = exp2(s * scale - m * scale): one FFMA and one MUFU.EX2 per score.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const float shift = st.m[mt][hr] * scale_log2;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        s[mt][n][2 * hr] = exp2_approx(fmaf(s[mt][n][2 * hr], scale_log2, -shift));
        s[mt][n][2 * hr + 1] = exp2_approx(fmaf(s[mt][n][2 * hr + 1], scale_log2, -shift));
        sum += s[mt][n][2 * hr] + s[mt][n][2 * hr + 1];
      }
      st.l[mt][hr] += sum;
    }

  // O += P V over 16-key steps. P's A fragment for keys 16kk..: n-tiles 2kk and 2kk+1 of S.
  // ldmatrix.x4.trans on V rows: matrices (keys +0..7, chunk 2dp), (+8..15, 2dp),
  // (+0..7, 2dp+1), (+8..15, 2dp+1) are the B fragments of two 8-wide d n-tiles.
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if (kRagged && kk * 16 >= valid) break;
    uint32_t a[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      a[mt][0] = pack_half2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack_half2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack_half2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack_half2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < 4; ++dp) {
      uint32_t b[4];
      const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      ldmatrix_x4_trans(b, smem_addr(v_s + swizzle(key, 2 * dp + (lane >> 4))));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma(st.o[mt][2 * dp], a[mt], b[0], b[1]);
        mma(st.o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Two blocks per SM: ~250 registers per thread hold O, S and Q of two m-tiles.
__global__ void __launch_bounds__(kThreads, 2)
kernel(const __half* __restrict__ qkv, __half* __restrict__ out, int tokens, int heads, float scale_log2) {
  __shared__ __align__(128) __half q_s[kRows * kD];  // later the warps' output staging
  __shared__ __align__(128) __half k_s[2][kKeys * kD];
  __shared__ __align__(128) __half v_s[2][kKeys * kD];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int width = heads * kD, stride = 3 * width;
  const __half* q_g = qkv + b * tokens * stride + h * kD;
  const __half* k_g = q_g + width;
  const __half* v_g = k_g + width;
  const int row0 = blockIdx.x * kRows;
  const int tiles = (tokens + kKeys - 1) / kKeys;

  load_tile<kRows>(q_s, q_g, stride, row0, tokens);
  load_tile<kKeys>(k_s[0], k_g, stride, 0, tokens);
  load_tile<kKeys>(v_s[0], v_g, stride, 0, tokens);
  cp_async_commit();

  // A warp past the sequence end computes nothing but still loads and meets the barriers.
  const int wrow = warp * kWarpRows;
  const bool active = row0 + wrow < tokens;
  uint32_t qf[kMTiles][4][4];
  Rows st;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < 8; ++n) st.o[mt][n][0] = st.o[mt][n][1] = st.o[mt][n][2] = st.o[mt][n][3] = 0.f;
    st.m[mt][0] = st.m[mt][1] = -INFINITY;
    st.l[mt][0] = st.l[mt][1] = 0.f;
  }

  for (int j = 0; j < tiles; ++j) {
    cp_async_wait_all();
    __syncthreads();  // tile j has landed for every thread; tile j-1's buffer is free
    if (j + 1 < tiles) {
      load_tile<kKeys>(k_s[(j + 1) & 1], k_g, stride, (j + 1) * kKeys, tokens);
      load_tile<kKeys>(v_s[(j + 1) & 1], v_g, stride, (j + 1) * kKeys, tokens);
      cp_async_commit();
    }
    if (!active) continue;
    if (j == 0) {
      // Q fragments for the 4 k-steps over d, kept in registers for the whole sweep:
      // matrices (rows +0..7, chunk 2ks), (+8..15, 2ks), (+0..7, 2ks+1), (+8..15, 2ks+1).
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          ldmatrix_x4(qf[mt][ks], smem_addr(q_s + swizzle(wrow + 16 * mt + (lane & 15), 2 * ks + (lane >> 4))));
    }
    const int valid = tokens - j * kKeys;
    if (valid >= kKeys)
      tile<false>(qf, k_s[j & 1], v_s[j & 1], st, kKeys, scale_log2, lane);
    else
      tile<true>(qf, k_s[j & 1], v_s[j & 1], st, valid, scale_log2, lane);
  }
  if (!active) return;

  // Normalize, stage the warp's outputs in its own (now unused) Q rows, and write them as
  // whole 128-byte rows.
  __half* stage = q_s + wrow * kD;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float sum = st.l[mt][hr];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const int r = 16 * mt + (lane >> 2) + 8 * hr;
#pragma unroll
      for (int n = 0; n < 8; ++n)
        *reinterpret_cast<uint32_t*>(stage + swizzle(r, n) + 2 * (lane & 3)) =
            pack_half2(st.o[mt][n][2 * hr] * inv, st.o[mt][n][2 * hr + 1] * inv);
    }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < kWarpRows * kChunks; i += 32) {
    const int r = i / kChunks, c = i % kChunks, t = row0 + wrow + r;
    if (t < tokens)
      *reinterpret_cast<uint4*>(out + (b * tokens + t) * width + h * kD + c * 8) =
          *reinterpret_cast<const uint4*>(stage + swizzle(r, c));
  }
}

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  require_aligned(a, 16, "v7_flash");
  static const bool configured = [] {  // as much shared memory per SM as there can be blocks
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const dim3 grid((p.tokens + kRows - 1) / kRows, p.heads, p.batch);
  const float scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(kD));
  kernel<<<grid, kThreads, 0, stream>>>(a.qkv, a.out, p.tokens, p.heads, scale_log2);
  LAUNCH_CHECK();
}

}  // namespace

extern const Version v7_flash{"v7_flash", check_tiled, launch};

}  // namespace attention
