// N non-blocking CUDA streams that work is spread over and brought back from: fork() makes
// each wait for what is already queued on the caller's stream, join() makes the caller's
// stream wait for all of them. Events recorded on the caller's stream before fork() and after
// join() therefore enclose all of the work, and the pattern also holds inside a stream capture
// (the other streams join the capture through the fork event). Create the set once, outside
// timed regions: creating streams and events is host work that synchronizes the device.
#pragma once
#include <cuda_runtime.h>
#include <vector>

namespace study {

class StreamSet {
 public:
  explicit StreamSet(int count);
  ~StreamSet();
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;

  int size() const { return static_cast<int>(streams_.size()); }
  cudaStream_t operator[](int i) const { return streams_[static_cast<std::size_t>(i)]; }
  void fork(cudaStream_t origin);
  void join(cudaStream_t origin);

 private:
  std::vector<cudaStream_t> streams_;
  cudaEvent_t forked_ = nullptr;
  std::vector<cudaEvent_t> done_;
};

}  // namespace study
