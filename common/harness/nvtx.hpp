// NVTX ranges so Nsight Systems / Compute timelines show the study's regions by name.
#pragma once
#include <nvtx3/nvToolsExt.h>

namespace study {
struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};
}  // namespace study
