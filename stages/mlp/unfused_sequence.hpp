// The sequence `unfused` runs and `unfused_graph` captures, kept in one place so the two
// versions differ only in how the launches reach the GPU.
#pragma once
#include "mlp/mlp.hpp"

namespace mlp {

// GEMM (no epilogue) -> bias + GELU kernel -> GEMM (no epilogue) -> bias + residual kernel.
// Four launches, no host sync; h and y are rewritten in place by the pointwise kernels.
void unfused_sequence(const Problem& p, const Args& a, cudaStream_t stream);

}  // namespace mlp
