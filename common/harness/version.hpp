// The record every family's versions share, so that benches, tests and the encoder can ask
// any version the same questions: can it run here, does it compute this problem, how is it
// launched, and how may it be timed. A family adds fields only where it must, by deriving.
#pragma once
#include <cuda_runtime.h>
#include <string>

namespace study {

template <class Problem, class Args>
struct VersionRecord {
  const char* name;
  // Empty when the version computes this problem; otherwise why it refuses it.
  std::string (*supports)(const Problem&);
  // Enqueues the whole operation on `stream` (device inputs in, device outputs out). A version
  // that spreads work over other streams forks from and joins back to `stream`, so that events
  // recorded on it enclose all of the work.
  void (*launch)(const Problem&, const Args&, cudaStream_t);
  // Why this build or this GPU cannot run the version at all (its test suite is then skipped,
  // not failed); null or empty: it can. supports() refuses with the same reason.
  std::string (*unavailable)() = nullptr;
  // Work budget of the bench, in the family's own unit (flops, launches): above it the bench
  // writes a `skipped` row unless --force, because a call would take minutes. 0: no budget.
  double bench_max_work = 0;
  // False for versions that synchronize the host inside launch() or launch too many kernels to
  // capture: they cannot run inside a CUDA graph, so the bench times them as a routine (events
  // around the host-driven sequence) and takes launches and host syncs from the counts below.
  bool capturable = true;
  // Kernel launches and host synchronizations of one call, when they are known analytically
  // (required for versions that are not capturable; capturable ones are counted by capture).
  double (*launch_count)(const Problem&) = nullptr;
  double (*host_sync_count)(const Problem&) = nullptr;

  std::string why_unavailable() const { return unavailable ? unavailable() : std::string(); }

  // A version that cannot run inside a CUDA graph: its counts, and the bench's work budget.
  void not_capturable(double (*launches)(const Problem&), double (*host_syncs)(const Problem&),
                      double max_work) {
    capturable = false;
    launch_count = launches;
    host_sync_count = host_syncs;
    bench_max_work = max_work;
  }
};

// A family's Version with the three fields every version sets, the others at their defaults:
//   Version v = study::make_version<Version>("v6_implicit_gemm", supports, launch);
template <class V>
V make_version(const char* name, decltype(V::supports) supports, decltype(V::launch) launch) {
  V v{};
  v.name = name;
  v.supports = supports;
  v.launch = launch;
  return v;
}

}  // namespace study
