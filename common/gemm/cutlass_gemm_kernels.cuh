// The compiled CUTLASS kernels behind cutlass_gemm.hpp: one Hopper GEMM per (tile, cluster,
// schedule, epilogue), built by CUTLASS's collective builders, each reduced to a KernelEntry the
// layer can time and run without knowing its type (cutlass_gemm_entry.hpp). Included by the kernel
// files that meson generates from common/gemm/cutlass_gemm_instance.cu.in, a few kernel lists below
// each (the table `cutlass_units` in common/meson.build), which the build compiles in parallel.
#pragma once
#include <type_traits>
#include "gemm/cutlass_gemm_entry.hpp"

#ifdef STUDY_HAVE_CUTLASS
// The kernels wait on the previous grid (griddepcontrol.wait) before their first global read and
// let the next one launch early: a no-op unless launched with programmatic dependent launch.
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>
#include "device/gelu.cuh"

namespace study::cutlass_gemm::detail {

using cute::Int;
using cute::Shape;

struct Cooperative {  // two consumer warpgroups share each tile
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  static constexpr const char* name = "coop";
};
struct Pingpong {  // each consumer warpgroup owns a tile; their mainloops and epilogues alternate
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  static constexpr const char* name = "pingpong";
};

template <Activation kAct>
struct ActivationOf;
template <>
struct ActivationOf<Activation::None> {
  template <class T>
  using Fn = cutlass::epilogue::thread::Identity<T>;
};
template <>
struct ActivationOf<Activation::GeluTanh> {
  template <class T>
  using Fn = cutlass::epilogue::thread::GELU_taylor<T>;
};
template <>
struct ActivationOf<Activation::GeluErf> {
  template <class T>
  using Fn = cutlass::epilogue::thread::GELU<T>;
};
template <>
struct ActivationOf<Activation::GeluTanhF16> {  // the same functor; its epilogue computes in fp16
  template <class T>
  using Fn = cutlass::epilogue::thread::GELU_taylor<T>;
};

// The exact GELU at about the tanh form's cost (device/gelu.cuh), as a CUTLASS epilogue functor:
// on one fp32 value and on the fragments the epilogue visitor hands it.
template <class T>
struct GeluErfFit {
  static const bool kIsHeavy = true;
  CUTLASS_HOST_DEVICE T operator()(T const& x) const { return T(study::gelu_erf_fit(float(x))); }
};
template <class T, int N>
struct GeluErfFit<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = GeluErfFit<T>{}(x[i]);
    return y;
  }
};
template <>
struct ActivationOf<Activation::GeluErfFit> {
  template <class T>
  using Fn = GeluErfFit<T>;
};

// The epilogue's compute type: fp32, or fp16 for GeluTanhF16 (CUTLASS's GELU_taylor on fp16
// arrays runs tanh.approx.f16x2 and half2 FMAs, two outputs per instruction).
template <Activation kAct>
using ComputeOf = std::conditional_t<kAct == Activation::GeluTanhF16, cutlass::half_t, float>;

// The main loop of every kernel here: fp16 X (K-major) times fp16 W (K-major) into fp32
// accumulators, with as many shared-memory stages as the epilogue leaves room for.
template <class TileShape, class ClusterShape, class Schedule, class CollectiveEpilogue>
using MainloopOf = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::half_t, cutlass::layout::RowMajor, 8,
    cutlass::half_t, cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    typename Schedule::Mainloop>::CollectiveOp;

// What the layer needs of a compiled kernel, from its Gemm type and its arguments(): K derives
// from Entry<K> and provides GemmKernel, Gemm and arguments(const Launch&).
template <class K>
struct Entry {
  static bool implementable(const Launch& l) {
    const auto args = K::arguments(l);
    return K::Gemm::can_implement(args) == cutlass::Status::kSuccess && K::Gemm::get_workspace_size(args) == 0;
  }

