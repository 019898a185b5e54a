// Patch-embedding family contract: ViT's Conv2d(3 -> hidden, kernel 16, stride 16) over fp16
// NCHW images, flattened to token rows, with the cls token prepended and the learned position
// embedding added (what the encoder consumes):
//   out[b*tokens + 0]     = cls_token + pos_embed[0]
//   out[b*tokens + 1 + p] = conv(images[b], patch p) + conv_b + pos_embed[1 + p]
// with tokens = 1 + (S/16)^2 and patches in row-major order over the grid (timm's
// flatten(2).transpose(1, 2)). fp16 storage, fp32 accumulation. Every version implements
// exactly this; bench, test and encoder swap versions by name.
#pragma once
#include <cstddef>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>
#include <vector>
#include "harness/version.hpp"

namespace study {
class Gemm;
class StreamSet;
}  // namespace study

namespace patch_embed {

constexpr int kPatch = 16;
constexpr int kChannels = 3;
constexpr int kPatchElems = kChannels * kPatch * kPatch;  // 768: the GEMM's K

struct Problem {
  int batch = 0;
  int image_size = 0;  // S: a positive multiple of 16
  int hidden = 0;
  int streams = 1;  // streams the multi-stream versions spread their launches over
};

// Per-launch CUDA events of one call (the streams timeline); recorded only when a caller asks
// for it, never in timed runs, because an event between launches changes what is measured.
struct Timeline {
  explicit Timeline(std::size_t launches);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  cudaEvent_t origin = nullptr;        // recorded on the caller's stream before the fork
  std::vector<cudaEvent_t> start, end;  // per kernel launch, on the stream it ran on
  std::vector<int> stream;              // index of that stream in the StreamSet
  std::size_t used = 0;                 // launches recorded by the last call
};

struct Args {
  const __half* images;     // [batch, 3, S, S] NCHW
  const __half* conv_w;     // [hidden, 3, 16, 16] = row-major [hidden, 768]
  const __half* conv_b;     // [hidden]
  const __half* cls_token;  // [hidden]
  const __half* pos_embed;  // [tokens, hidden]
  __half* out;              // [batch * tokens, hidden]
  void* scratch;            // scratch_bytes(problem) bytes of device workspace, 256-byte aligned
  study::Gemm* gemm;        // cuBLASLt layer (v5_im2col_gemm); null for the others
  // Streams the multi-stream versions fork to from the caller's stream and join back from:
  // at least problem.streams of them, created once outside timing. Null for the others.
  study::StreamSet* streams;
  Timeline* timeline;  // null: no per-launch events (always null in timed runs)
};

struct Version : study::VersionRecord<Problem, Args> {
  // Device workspace one call needs (Args::scratch), bytes.
  std::size_t (*scratch)(const Problem&) = nullptr;
  // The launch() split into its preprocessing (re-sorting the images patch-major) and the
  // rest, so a routine can time the two apart; both null when there is no preprocessing.
  void (*preprocess)(const Problem&, const Args&, cudaStream_t) = nullptr;
  void (*compute)(const Problem&, const Args&, cudaStream_t) = nullptr;
  // Spreads its launches over problem.streams streams (Args::streams); the other versions
  // refuse streams above 1.
  bool multi_stream = false;
  // Needs Args::gemm (the cuBLASLt layer).
  bool uses_gemm = false;
  // Runs on the host (cpu_baseline): the bench times its computation on the CPU instead.
  bool on_host = false;
  // The unit of bench_max_work, for the bench's `skipped` note ("launches", "multiply-adds").
  const char* work_unit = "launches";
  // Work of one call in that unit; null: launch_count.
  double (*work)(const Problem&) = nullptr;
};

// The launch() of a version that splits into preprocess and compute: both, in order, on the
// caller's stream (v.launch = staged<preprocess, compute>).
using StageFn = void (*)(const Problem&, const Args&, cudaStream_t);
template <StageFn kPreprocess, StageFn kCompute>
void staged(const Problem& p, const Args& a, cudaStream_t stream) {
  kPreprocess(p, a, stream);
  kCompute(p, a, stream);
}

// Such a version's record: launch runs both stages; scratch holds what preprocessing writes.
template <StageFn kPreprocess, StageFn kCompute>
Version staged_version(const char* name, std::string (*supports)(const Problem&),
                       std::size_t (*scratch)(const Problem&)) {
  Version v = study::make_version<Version>(name, supports, staged<kPreprocess, kCompute>);
  v.scratch = scratch;
  v.preprocess = kPreprocess;
  v.compute = kCompute;
  return v;
}

// All versions in ladder order; find_version throws StudyError(Usage) for an unknown name.
const std::vector<Version>& versions();
const Version& find_version(const std::string& name);

// Largest workspace over the versions (what an encoder that may pick any of them allocates).
std::size_t scratch_bytes(const Problem& p);

int tokens(const Problem& p);   // 1 + (S/16)^2
int patches_per_image(const Problem& p);  // (S/16)^2
// Fewest bytes any version must move: read the images, the weight, bias, cls and position
// embedding once, write the token rows once.
double bytes(const Problem& p);
// The convolution's multiply-adds, twice: 2 * batch * patches * hidden * 768.
double flops(const Problem& p);
// Work of one call of v in its own unit (launches, or multiply-adds for the CPU).
double work(const Version& v, const Problem& p);

// Checks every version shares: positive sizes, image a multiple of 16, element counts within
// 32-bit indexing, and streams == 1 unless multi_stream.
std::string check_common(const Problem& p, bool multi_stream = false);

// The CPU computation of cpu_baseline on host fp32 copies of the fp16 inputs (the bench times
// it directly; the version's launch() wraps it in copies for the tests).
struct HostArgs {
  const float* images;
  const float* conv_w;
  const float* conv_b;
  const float* cls_token;
  const float* pos_embed;
  float* out;
};
void cpu_forward(const Problem& p, const HostArgs& a);

}  // namespace patch_embed
