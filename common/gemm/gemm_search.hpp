// Every algorithm cuBLASLt will run for one matmul, not only the heuristic's ranking: for each
// algorithm id of the fp16/fp32 types, the configurations the heuristic proposes for that id
// and the grid of tile x stages x custom option (x split-K 1 and 2) that
// cublasLtMatmulAlgoCheck accepts. The GEMM layer times them all when asked
// (GemmConfig::search_all), to decide whether any kernel cuBLASLt has beats its heuristic's.
#pragma once
#include <cstddef>
#include <string>
#include <vector>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <functional>

namespace study {

struct MatmulDescriptors {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, cd;  // C and D share a layout in the study's GEMMs
  cublasLtMatmulPreference_t pref;  // its search mode is changed and restored
};

// Distinct algorithms (with configurations) that pass cublasLtMatmulAlgoCheck and need at
// most `workspace_bytes`, at most `max_candidates` of them (ids in the order cuBLASLt lists
// them; within an id, the heuristic's proposals first).
std::vector<cublasLtMatmulAlgo_t> every_algorithm(cublasLtHandle_t handle, const MatmulDescriptors& d,
                                                  std::size_t workspace_bytes, int max_candidates);

// "id 66 tile 24 stages 21 splitk 1 custom 0 cluster 0 inner 0": the configuration numbers
// (cublasLt.h's enums), which tell two candidates apart in notes and logs.
std::string describe_algorithm(const cublasLtMatmulAlgo_t& algo);

bool same_algorithm(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b);

// Median device time of `reps` calls of `launch` on `stream` (after one untimed call),
// microseconds, for plan-time algorithm choices; infinity when `launch` returns false (the
// library refused the candidate). Not for a capturing stream.
float median_launch_us(const std::function<bool()>& launch, cudaStream_t stream, int reps);

}  // namespace study
