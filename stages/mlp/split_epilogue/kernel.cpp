// split_epilogue: fastest_epilogue with the CUTLASS layer's split kernels one more set of
// candidates (common/cutlass_gemm.hpp, RunOptions::workspace): where a GEMM has fewer output
// tiles than SMs (197 rows: 48 tiles of fc1, 12 of fc2 at 128x128), stream-K or split-K shares
// each tile's K loop out over several CTAs, which add their partial sums in a.gemm's workspace
// (lent: the same stream). Two launches, each after a clear of the split kernel's tile flags.
#include "mlp/mlp.hpp"
#include "cutlass_gemm.hpp"

namespace mlp {
namespace {

void launch(const Problem& p, const Args& a, cudaStream_t stream) {
  cutlass_launch(p, a, study::cutlass_gemm::Activation::GeluTanh, /*with_cublaslt=*/true, stream, /*with_split=*/true);
}

}  // namespace

extern const Version split_epilogue{{"split_epilogue", cutlass_supports, launch, study::cutlass_gemm::unavailable},
                                    kTanhGeluRelTol};

}  // namespace mlp
