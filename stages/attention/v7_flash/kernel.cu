// v7_flash: flash-attention-style forward on mma.sync tensor cores.
//
// A block owns kWarps * 16 query rows of one (batch, head); each warp owns 16 of them (one
// m16 MMA tile). The block streams the head's keys and values through shared memory in tiles
// of 64, double-buffered with cp.async so the next tile loads while this one is computed.
// Per tile and warp: S = Q K^T with m16n8k16 MMAs (fp16 in, fp32 accumulators), an online
// softmax on the accumulators in registers (running row max and sum, O rescaled when the max
// grows), P converted in registers into the A operand of O += P V (the accumulator layout of
// m16n8 matches the A fragment layout of m16n8k16), and nothing of size tokens^2 anywhere.
// Fragments come from shared memory through ldmatrix (.trans for V); the 128-byte rows are
// XOR-swizzled in 16-byte chunks so the 8 rows an ldmatrix phase reads hit 8 bank groups.
#include <cmath>
#include <cstdint>
#include "attention.hpp"
#include "check.hpp"

namespace attention {
namespace {

constexpr int kD = 64;      // head_dim: one 128-byte smem row, 4 MMA k-steps
constexpr int kKeys = 64;   // keys per K/V tile
constexpr int kChunks = kD / 8;  // 16-byte chunks per row

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
template <int kThreads>
__device__ __forceinline__ void load_tile(__half* dst, const __half* src, int stride, int row0, int rows,
                                          int tokens) {
  for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks, t = row0 + r;
    const bool valid = t < tokens;
    cp_async16(smem_addr(dst + swizzle(r, c)), src + (valid ? t : 0) * stride + c * 8, valid);
  }
}

// One 64-key tile for one warp. kRagged: the sequence ends inside this tile after `valid`
// keys; whole 16-key groups past it are skipped and the rest masked to -inf.
template <bool kRagged>
__device__ __forceinline__ void tile(const uint32_t (&qf)[4][4], const __half* k_s, const __half* v_s,
                                     float (&o)[8][4], float (&m)[2], float (&l)[2], int valid,
                                     float scale_log2, int lane) {
  float s[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;

  // S = Q K^T. ldmatrix.x4 on K rows: matrices (keys +0..7, chunk 2ks), (+0..7, 2ks+1),
  // (+8..15, 2ks), (+8..15, 2ks+1) are the B fragments of two 8-key n-tiles.
#pragma unroll
  for (int np = 0; np < 4; ++np) {
    if (kRagged && np * 16 >= valid) break;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t b[4];
      const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, smem_addr(k_s + swizzle(key, 2 * ks + ((lane >> 3) & 1))));
      mma(s[2 * np], qf[ks], b[0], b[1]);
      mma(s[2 * np + 1], qf[ks], b[2], b[3]);
    }
  }

  // Thread holds rows g = lane/4 (s[n][0..1]) and g + 8 (s[n][2..3]), keys n*8 + 2*(lane%4) + {0,1}.
  if (kRagged) {
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (n * 8 + 2 * (lane & 3) + (i & 1) >= valid) s[n][i] = -INFINITY;
  }