  static cudaError_t prepare() {
    constexpr int smem = K::GemmKernel::SharedStorageSize;
    if (smem < (48 << 10)) return cudaSuccess;
    return cudaFuncSetAttribute(cutlass::device_kernel<typename K::GemmKernel>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  }

  // Parameters built on the host for each call: safe to capture.
  static cudaError_t run(const Launch& l, cudaStream_t stream, bool pdl) {
    const auto args = K::arguments(l);
    auto params = K::GemmKernel::to_underlying_arguments(args, nullptr);
    if (K::Gemm::run(params, stream, nullptr, pdl) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
    return cudaGetLastError();
  }

  static KernelEntry entry(const char* name) {
    return {name, implementable, prepare, run, /*scheduler_knobs=*/true};
  }

  // The arguments every kernel here shares: the problem, X [m, k] and W [n, k] (both K-major),
  // C (the residual, or none: c of type const void*) and Y [m, n], all packed row-major, and the
  // tile scheduler's knobs. The caller adds its epilogue's own arguments.
  template <class ElementC>
  static auto common_arguments(const Launch& l, const ElementC* c) {
    using GK = typename K::GemmKernel;
    using T = cutlass::half_t;
    const GemmShape& s = l.shape;
    typename K::Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {s.m, s.n, s.k, 1},
        {reinterpret_cast<const T*>(l.op.x),
         cutlass::make_cute_packed_stride(typename GK::StrideA{}, cute::make_shape(s.m, s.k, 1)),
         reinterpret_cast<const T*>(l.op.w),
         cutlass::make_cute_packed_stride(typename GK::StrideB{}, cute::make_shape(s.n, s.k, 1))},
        {{},
         c,
         cutlass::make_cute_packed_stride(typename GK::StrideC{}, cute::make_shape(s.m, s.n, 1)),
         reinterpret_cast<T*>(l.op.y),
         cutlass::make_cute_packed_stride(typename GK::StrideD{}, cute::make_shape(s.m, s.n, 1))}};
    args.hw_info.sm_count = l.sm_count;
    using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
    args.scheduler.raster_order = l.raster ? Raster::AlongN : Raster::AlongM;
    args.scheduler.max_swizzle_size = l.swizzle;
    return args;
  }
};

// Y = act(X W^T + bias) (+ residual as C with beta = 1): X row-major [m, k] (K-major A), W
// row-major [n, k] (K-major B), Y row-major [m, n]; 16-byte alignment (8 halves) everywhere.
// CUTLASS's default tile scheduler: persistent, one CTA per SM walking output tiles.
template <int kTileM, int kTileN, int kClusterM, int kClusterN, class Schedule, Activation kAct, bool kResidual>
struct Kernel : Entry<Kernel<kTileM, kTileN, kClusterM, kClusterN, Schedule, kAct, kResidual>> {
  using T = cutlass::half_t;
  using ElementC = std::conditional_t<kResidual, T, void>;  // void: no C operand is read
  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<64>>;
  using ClusterShape = Shape<Int<kClusterM>, Int<kClusterN>, Int<1>>;
  static constexpr int kAlign = 8;

  using Fusion = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<ActivationOf<kAct>::template Fn, T,
                                                                    ComputeOf<kAct>, T, ElementC, float>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, cutlass::layout::RowMajor, kAlign,
      T, cutlass::layout::RowMajor, kAlign, typename Schedule::Epilogue, Fusion>::CollectiveOp;
  using CollectiveMainloop = MainloopOf<TileShape, ClusterShape, Schedule, CollectiveEpilogue>;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments arguments(const Launch& l) {
    const ElementC* c = nullptr;
    if constexpr (kResidual) c = reinterpret_cast<const T*>(l.op.residual);
    typename Gemm::Arguments args = Entry<Kernel>::common_arguments(l, c);
    args.epilogue.thread.alpha = 1.f;
    args.epilogue.thread.beta = kResidual ? 1.f : 0.f;
    args.epilogue.thread.bias_ptr = reinterpret_cast<const T*>(l.op.bias);
    return args;
  }
};

// Y = act(rstd[m] (X W'^T - mu[m] colsum[n]) + bias'[n]): the next LayerNorm folded into the GEMM
// (cutlass_gemm.hpp, LnFold). X is the un-normalized residual stream; mu and rstd are its row
// statistics, colsum and bias' the folded weights' per-column vectors, all fp32.
template <class Tile, template <class> class Act>
using LnFoldedEpilogue = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<Act, cutlass::half_t, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90EVT<  // rstd * centered + bias'
        cutlass::epilogue::fusion::Sm90Compute<cutlass::homogeneous_multiply_add, float, float,
                                               cutlass::FloatRoundStyle::round_to_nearest>,
        cutlass::epilogue::fusion::Sm90ColBroadcast<0, Tile, float, float, cute::Stride<Int<1>, Int<0>, int64_t>, 1>,
        cutlass::epilogue::fusion::Sm90EVT<  // acc - mu * colsum
            cutlass::epilogue::fusion::Sm90Compute<cutlass::minus, float, float,
                                                   cutlass::FloatRoundStyle::round_to_nearest>,
            cutlass::epilogue::fusion::Sm90AccFetch,
            cutlass::epilogue::fusion::Sm90EVT<  // mu[m] * colsum[n]
                cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float,
                                                       cutlass::FloatRoundStyle::round_to_nearest>,
                cutlass::epilogue::fusion::Sm90ColBroadcast<0, Tile, float, float,
                                                            cute::Stride<Int<1>, Int<0>, int64_t>, 1>,
                cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tile, float, float,
                                                            cute::Stride<Int<0>, Int<1>, int64_t>, 4>>>,
        cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tile, float, float, cute::Stride<Int<0>, Int<1>, int64_t>, 4>>>;

template <int kTileM, int kTileN, int kClusterM, int kClusterN, class Schedule, Activation kAct>
struct LnKernel : Entry<LnKernel<kTileM, kTileN, kClusterM, kClusterN, Schedule, kAct>> {
  using T = cutlass::half_t;
  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<64>>;
  using ClusterShape = Shape<Int<kClusterM>, Int<kClusterN>, Int<1>>;
  static constexpr int kAlign = 8;

