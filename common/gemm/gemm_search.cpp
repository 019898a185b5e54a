#include "gemm/gemm_search.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include "harness/check.hpp"

namespace study {

namespace {

constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
constexpr cudaDataType_t kScale = CUDA_R_32F, kData = CUDA_R_16F;

// A capability that is an array of uint32 ids (tiles, stages); {0} ("undefined", the algorithm
// picks) when the algorithm lists none.
std::vector<std::uint32_t> cap_ids(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {0};
  std::vector<std::uint32_t> ids(bytes / sizeof(std::uint32_t));
  CUBLAS_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, ids.data(), bytes, &bytes));
  return ids.empty() ? std::vector<std::uint32_t>{0} : ids;
}

std::int32_t cap_int(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  std::int32_t v = 0;
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof v, &bytes) != CUBLAS_STATUS_SUCCESS) return 0;
  return v;
}

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t bytes = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &bytes);
  return v;
}

template <typename T>
void set_config(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof v));
}

struct Collector {
  cublasLtHandle_t handle;
  const MatmulDescriptors& d;
  std::size_t workspace_bytes;
  int max_candidates;
  std::vector<cublasLtMatmulAlgo_t> found;

  bool full() const { return static_cast<int>(found.size()) >= max_candidates; }
  void offer(const cublasLtMatmulAlgo_t& algo) {
    if (full()) return;
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoCheck(handle, d.desc, d.a, d.b, d.cd, d.cd, &algo, &r) != CUBLAS_STATUS_SUCCESS ||
        r.workspaceSize > workspace_bytes)
      return;
    for (const auto& f : found)
      if (same_algorithm(f, algo)) return;
    found.push_back(algo);
  }
};

// The heuristic restricted to one algorithm id: its own choice of tile, stages and cluster.
void heuristic_for_id(Collector& c, const cublasLtMatmulAlgo_t& base) {
  constexpr int kWanted = 16;
  std::vector<cublasLtMatmulHeuristicResult_t> results(kWanted);
  for (auto& r : results) r.algo = base;
  std::uint32_t mode = CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(c.d.pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode, sizeof mode));
  int n = 0;
  const auto st = cublasLtMatmulAlgoGetHeuristic(c.handle, c.d.desc, c.d.a, c.d.b, c.d.cd, c.d.cd, c.d.pref,
                                                 kWanted, results.data(), &n);
  mode = CUBLASLT_SEARCH_BEST_FIT;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(c.d.pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode, sizeof mode));
  if (st != CUBLAS_STATUS_SUCCESS) return;
  for (int i = 0; i < n; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) c.offer(results[i].algo);
}

// Hand-made configurations: tile x stages x custom option x split-K {1, 2}. Cluster and inner
// shape stay "auto": no capability lists their values.
void grid_for_id(Collector& c, const cublasLtMatmulAlgo_t& base) {
  const auto tiles = cap_ids(base, CUBLASLT_ALGO_CAP_TILE_IDS);
  const auto stages = cap_ids(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
  const int custom_max = cap_int(base, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
  const bool splitk = cap_int(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
  for (std::uint32_t tile : tiles)
    for (std::uint32_t stage : stages)
      for (std::uint32_t custom = 0; custom <= static_cast<std::uint32_t>(custom_max); ++custom)
        for (std::uint32_t split = 1; split <= (splitk ? 2u : 1u); ++split) {
          if (c.full()) return;
          cublasLtMatmulAlgo_t algo = base;
          set_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
          set_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stage);
          set_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom);
          set_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split);
          c.offer(algo);
        }
}

}  // namespace

bool same_algorithm(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return std::memcmp(a.data, b.data, sizeof a.data) == 0;
}

std::vector<cublasLtMatmulAlgo_t> every_algorithm(cublasLtHandle_t handle, const MatmulDescriptors& d,
                                                  std::size_t workspace_bytes, int max_candidates) {
  int id_count = 0;
  std::vector<int> ids(1024);
  CUBLAS_CHECK(cublasLtMatmulAlgoGetIds(handle, kCompute, kScale, kData, kData, kData, kData,
                                        static_cast<int>(ids.size()), ids.data(), &id_count));
  ids.resize(id_count);
  Collector c{handle, d, workspace_bytes, max_candidates, {}};
  for (int id : ids) {
    cublasLtMatmulAlgo_t base{};
    if (cublasLtMatmulAlgoInit(handle, kCompute, kScale, kData, kData, kData, kData, id, &base) !=
        CUBLAS_STATUS_SUCCESS)
      continue;
    heuristic_for_id(c, base);
    grid_for_id(c, base);
  }
  return c.found;
}

std::string describe_algorithm(const cublasLtMatmulAlgo_t& algo) {
  return "id " + std::to_string(config<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) +
         " tile " + std::to_string(config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) +
         " stages " + std::to_string(config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) +
         " splitk " + std::to_string(config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) +
         " custom " + std::to_string(config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)) +
         " cluster " + std::to_string(config<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)) +
         " inner " + std::to_string(config<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID));
}

float median_launch_us(const std::function<bool()>& launch, cudaStream_t stream, int reps) {
  std::vector<float> ms(static_cast<std::size_t>(reps));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  bool ran = true;
  for (int r = -1; r < reps && ran; ++r) {  // r = -1: warm-up
    CUDA_CHECK(cudaEventRecord(start, stream));
    ran = launch();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    if (r >= 0) CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<std::size_t>(r)], start, stop));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!ran) return INFINITY;
  std::sort(ms.begin(), ms.end());
  return 1000.f * ms[static_cast<std::size_t>(reps / 2)];
}

}  // namespace study
