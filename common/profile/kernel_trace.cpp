// Every kernel a program runs, with its start and end on the GPU's clock, written as CSV when the
// program exits: a CUDA injection library (CUDA_INJECTION64_PATH) over CUPTI's activity API. It
// sees the kernels inside CUDA-graph replays one by one, with their graph and node ids, which is
// what a per-kernel table of one replay needs (its durations and the gaps between them); Nsight
// Compute serializes kernels and cannot see gaps, and Nsight Systems is not on every GPU node.
//   CUDA_INJECTION64_PATH=build/common/libkernel_trace.so STUDY_KERNEL_TRACE=out.csv <program>
// Columns: graph_id (0: launched outside a graph), graph_node_id, stream, start_ns, end_ns,
// grid, block, cluster, registers, shared_bytes (static + dynamic), name (mangled).
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  uint32_t graph_id;
  uint64_t graph_node_id;
  uint32_t stream;
  uint64_t start, end;
  int64_t grid, block, cluster;
  uint32_t registers, shared_bytes;
  std::string name;
};

std::mutex records_mutex;
std::vector<KernelRecord> records;
uint64_t dropped = 0;

void fail(const char* what, CUptiResult r) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, msg ? msg : "unknown CUPTI error");
  std::exit(3);
}
#define CUPTI_OK(call)                   \
  do {                                   \
    CUptiResult r_ = (call);             \
    if (r_ != CUPTI_SUCCESS) fail(#call, r_); \
  } while (0)

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t bytes = 8u << 20;
  // CUPTI asks for 8-byte aligned buffers.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* a = nullptr;
  std::lock_guard<std::mutex> lock(records_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
    if (a->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && a->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
    records.push_back({k->graphId, k->graphNodeId, k->streamId, k->start, k->end,
                       int64_t(k->gridX) * k->gridY * k->gridZ, int64_t(k->blockX) * k->blockY * k->blockZ,
                       int64_t(k->clusterX) * k->clusterY * k->clusterZ, k->registersPerThread,
                       uint32_t(k->staticSharedMemory + k->dynamicSharedMemory), k->name ? k->name : "?"});
  }
  std::free(buffer);
}

void write_trace() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CUPTI_OK(cuptiGetLastError());
  size_t n = 0;
  CUPTI_OK(cuptiActivityGetNumDroppedRecords(nullptr, 0, &n));
  dropped += n;
  const char* path = std::getenv("STUDY_KERNEL_TRACE");
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    std::_Exit(3);
  }
  std::fprintf(f, "graph_id,graph_node_id,stream,start_ns,end_ns,grid,block,cluster,registers,shared_bytes,name\n");
  std::lock_guard<std::mutex> lock(records_mutex);
  for (const auto& r : records)
    std::fprintf(f, "%u,%llu,%u,%llu,%llu,%lld,%lld,%lld,%u,%u,%s\n", r.graph_id,
                 (unsigned long long)r.graph_node_id, r.stream, (unsigned long long)r.start,
                 (unsigned long long)r.end, (long long)r.grid, (long long)r.block, (long long)r.cluster,
                 r.registers, r.shared_bytes, r.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels -> %s%s\n", records.size(), path,
               dropped ? " (CUPTI dropped records: the trace is incomplete)" : "");
  if (dropped) std::_Exit(3);
}

}  // namespace

// The CUDA driver calls this once, at its initialization, in every process that sets
// CUDA_INJECTION64_PATH to this library.
extern "C" int InitializeInjection() {
  if (!std::getenv("STUDY_KERNEL_TRACE")) {
    std::fprintf(stderr, "kernel_trace: set STUDY_KERNEL_TRACE to the CSV file to write\n");
    std::exit(2);
  }
  CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  std::atexit(write_trace);
  return 1;
}