  using Callbacks = LnFoldedEpilogue<TileShape, ActivationOf<kAct>::template Fn>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, kAlign, T,
      cutlass::layout::RowMajor, kAlign, typename Schedule::Epilogue, Callbacks>::CollectiveOp;
  using CollectiveMainloop = MainloopOf<TileShape, ClusterShape, Schedule, CollectiveEpilogue>;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments arguments(const Launch& l) {
    typename Gemm::Arguments args = Entry<LnKernel>::common_arguments(l, static_cast<const void*>(nullptr));
    // The tree's arguments, children first, each node's own last (see LnFoldedEpilogue).
    args.epilogue.thread = {
        {                                        // rstd * centered + bias'
         {l.ln.row_rstd, 0.f, {}},               // rstd[m]
         {                                       // acc - mu * colsum
          {},                                    // acc
          {{l.ln.row_mean, 0.f, {}}, {l.ln.col_sum, 0.f, {}}, {}},  // mu[m] * colsum[n]
          {}},
         {l.ln.col_bias, 0.f, {}},               // bias'[n]
         {}},
        {}};                                     // the activation
    return args;
  }
};

// The tiles: name "<tile M>x<tile N>x64_c<cluster>_<schedule>". Wide tiles for the large-M GEMMs
// (batch 32 and 256), 2-CTA clusters to multicast the shared operand, ping-pong to overlap one
// tile's epilogue with the next tile's mainloop, a 64-row tile for the 197-row GEMMs of batch 1,
// and 64x192, whose tile counts at 6304 rows (99 row tiles) are whole waves on 132 SMs for every
// encoder width: 3 for 768 columns, 9 for 2304, 12 for 3072; 64x256 makes whole waves for fc1
// (99 x 12 = 1,188 tiles: 9) with a third more reuse per tile. The clustered ping-pong tiles read
// fewer operand bytes from L2 per FLOP: 192x96 and 192x128 in 1x2 clusters share each X tile
// between two column tiles (24 and 28 KB per k-block for 2.4 and 3.1 MFLOP, against 40 KB for
// 2.1 MFLOP at 64x256), and 192 rows make 33 row tiles at 6304 rows: whole waves for every
// encoder width with 96 columns (2, 6, 8 for 768, 2304, 3072) and for fc1 with 128 (6).
//
// Each epilogue compiles the tiles its search has chosen (every choice recorded in the committed
// results: ViT-B's GEMMs at 224 and 384 px, batch 1 to 256, on H100s and H200s): each kernel
// costs ~35 s of compiler time, and the layer searched eleven per epilogue until 4f1613b. Never chosen there, and no
// longer compiled: 128x256 (1x1 and 2x1 clusters) and 256x128 (1x2) cooperative tiles but for
// the erf GELU, 128x128 ping-pong in 2x1 clusters, and each list's other tiles. A tile joins a
// list again when a search needs it.
template <Activation kAct, bool kResidual>
using Pingpong128x128 = Kernel<128, 128, 1, 1, Pingpong, kAct, kResidual>;
template <Activation kAct, bool kResidual>
using Pingpong64x128 = Kernel<64, 128, 1, 1, Pingpong, kAct, kResidual>;

// The QKV and projection GEMMs' epilogue (bias).
inline std::vector<KernelEntry> bias_kernels() {
  constexpr auto a = Activation::None;
  return {
      Pingpong128x128<a, false>::entry("128x128x64_c1x1_pingpong"),
      Pingpong64x128<a, false>::entry("64x128x64_c1x1_pingpong"),
      Kernel<128, 128, 1, 1, Cooperative, a, false>::entry("128x128x64_c1x1_coop"),
      Kernel<192, 96, 1, 2, Pingpong, a, false>::entry("192x96x64_c1x2_pingpong"),
      Kernel<192, 128, 1, 2, Pingpong, a, false>::entry("192x128x64_c1x2_pingpong"),
  };
}

// The projection and fc2 GEMMs' epilogue (bias and the residual).
inline std::vector<KernelEntry> bias_residual_kernels() {
  constexpr auto a = Activation::None;
  return {
      Pingpong128x128<a, true>::entry("128x128x64_c1x1_pingpong"),
      Pingpong64x128<a, true>::entry("64x128x64_c1x1_pingpong"),
      Kernel<64, 192, 1, 1, Pingpong, a, true>::entry("64x192x64_c1x1_pingpong"),
      Kernel<192, 96, 1, 2, Pingpong, a, true>::entry("192x96x64_c1x2_pingpong"),
      Kernel<192, 128, 1, 2, Pingpong, a, true>::entry("192x128x64_c1x2_pingpong"),
  };
}

// fc1's epilogues (bias and GELU): tanh in fp32 or in fp16 pairs, erf, or the exact GELU by its
// fitted exp2 (GeluErfFit: the tanh form's tiles, as it costs about what the tanh form does).
template <Activation kAct>
std::vector<KernelEntry> fc1_kernels() {
  static_assert(kAct != Activation::None);
  if constexpr (kAct == Activation::GeluErf)
    return {
        Kernel<128, 256, 1, 1, Cooperative, kAct, false>::entry("128x256x64_c1x1_coop"),
        Kernel<128, 256, 2, 1, Cooperative, kAct, false>::entry("128x256x64_c2x1_coop"),
        Pingpong64x128<kAct, false>::entry("64x128x64_c1x1_pingpong"),
        Kernel<64, 256, 1, 1, Pingpong, kAct, false>::entry("64x256x64_c1x1_pingpong"),
    };
  std::vector<KernelEntry> kernels{
      Pingpong128x128<kAct, false>::entry("128x128x64_c1x1_pingpong"),
      Kernel<192, 128, 1, 2, Pingpong, kAct, false>::entry("192x128x64_c1x2_pingpong"),
      Kernel<64, 256, 1, 1, Pingpong, kAct, false>::entry("64x256x64_c1x1_pingpong"),
  };
  if constexpr (kAct == Activation::GeluTanh || kAct == Activation::GeluErfFit)
    kernels.push_back(Pingpong64x128<kAct, false>::entry("64x128x64_c1x1_pingpong"));
  return kernels;
}

// The LayerNorm-folded kernels (the QKV and fc1 GEMMs).
template <Activation kAct>
std::vector<KernelEntry> ln_kernels() {
  return {
      LnKernel<128, 128, 1, 1, Pingpong, kAct>::entry("128x128x64_c1x1_pingpong"),
      LnKernel<64, 128, 1, 1, Pingpong, kAct>::entry("64x128x64_c1x1_pingpong"),
  };
}

// FP8: Y = act(sx sw (X8 W8^T) + bias) (+ residual), the contract of study::Fp8Gemm (gemm/fp8.hpp)
// with per-tensor scales: X8 [m, k] and W8 [n, k] in E4M3 (K-major), fp32 accumulation with
// CUTLASS's fast FP8 accumulation (as cuBLASLt's FP8 kernels run: no periodic promotion of the
// tensor cores' partial sums), sx and sw read from the device in the epilogue. Output fp16, or
// E4M3 for kOutE4M3: saturate(act(...) * y_inv_scale), the next GEMM's input (no residual then).
struct Fp8Cooperative {
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Fp8Pingpong {
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

template <int kTileM, int kTileN, int kClusterM, int kClusterN, class Schedule, Activation kAct, bool kResidual,
          bool kOutE4M3>
struct Fp8Kernel : Entry<Fp8Kernel<kTileM, kTileN, kClusterM, kClusterN, Schedule, kAct, kResidual, kOutE4M3>> {
  static_assert(!(kResidual && kOutE4M3), "an E4M3 output takes no residual");
  using E4M3 = cutlass::float_e4m3_t;
  using T = cutlass::half_t;
  using ElementC = std::conditional_t<kResidual, T, void>;
  using ElementD = std::conditional_t<kOutE4M3, E4M3, T>;
  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<128>>;  // 128 E4M3 = 128 bytes of k per stage
  using ClusterShape = Shape<Int<kClusterM>, Int<kClusterN>, Int<1>>;
  static constexpr int kAlignIn = 16, kAlignC = 8, kAlignD = 16 / sizeof(ElementD);

  using Fusion = cutlass::epilogue::fusion::ScaledLinCombPerColBiasEltAct<ActivationOf<kAct>::template Fn, ElementD,
                                                                          float, T, ElementC, float>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, cutlass::layout::RowMajor, kAlignC,
      ElementD, cutlass::layout::RowMajor, kAlignD, typename Schedule::Epilogue, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E4M3, cutlass::layout::RowMajor, kAlignIn, E4M3,
      cutlass::layout::ColumnMajor, kAlignIn, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Schedule::Mainloop>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  static typename Gemm::Arguments arguments(const Launch& l) {
    using GK = GemmKernel;
    const GemmShape& s = l.shape;
    const Fp8Operands& f = l.f8;
    const ElementC* c = nullptr;
    if constexpr (kResidual) c = reinterpret_cast<const T*>(f.residual);
    ElementD* d = nullptr;
    if constexpr (kOutE4M3)
      d = reinterpret_cast<E4M3*>(f.y8);
    else
      d = reinterpret_cast<T*>(f.y);
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {s.m, s.n, s.k, 1},
        {reinterpret_cast<const E4M3*>(f.x),
         cutlass::make_cute_packed_stride(typename GK::StrideA{}, cute::make_shape(s.m, s.k, 1)),
         reinterpret_cast<const E4M3*>(f.w->q.get()),
         cutlass::make_cute_packed_stride(typename GK::StrideB{}, cute::make_shape(s.n, s.k, 1))},
        {{},
         c,
         cutlass::make_cute_packed_stride(typename GK::StrideC{}, cute::make_shape(s.m, s.n, 1)),
         d,
         cutlass::make_cute_packed_stride(typename GK::StrideD{}, cute::make_shape(s.m, s.n, 1))}};
    args.hw_info.sm_count = l.sm_count;
    using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
    args.scheduler.raster_order = l.raster ? Raster::AlongN : Raster::AlongM;
    args.scheduler.max_swizzle_size = l.swizzle;
    auto& e = args.epilogue.thread;
    e.alpha = 1.f;
    e.beta = kResidual ? 1.f : 0.f;
    e.scale_a_ptr = f.x_scale;
    e.scale_b_ptr = f.w->scale.get();
    if constexpr (kOutE4M3) e.scale_d_ptr = f.y_inv_scale;
    e.bias_ptr = reinterpret_cast<const T*>(f.bias);
    return args;
  }
};

// The FP8 tiles of each epilogue: the fp16 layer's most chosen (128x128 and 64x128 ping-pong,
// 192x128 ping-pong in 1x2 clusters) and the wide cooperative tile of the large-M GEMMs, each
// 128 deep (the same bytes per k-block as the fp16 tiles' 64).
template <Activation kAct, bool kResidual, bool kOutE4M3>
std::vector<KernelEntry> fp8_kernels() {
  return {
      Fp8Kernel<128, 128, 1, 1, Fp8Pingpong, kAct, kResidual, kOutE4M3>::entry("128x128x128_c1x1_pingpong"),
      Fp8Kernel<64, 128, 1, 1, Fp8Pingpong, kAct, kResidual, kOutE4M3>::entry("64x128x128_c1x1_pingpong"),
      Fp8Kernel<192, 128, 1, 2, Fp8Pingpong, kAct, kResidual, kOutE4M3>::entry("192x128x128_c1x2_pingpong"),
      Fp8Kernel<128, 256, 1, 1, Fp8Cooperative, kAct, kResidual, kOutE4M3>::entry("128x256x128_c1x1_coop"),
  };
}

}  // namespace study::cutlass_gemm::detail
#endif  // STUDY_HAVE_CUTLASS