  // Online softmax per row; the 4 lanes of a row combine their maxima by shuffles. The row
  // sums stay per-lane partial sums until the end.
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * hr], s[n][2 * hr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[hr], mx);  // finite: every tile holds a valid key
    const float corr = exp2_approx((m[hr] - m_new) * scale_log2);
    const float shift = m_new * scale_log2;
    m[hr] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      s[n][2 * hr] = exp2_approx(fmaf(s[n][2 * hr], scale_log2, -shift));
      s[n][2 * hr + 1] = exp2_approx(fmaf(s[n][2 * hr + 1], scale_log2, -shift));
      sum += s[n][2 * hr] + s[n][2 * hr + 1];
    }
    l[hr] = l[hr] * corr + sum;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      o[n][2 * hr] *= corr;
      o[n][2 * hr + 1] *= corr;
    }
  }

  // O += P V over 16-key steps. P's A fragment for keys 16kk..: n-tiles 2kk and 2kk+1 of S.
  // ldmatrix.x4.trans on V rows: matrices (keys +0..7, chunk 2dp), (+8..15, 2dp),
  // (+0..7, 2dp+1), (+8..15, 2dp+1) are the B fragments of two 8-wide d n-tiles.
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if (kRagged && kk * 16 >= valid) break;
    const uint32_t a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                           pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < 4; ++dp) {
      uint32_t b[4];
      const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      ldmatrix_x4_trans(b, smem_addr(v_s + swizzle(key, 2 * dp + (lane >> 4))));
      mma(o[2 * dp], a, b[0], b[1]);
      mma(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 8 / kWarps * 2)
kernel(const __half* __restrict__ qkv, __half* __restrict__ out, int tokens, int heads, float scale_log2) {
  constexpr int kThreads = kWarps * 32, kRows = kWarps * 16;
  __shared__ __align__(128) __half q_s[kRows * kD];  // later the warp's output staging
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

  load_tile<kThreads>(q_s, q_g, stride, row0, kRows, tokens);
  load_tile<kThreads>(k_s[0], k_g, stride, 0, kKeys, tokens);
  load_tile<kThreads>(v_s[0], v_g, stride, 0, kKeys, tokens);
  cp_async_commit();

  // A warp past the sequence end computes nothing but still loads and meets the barriers.
  const int wrow = warp * 16;
  const bool active = row0 + wrow < tokens;
  uint32_t qf[4][4];
  float o[8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int j = 0; j < tiles; ++j) {
    cp_async_wait_all();
    __syncthreads();  // tile j has landed for every thread; tile j-1's buffer is free
    if (j + 1 < tiles) {
      load_tile<kThreads>(k_s[(j + 1) & 1], k_g, stride, (j + 1) * kKeys, kKeys, tokens);
      load_tile<kThreads>(v_s[(j + 1) & 1], v_g, stride, (j + 1) * kKeys, kKeys, tokens);
      cp_async_commit();
    }
    if (!active) continue;
    if (j == 0) {
      // Q fragments for the 4 k-steps over d, kept in registers for the whole sweep:
      // matrices (rows +0..7, chunk 2ks), (+8..15, 2ks), (+0..7, 2ks+1), (+8..15, 2ks+1).
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        ldmatrix_x4(qf[ks], smem_addr(q_s + swizzle(wrow + (lane & 15), 2 * ks + (lane >> 4))));
    }
    const int valid = tokens - j * kKeys;
    if (valid >= kKeys)
      tile<false>(qf, k_s[j & 1], v_s[j & 1], o, m, l, kKeys, scale_log2, lane);
    else
      tile<true>(qf, k_s[j & 1], v_s[j & 1], o, m, l, valid, scale_log2, lane);
  }
  if (!active) return;

  // Normalize, stage the warp's 16 x 64 outputs in its own (now unused) Q rows, and write
  // them as whole 128-byte rows.
  __half* stage = q_s + wrow * kD;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float sum = l[hr];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int r = (lane >> 2) + 8 * hr;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<uint32_t*>(stage + swizzle(r, n) + 2 * (lane & 3)) =
          pack_half2(o[n][2 * hr] * inv, o[n][2 * hr + 1] * inv);
  }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * kChunks; i += 32) {
    const int r = i / kChunks, c = i % kChunks, t = row0 + wrow + r;
    if (t < tokens)
      *reinterpret_cast<uint4*>(out + (b * tokens + t) * width + h * kD + c * 8) =
          *reinterpret_cast<const uint4*>(stage + swizzle(r, c));
  }
}

template <int kWarps>
void run(const Problem& p, const Args& a, cudaStream_t stream) {
  const int rows = kWarps * 16;
  const dim3 grid((p.tokens + rows - 1) / rows, p.heads, p.batch);
  const float scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(kD));
  kernel<kWarps><<<grid, kWarps * 32, 0, stream>>>(a.qkv, a.out, p.tokens, p.heads, scale_log2);
  LAUNCH_CHECK();
}

// Short sequences take 64-row blocks: twice the blocks to spread over the SMs, and at 197
// tokens the last block wastes 59 rows instead of 59 + 64. Longer ones take 128-row blocks,
// which halve how often each K/V tile is read from L2.
constexpr int kLongFrom = 256;

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  require_aligned(a, 16, "v7_flash");
  if (p.tokens < kLongFrom)
    run<4>(p, a, stream);
  else
    run<8>(p, a, stream);
}

}  // namespace

extern const Version v7_flash{"v7_flash", check_tiled, launch};

}  // namespace attention
