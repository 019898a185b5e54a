// v3_streams: v2's launches without a host wait, spread round-robin over problem.streams
// streams forked from the caller's stream and joined back to it, so independent kernels may
// run side by side and the host never waits. Results stay on the device.
#include "harness/check.hpp"
#include "harness/streams.hpp"
#include "patch_embed/kernels.cuh"
#include "patch_embed/v3_streams/v3_streams.hpp"

namespace patch_embed {

void v3_preprocess(const Problem& p, const Args& a, cudaStream_t stream) {
  launch_patchify(p, a.images, static_cast<__half*>(a.scratch), stream);
}

void v3_compute(const Problem& p, const Args& a, cudaStream_t stream) {
  if (!a.streams || a.streams->size() < p.streams)
    throw study::StudyError(study::ErrorKind::Usage, "v3_streams needs Args::streams with at least " +
                                                         std::to_string(p.streams) + " streams");
  Timeline* tl = a.timeline;
  const std::size_t n = static_cast<std::size_t>(p.batch) * p.hidden * patches_per_image(p);
  if (tl && tl->start.size() < n)
    throw study::StudyError(study::ErrorKind::Usage, "the timeline holds fewer events than launches");
  launch_cls_rows(p, a, stream);
  // Inside a stream capture (v3_streams_graph) the records are external, so they become event
  // nodes of the graph instead of mere dependencies and the replayed graph records them too;
  // outside one the flag is not allowed.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  const unsigned record_flags = capturing == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : 0;
  if (tl) CUDA_CHECK(cudaEventRecordWithFlags(tl->origin, stream, record_flags));
  study::StreamSet& set = *a.streams;
  set.fork(stream);  // every stream waits for the patch-major copy
  const __half* patches = static_cast<const __half*>(a.scratch);
  const int P = patches_per_image(p);
  std::size_t i = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int o = 0; o < p.hidden; ++o)
      for (int patch = 0; patch < P; ++patch, ++i) {
        const int s = static_cast<int>(i % static_cast<std::size_t>(p.streams));
        if (tl) {
          tl->stream[i] = s;
          CUDA_CHECK(cudaEventRecordWithFlags(tl->start[i], set[s], record_flags));
        }
        launch_patch_dot(p, a, patches, b, o, patch, set[s]);
        if (tl) CUDA_CHECK(cudaEventRecordWithFlags(tl->end[i], set[s], record_flags));
      }
  if (tl) tl->used = n;
  set.join(stream);
}

void v3_enqueue(const Problem& p, const Args& a, cudaStream_t stream) {
  v3_preprocess(p, a, stream);
  v3_compute(p, a, stream);
}

double v3_launches(const Problem& p) {
  return 2.0 + static_cast<double>(p.batch) * p.hidden * patches_per_image(p);
}

namespace {

std::size_t scratch(const Problem& p) {  // the patch-major copy, as v2
  return static_cast<std::size_t>(p.batch) * patches_per_image(p) * kPatchElems * sizeof(__half);
}

std::string supports(const Problem& p) {
  if (auto r = check_common(p, true); !r.empty()) return r;
  if (p.streams > 1024) return "streams above 1024 are refused (" + std::to_string(p.streams) + ")";
  return {};
}

double no_syncs(const Problem&) { return 0; }

}  // namespace

extern const Version v3_streams = [] {
  Version v = staged_version<v3_preprocess, v3_compute>("v3_streams", supports, scratch);
  // Capturable in principle, but not at millions of launches; no host wait per launch: about
  // 2-4 us each, so 1e6 launches are a few seconds per call.
  v.not_capturable(v3_launches, no_syncs, 1e6);
  v.multi_stream = true;
  return v;
}();

}  // namespace patch_embed
