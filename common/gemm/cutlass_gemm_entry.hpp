// What the CUTLASS GEMM layer (cutlass_gemm.cu) knows of its compiled kernels, without CUTLASS's
// headers: one call's arguments (Launch), a kernel reduced to what the layer times and runs
// (KernelEntry), and the kernel lists the generated units define (cutlass_gemm_kernels.cuh holds
// the kernels themselves). Kept apart so that the layer's host code compiles in seconds, not the
// minutes CUTLASS's templates take to parse.
#pragma once
#include <cuda_runtime.h>
#include <vector>
#include "gemm/cutlass_gemm.hpp"
#include "gemm/fp8.hpp"

namespace study::cutlass_gemm::detail {

// One call: the problem, the operands and the tile scheduler's run-time knobs.
struct Launch {
  GemmShape shape;
  GemmOperands op;
  int raster = 0;   // 0: along M, 1: along N
  int swizzle = 1;  // 1, 2, 4 or 8
  int sm_count = 0;
  LnFold ln;        // the LayerNorm-folded kernels' vectors (unused by the others)
  Gemm* cublaslt = nullptr;  // the cuBLASLt candidate's Gemm (RunOptions::cublaslt)
  Fp8Operands f8;            // the FP8 kernels' operands (op unused then)
  Fp8Gemm* f8_cublaslt = nullptr;  // the FP8 cuBLASLt candidate (Fp8RunOptions::cublaslt)
};

// One compiled kernel, type-erased.
struct KernelEntry {
  const char* name;
  bool (*implementable)(const Launch&);  // CUTLASS's can_implement, with no workspace needed
  cudaError_t (*prepare)();             // kernel attributes: once, outside any capture
  // pdl: launch with programmatic dependent launch (the kernel may start before the previous
  // kernel on the stream ends, and waits for it with griddepcontrol.wait before reading).
  cudaError_t (*run)(const Launch&, cudaStream_t, bool pdl);
  bool scheduler_knobs = true;  // raster and swizzle matter (false: the cuBLASLt candidate)
};

// The kernel list functions (gemm/cutlass_kernel_lists.def), defined in the generated units:
// kernels_bias(), kernels_gelu_erf_fit(), ... (empty in a build without CUTLASS).
#define STUDY_KERNEL_GROUP(...)
#define STUDY_KERNEL_LIST(function, ...) const std::vector<KernelEntry>& function();
#include "gemm/cutlass_kernel_lists.def"
#undef STUDY_KERNEL_GROUP
#undef STUDY_KERNEL_LIST

// The few-rows split-K kernels (small_m.cu) of an epilogue: bias (act None), bias and the residual,
// or an exact GELU; empty for the tanh forms.
const std::vector<KernelEntry>& kernels_small_m(Activation act, bool residual);

}  // namespace study::cutlass_gemm::detail
