// Host side of TMA tile loads (sm90.cuh's tma_load_2d): the tensor map of a row-major fp16
// matrix read in boxes of box_rows x 64 halves, 128-byte swizzled (the layout sm90::tile_desc
// describes to wgmma). Boxes reaching past the matrix are zero-filled, so ragged edges need no
// special case. Host code only; the driver entry point is found once through the runtime, so no
// link against libcuda is needed.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include "harness/check.hpp"

namespace sm90 {

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const auto fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !p)
      throw study::StudyError(study::ErrorKind::Library, "the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A row-major [rows, cols] fp16 matrix in boxes of box_rows (at most 256) x 64 columns. cols
// must be a multiple of 8 (16-byte row strides) and p 16-byte aligned.
inline CUtensorMap tile_map(const __half* p, long long rows, long long cols, int box_rows) {
  constexpr cuuint32_t kBoxCols = 64;  // one 128-byte swizzled row of halves
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(__half)};
  const cuuint32_t box[2] = {kBoxCols, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t unit[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<__half*>(p), dims, strides,
                                    box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw study::StudyError(study::ErrorKind::Library,
                            "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return map;
}

}  // namespace sm90
