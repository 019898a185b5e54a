#include "harness/streams.hpp"
#include <string>
#include "harness/check.hpp"

namespace study {

StreamSet::StreamSet(int count) {
  if (count < 1) throw StudyError(ErrorKind::Usage, "a stream set needs at least one stream, got " +
                                                        std::to_string(count));
  // Timing is off on these events: they only order work, and timing-disabled events are the
  // cheapest to record and wait on.
  CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  streams_.reserve(static_cast<std::size_t>(count));
  done_.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    // Non-blocking: no implicit ordering with the legacy default stream, so the only order
    // between these streams and the caller's is the one fork() and join() set up.
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    done_.push_back(e);
  }
}

StreamSet::~StreamSet() {
  for (auto e : done_) cudaEventDestroy(e);
  for (auto s : streams_) cudaStreamDestroy(s);
  if (forked_) cudaEventDestroy(forked_);
}

void StreamSet::fork(cudaStream_t origin) {
  CUDA_CHECK(cudaEventRecord(forked_, origin));
  for (auto s : streams_) CUDA_CHECK(cudaStreamWaitEvent(s, forked_, 0));
}

void StreamSet::join(cudaStream_t origin) {
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    CUDA_CHECK(cudaEventRecord(done_[i], streams_[i]));
    CUDA_CHECK(cudaStreamWaitEvent(origin, done_[i], 0));
  }
}

}  // namespace study
